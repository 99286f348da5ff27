"""Fault tables among a document's table blocks: the code column found by content, the other
columns by their header (zh/en/de synonyms) or, where no header names them, by content.

A column is the code column when most of its non-empty cells are alarm codes under the code
rules of `pipeline.kb.layouts` (a code, a combined or ranged code cell, or a code followed by
its message: `25000 Axis %1 hardware fault`); a header naming it (报警号, Alarm No., Code,
Fehlernummer) breaks ties but is not needed. A table without one is keyed by symptom when a
symptom column and a cause or remedy column are named, else it gives no entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.kb.layouts import (
    CAUSE_SENTENCE,
    CODE_GROUP,
    LABEL_FIELD,
    QUANTITY,
    REMEDY_SENTENCE,
)

HEADER_ALIASES: dict[str, tuple[str, ...]] = {
    "code": ("报警号", "报警代码", "报警编号", "故障代码", "故障码", "错误代码", "代码", "alarm",
             "alarmno", "alarmnumber", "alarmcode", "errorcode", "faultcode", "errorno", "code",
             "errornumber", "alarmnr", "fehlernummer", "fehlernr", "fehlercode", "alarmnummer",
             "meldungsnummer", "报警码", "错误码", "故障编号", "异常代码", "警报代码", "alarmid",
             "errorid", "faultid", "errcode", "errno", "almno", "alm"),
    "symptom": ("故障现象", "现象", "故障", "故障描述", "故障症状", "问题", "symptom", "symptoms",
                "problem", "trouble", "fault", "condition"),
    "message": ("报警信息", "报警内容", "报警名称", "报警文本", "信息", "内容", "名称", "message",
                "text", "alarmtext", "alarmmessage", "title", "name", "errormessage", "errortext",
                "alarmname", "alarmtitle", "meldung", "meldetext", "fehlertext", "fehlermeldung",
                "alarmtexte", "报警名", "故障名称", "错误信息", "错误名称", "警报名称", "警报内容",
                "msg", "errmsg", "errorname", "faultname", "faultmessage", "faulttext"),
    "description": ("说明", "描述", "详细说明", "报警说明", "含义", "description", "explanation",
                    "meaning", "details", "beschreibung", "erläuterung", "erklärung", "bedeutung",
                    "报警描述", "错误描述", "desc", "detail"),
    "cause": ("原因", "故障原因", "可能原因", "报警原因", "产生原因", "原因分析", "cause",
              "causes", "possiblecause", "possiblecauses", "probablecause", "reason",
              "causeoferror", "ursache", "fehlerursache", "发生原因", "错误原因", "reasons",
              "rootcause"),
    "remedy": ("处理", "处理方法", "处理措施", "排除方法", "对策", "解决方法", "措施", "维修方法",
               "处理办法", "remedy", "remedies", "action", "actions", "solution", "countermeasure",
               "correctiveaction", "troubleshooting", "errorcorrection", "abhilfe", "behebung",
               "fehlerbehebung", "maßnahme", "maßnahmen", "处理对策", "解决办法", "解决措施",
               "排除措施", "处置方法", "处理建议", "对应方法", "measure", "measures", "handling",
               "handle", "fix", "resolution", "countermeasures", "correctiveactions"),
    "effect": ("影响", "后果", "报警影响", "系统反应", "反应", "effect", "reaction", "consequence",
               "reaktion", "auswirkung", "systemreaktion"),
    "prevention": ("预防", "预防措施", "预防对策", "prevention", "preventiveaction", "vorbeugung"),
    "_index": ("序号", "no", "number", "nr", "item", "#", "编号"),
}  # fmt: skip
_ALIAS = {alias: name for name, aliases in HEADER_ALIASES.items() for alias in aliases}


def header_text(cell: str) -> str:
    """A header cell as compared with the synonyms: spaces and punctuation dropped, lower case."""
    return re.sub(r"[\s_.\-/()（）:：*]", "", cell).lower()


def header_key(cell: str) -> str | None:
    """The field a header cell names exactly (spaces and punctuation dropped)."""
    key = header_text(cell)
    return _ALIAS.get(key) or ("_index" if key in {"#", "no"} else None)


# Share of a column's non-empty cells that must be codes.
MIN_CODE_SHARE = 0.8
# Headers of columns that hold numbers but never alarm codes.
_NOT_CODE_HEADERS = {
    "参数", "参数号", "parameter", "machinedata", "md", "机床数据", "诊断号", "diagnosis",
    "地址", "address", "信号", "signal", "日期", "date", "时间", "time", "版本", "version",
    "page", "页", "页码", "型号", "model", "订货号", "ordernumber", "partnumber", "零件号",
    "gcode", "mcode", "g代码", "m代码", "指令", "command", "数值", "value", "默认值",
    "default", "单位", "unit", "范围", "range", "设定值", "setting",
}  # fmt: skip
_CODE_CELL = re.compile(
    rf"^[【\[(（]?(?P<code>{CODE_GROUP})(?![A-Za-z0-9])[】\])）]?"
    r"(?:\s*[:：.\-–]?\s+(?P<message>\S.*))?$",
    re.S,
)
_NC_WORD = re.compile(r"^[GMTFHD]\d{2,3}(?:\.\d)?$")  # G01, M03: program words, not alarms
_BARE = re.compile(r"^[\d\s/、,，;；&+~～〜–—-]+$")
_FREE_TEXT = re.compile(r"[A-Za-z\u4e00-\u9fff]{2}")
_CONTENT_FIELDS = ("message", "description", "cause", "remedy", "effect", "prevention")


def header_field(cell: str) -> str | None:
    """The field a header cell names (`code`, `message`, ..., `_index`, `_other`), trying the
    whole cell, then each run of one script (`报警号 Alarm No.`), then each run's last word
    (`Alarm class`); None when it names none."""
    runs = re.findall(r"[\u4e00-\u9fff]+|[^\u4e00-\u9fff]+", cell)
    words = [run.split()[-1] for run in runs if run.split()]
    for part in (cell, *runs, *words):
        key = re.sub(r"[\s_.\-/()（）:：*]", "", part).lower()
        if not key:
            continue
        if key in _NOT_CODE_HEADERS:
            return "_other"
        if field := header_key(part) or LABEL_FIELD.get(key):
            return field
    return None


def code_cell(cell: str) -> tuple[str, str] | None:
    """(codes as printed, message after them) when a cell is a code cell."""
    m = _CODE_CELL.match(cell.strip().strip("*_ "))
    if m is None:
        return None
    message = (m.group("message") or "").strip()
    if message and (QUANTITY.match(message) or not _FREE_TEXT.search(message)):
        return None
    return m.group("code"), message


@dataclass
class TableLayout:
    """Where a fault table's fields are: the code column (None: keyed by symptom), and the
    columns of each other field, left to right."""

    code: int | None
    fields: dict[str, list[int]]


def split_header(cells: list[list[str]], header_rows: int) -> tuple[list[list[str]], list]:
    """(header rows, body rows); a table given without header rows whose first row names at
    least two fields and holds no code has that row as its header."""
    if header_rows == 0 and len(cells) > 1:
        named = [header_field(c) for c in cells[0] if c.strip()]
        if sum(f is not None for f in named) >= 2 and not any(code_cell(c) for c in cells[0]):
            header_rows = 1
    return cells[:header_rows], cells[header_rows:]


def _values(body: list[list[str]], column: int) -> list[str]:
    return [row[column].strip() for row in body if column < len(row) and row[column].strip()]


def _code_score(values: list[str], named: bool) -> tuple[float, float] | None:
    """(share of code cells, share of pure code cells) for a candidate code column, or None
    when it is not one."""
    found = [code_cell(v) for v in values]
    codes = [f for f in found if f is not None]
    if not values or len(codes) < MIN_CODE_SHARE * len(values):
        return None
    pure = [code for code, message in codes if not message]
    if not named:
        if pure and all(_NC_WORD.match(c) for c in pure):
            return None
        bare = [c for c, _ in codes if _BARE.match(c)]
        if len(bare) == len(codes) and (len(bare) < 2 or len(set(bare)) < len(bare)):
            return None  # one bare number, or repeated ones: a value column, not codes
    return len(codes) / len(values), len(pure) / len(values)


def code_column(fields: list[str | None], body: list[list[str]]) -> int | None:
    """The code column: the best-scoring candidate (named by its header first, then the share
    of pure code cells, then the leftmost)."""
    best: tuple[tuple, int] | None = None
    for column, field in enumerate(fields):
        if field not in (None, "code", "_index"):
            continue
        score = _code_score(_values(body, column), named=field == "code")
        if score is not None:
            key = (field == "code", score[1], score[0], -column)
            best = max(best, (key, column)) if best else (key, column)
    return best[1] if best else None


def _by_content(values: list[str], taken: dict[str, list[int]]) -> str | None:
    """The field of an unnamed free-text column: instructions are remedies, explanations of
    why causes; else the message, then the description, whichever is still free."""
    if not values or not any(_FREE_TEXT.search(v) for v in values):
        return None
    share = len(values) / 2
    if "remedy" not in taken and sum(bool(REMEDY_SENTENCE.match(v)) for v in values) > share:
        return "remedy"
    if "cause" not in taken and sum(bool(CAUSE_SENTENCE.search(v)) for v in values) > share:
        return "cause"
    return next((f for f in ("message", "description") if f not in taken), None)


def table_layout(header: list[list[str]], body: list[list[str]]) -> TableLayout | None:
    """The layout of a fault table, or None when the table is not one."""
    width = max(len(row) for row in header + body) if header + body else 0
    fields: list[str | None] = []
    for column in range(width):
        named = [header_field(row[column]) for row in reversed(header) if column < len(row)]
        fields.append(next((f for f in named if f), None))
    code = code_column(fields, body)
    taken: dict[str, list[int]] = {}
    for column, field in enumerate(fields):
        if column != code and field in (*_CONTENT_FIELDS, "symptom"):
            taken.setdefault(field, []).append(column)
    for column, field in enumerate(fields):
        if column == code or field not in (None, "code"):
            continue
        if target := _by_content(_values(body, column), taken):
            taken.setdefault(target, []).append(column)
    if code is None and not ("symptom" in taken and {"cause", "remedy"} & set(taken)):
        return None
    return TableLayout(code=code, fields=taken)


def _row_values(row: list[str], layout: TableLayout) -> dict[str, str]:
    """A body row's non-empty field values (several columns of one field joined by lines)."""
    values = {
        field: "\n".join(row[c].strip() for c in columns if c < len(row) and row[c].strip())
        for field, columns in layout.fields.items()
    }
    return {field: value for field, value in values.items() if value}


def _add(entry: dict, values: dict[str, str]) -> None:
    """Values of a continued row (merged code cell, or a wrapped row without one) added to the
    entry they continue, where new."""
    for field, value in values.items():
        known = entry.get(field, "")
        if value not in known.split("\n"):
            entry[field] = f"{known}\n{value}" if known else value


def table_entries(cells: list[list[str]], header_rows: int) -> tuple[list[dict], str] | None:
    """(entries, header text of the code column) of a fault table, None when the table is not
    one. An entry holds `row` (the index in `cells` of its first row), `raw`, `code` or
    `symptom` and its fields; a row repeating the code above (a merged cell) or without a code
    continues that entry. An entry with a description but no message has the description as
    its message (`Error No. | Details | Remedy`), as vendor tables do."""
    header, body = split_header(cells, header_rows)
    layout = table_layout(header, body)
    if layout is None:
        return None
    entries: list[dict] = []
    last_key = None
    for index, row in enumerate(body):
        values = _row_values(row, layout)
        if layout.code is None:
            key = values.get("symptom", "")
        else:
            key = row[layout.code].strip() if layout.code < len(row) else ""
        if len(row) > 1 and all(c.strip() for c in row) and len({c.strip() for c in row}) == 1:
            continue  # a caption row spanning the table (伺服报警), its cell repeated
        if entries and (not key or key == last_key):
            _add(entries[-1], values)
            entries[-1]["raw"] += "\n" + " | ".join(row)
            continue
        entry = {"row": len(header) + index, "raw": " | ".join(row), **values}
        if layout.code is not None and (found := code_cell(key)):
            entry["code"] = found[0]
            if found[1] and "message" not in entry:
                entry["message"] = found[1]
        entries.append(entry)
        last_key = key
    for entry in entries:
        if "message" not in entry and "description" in entry:
            entry["message"] = entry.pop("description")  # the only text: the alarm's message
    column = layout.code
    return entries, " ".join(r[column] for r in header if column is not None and column < len(r))
