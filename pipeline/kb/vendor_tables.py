"""Vendor fault-code tables as files, found and read with zero configuration.

A file is a fault table when, by content, one column (or key) holds alarm codes and others are
named message / description / cause / remedy / effect / prevention (the zh/en synonyms and
JSON key names of `HEADER_ALIASES`), and nothing says work order: no column of dates, no order
number, asset / machine id or technician column. Layouts: delimited text (`,` `;` tab `|`),
XLSX, a JSON array (or an object holding one, or an object keyed by code), JSONL, YAML; nested
per-language objects (`{"id": 2, "zh_CN": {"description": ...}, "en": {...}}`) and per-language
columns (`message_en`, `报警信息(中文)`) give one row per language; vendors' alarm-message text
files: a code line (`A.020`, `AL.16 Encoder error`, `Er.101：编码器故障`), its message, then
`$Cause` / `$Remedy` blocks or `Cause:` / `原因：` lines. A comment, key or title line above the
header is skipped, as work-order report titles are. The family comes from the title and
headers, else the file's folder and name, else the text (brands), else the configured default.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import fastexcel
import polars as pl
import yaml

from pipeline.core.errors import InputFileError
from pipeline.core.stage import StageResult, empty_rejects, make_rejects, stage_result
from pipeline.ingest.encoding import read_text
from pipeline.ingest.files import relative_path
from pipeline.ingest.workorders.columns import header_field
from pipeline.ingest.workorders.xlsx_merges import sheet_layout
from pipeline.kb.fault_codes import (
    FIELDS,
    SOURCE_KIND,
    STAGE,
    finish_entries,
    one_row_per_code,
    read_vendor_table,
)
from pipeline.kb.tables import header_key, header_text
from pipeline.text.alarm_codes import family_of
from schemas.ingest import IngestConfig
from schemas.manuals import FAULT_CODE_SCHEMA, ManualsConfig, VendorTableSource

HEADER_ROWS = 30  # rows searched for the header, as for work orders
_DETAIL = {"message", "description", "cause", "remedy", "effect"}
_KEPT_LANGUAGES = {"zh", "en"}
_LANGUAGES = {
    **dict.fromkeys(("zh", "zhcn", "zhhans", "cn", "chs", "chinese", "中文", "简体中文"), "zh"),
    **dict.fromkeys(("en", "enus", "engb", "english", "英文"), "en"),
    **{k: k[:2] for k in ("de", "dede", "ja", "jajp", "ko", "kokr", "fr", "es", "it", "ru")},
    **dict.fromkeys(("zhtw", "zhhant", "tw", "cht"), "zh-Hant"),
}
_LANGUAGE_TAG = "|".join(sorted((re.escape(k) for k in _LANGUAGES), key=len, reverse=True))
_TAGGED = (
    re.compile(rf"(?i)^(?P<lang>{_LANGUAGE_TAG})[_\s.\-]+(?P<rest>.+)$"),
    re.compile(rf"(?i)^(?P<rest>.+?)\s*(?:[_\-.\s]|[(（\[【])(?P<lang>{_LANGUAGE_TAG})[)）\]】]?$"),
)
# Headers that name a code column only when its values are codes (an index, a JSON `id`).
_ID_KEYS = {"id", "no", "nr", "number", "编号", "序号", "key", "index", "#", "item", ""}
_CODE_VALUE = re.compile(
    r"^(?:[A-Za-z]{1,4}\s?[.\-#:]?\s?)?[A-Za-z]?\d[0-9A-Za-z]{0,7}(?:[.\-][0-9A-Za-z]{1,4})?"
    r"(?:\s[0-9A-F]{4})?$"
)
_DATE = re.compile(r"^\s*(?:\d{4}\s*[-/.年]\s*\d{1,2}\s*[-/.月]\s*\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4})")
_WORK_ORDER_SIGNALS = {"order_id", "asset", "reported_at", "technician"}
_BRANDS = {
    "GSK": r"\bgsk\b|广州数控|广数",
    "KND": r"\bknd\b|凯恩帝",
    "HNC": r"\bhnc\b|华中数控",
    "SYNTEC": r"syntec|新代",
    "MAZAK": r"mazak|mazatrol|马扎克",
    "OKUMA": r"okuma|大隈",
    "YASKAWA": r"yaskawa|安川|sigma-?[57]|σ-?[57]",
    "DELTA": r"\bdelta\b|台达|\basda",
    "INOVANCE": r"inovance|汇川",
    "PANASONIC": r"panasonic|松下|\bminas\b",
    "DOBOT": r"dobot|越疆",
}


@dataclass
class Table:
    """A file's entries: flattened keys (`zh_CN.description`) to text, each with its line (or
    1-based entry index) and raw text; `titles`: the lines above the header."""

    headers: list[str]
    records: list[dict[str, str | None]]
    lines: list[int]
    raws: list[str]
    titles: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Columns:
    """Where a table's entries are: the code column, and (field, language) -> column."""

    code: str
    fields: dict[tuple[str, str | None], str]
    languages: tuple[str | None, ...]


def _key(header: str) -> str:
    return re.sub(r"[\s_.\-/()（）:：*]", "", header).lower()


def field_of(header: str) -> tuple[str, str | None] | None:
    """(fault field, language) a flattened header names: `zh_CN.solution` -> (remedy, zh),
    `Message (EN)` -> (message, en), `原因` -> (cause, None); None when it names none."""
    parts = header.split(".")
    languages = [_LANGUAGES[_key(p)] for p in parts[:-1] if _key(p) in _LANGUAGES]
    leaf = parts[-1]
    found = _field(leaf)
    if found is None:
        for pattern in _TAGGED:
            m = pattern.match(leaf.strip())
            if m and (found := _field(m["rest"])) is not None:
                languages.append(_LANGUAGES[_key(m["lang"])])
                break
    if found is None:
        return None
    return found, (languages[-1] if languages else None)


# -- loading -------------------------------------------------------------------------------


def _cell(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return "\n".join(str(v) for v in value)  # a list of causes: one item a line
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _flatten(obj: dict, prefix: str = "") -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = _cell(value)
    return out


def _objects_table(objects: list[object], lines: list[int], titles: list[str]) -> Table:
    records = [_flatten(o) if isinstance(o, dict) else {"value": _cell(o)} for o in objects]
    headers = list(dict.fromkeys(k for r in records for k in r))
    raws = [json.dumps(o, ensure_ascii=False, sort_keys=True, default=str) for o in objects]
    return Table(headers, records, lines, raws, titles)


def _entries(data: object) -> tuple[list[object], list[str]]:
    """The entries of a parsed JSON/YAML document, and its scalar keys as titles: a list, the
    largest list of objects in an object, or an object keyed by code."""
    if isinstance(data, list):
        return data, []
    if not isinstance(data, dict):
        return [], []
    titles = [f"{k}: {v}" for k, v in data.items() if not isinstance(v, dict | list)]
    lists = [v for v in data.values() if isinstance(v, list) and v and isinstance(v[0], dict)]
    if lists:
        return max(lists, key=len), titles
    keyed = {k: v for k, v in data.items() if isinstance(v, dict)}
    if len(keyed) >= 2:
        return [{"code": k, **v} for k, v in keyed.items()], titles
    return [], titles


def _json_head(text: str, complete: bool) -> object:
    """The whole document, or (for a cut head) the array elements that parse."""
    if complete:
        return json.loads(text)
    decoder, pos, found = json.JSONDecoder(), text.index("[") + 1, []
    while True:
        pos = len(text) - len(text[pos:].lstrip(" \t\r\n,"))
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return found
        found.append(obj)


def _jsonl_table(text: str, complete: bool) -> Table:
    objects, lines, titles = [], [], []
    rows = text.splitlines()
    for number, line in enumerate(rows if complete else rows[:-1], 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "//")):
            titles += [stripped] if stripped else []
            continue
        objects.append(json.loads(stripped))
        lines.append(number)
    return _objects_table(objects, lines, titles)


def _document_table(text: str, layout: str, complete: bool) -> Table:
    data = _json_head(text, complete) if layout == "json" else yaml.safe_load(text)
    objects, titles = _entries(data)
    return _objects_table(objects, list(range(1, len(objects) + 1)), titles)


def _header_score(cells: list[str]) -> int:
    """Distinct fault fields a row names, 0 unless one is a detail field."""
    named = {f for c in cells if c and (f := field_of(c)) and not f[0].startswith("_")}
    return len(named) if any(f in _DETAIL for f, _ in named) else 0


def _header_row(rows: list[list[str]]) -> tuple[int, int]:
    """(index, score) of the row among the first ones naming the most fault fields."""
    best = (0, 0)
    for i, cells in enumerate(rows[:HEADER_ROWS]):
        score = _header_score(cells) if sum(bool(c.strip()) for c in cells) >= 2 else 0
        if score > best[1]:
            best = (i, score)
    return best


def _csv_rows(text: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """(first physical line, cells) of every non-blank row (quoted newlines kept)."""
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    rows, line = [], 1
    for cells in reader:
        if any(c.strip() for c in cells):
            rows.append((line, [c.strip() for c in cells]))
        line = reader.line_num + 1
    return rows


def _grid_table(rows: list[tuple[int, list[str]]], join: str) -> Table | None:
    index, score = _header_row([cells for _, cells in rows])
    if not score:
        return None
    header = _unique([c or f"column_{i + 1}" for i, c in enumerate(rows[index][1])])
    body = rows[index + 1 :]
    records = [dict(zip(header, [c or None for c in cells], strict=False)) for _, cells in body]
    titles = [join.join(c for c in cells if c) for _, cells in rows[:index]]
    raws = [join.join(cells) for _, cells in body]
    return Table(header, records, [n for n, _ in body], raws, titles)


def _unique(header: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in header:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return out


def _delimited_table(text: str) -> Table | None:
    """The delimiter whose first rows hold the best fault-table header, and the table."""
    head = "\n".join(text.splitlines()[: HEADER_ROWS + 10])
    scored = [
        (_header_row([c for _, c in _csv_rows(head, d)])[1], -i, d)
        for i, d in enumerate((",", ";", "\t", "|"))
    ]
    score, _, delimiter = max(scored)
    return _grid_table(_csv_rows(text, delimiter), delimiter) if score else None


def _workbook_table(path: Path, rows: int | None = None) -> Table | None:
    """The sheet holding the best fault-table header (rows numbered as in the sheet)."""
    book = fastexcel.read_excel(path)
    best: tuple[int, Table] | None = None
    for i in range(len(book.sheet_names)):
        grid = book.load_sheet(i, header_row=None, dtypes="string", n_rows=rows).to_polars()
        cells = [["" if c is None else str(c).strip() for c in r] for r in grid.rows()]
        if not cells:
            continue
        first = sheet_layout(path, i).first_row if rows is None else 1  # sniffing: no lines
        table = _grid_table([(first + n, c) for n, c in enumerate(cells) if any(c)], "\t")
        score = _header_row(cells)[1]
        if table is not None and (best is None or score > best[0]):
            best = (score, table)
    return best[1] if best else None


# -- alarm-message text files ---------------------------------------------------------------

_TEXT_CODE = re.compile(
    r"^(?P<code>(?:[A-Z][A-Za-z]{0,3}\s?[.\-]\s?[A-Z]?\d[0-9A-Za-z]{0,5}(?:\.\d{1,2})?"
    r"|[A-Z][A-Za-z]{0,3}\d{1,6}(?:\.\d{1,2})?|\d{3,6}(?:\.\d{1,2})?))"
    r"(?:\s*[:：\-–]\s*|\s+|$)(?P<message>[^\s.:：].*)?$"
)
_TEXT_LABEL = re.compile(
    r"^(?:\$\s*(?P<dollar>[^\s:：$]+(?:\s[^\s:：$]+)?)\s*[:：]?|"
    r"(?P<colon>[^\s:：$]{1,16}(?:\s[^\s:：$]+)?)\s*[:：])\s*(?P<text>.*)$"
)
_COMMENT = ("#", "//", ";", "%")


def _label(line: str) -> tuple[str, str, bool] | None:
    """(field, text, `$`-block) of a labelled line: `$Cause`, `$处理方法：…`, `Remedy: …`."""
    m = _TEXT_LABEL.match(line)
    if m is None:
        return None
    name = m["dollar"] or m["colon"]
    found = _field(name)
    if found is None or found not in {*_DETAIL, "prevention"}:
        return None
    return found, m["text"].strip(), m["dollar"] is not None


def _add(entry: dict, name: str, text: str) -> None:
    if text:
        entry[name] = f"{entry[name]}\n{text}" if entry.get(name) else text


def _alarm_text_entries(text: str) -> tuple[list[dict], list[int], list[str], list[str], int]:
    """Entries of an alarm-message text file; their lines, raw texts, the title lines above
    the first code, and how many lines were labels or code lines."""
    entries: list[dict] = []
    lines: list[int] = []
    raws: list[list[str]] = []
    titles: list[str] = []
    structured, target = 0, "message"
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(_COMMENT):
            titles += [stripped] if stripped and not entries else []
            continue
        label = _label(stripped)
        code = None if label else _TEXT_CODE.match(stripped)
        if entries and label:
            target = label[0]
            _add(entries[-1], target, label[1])
        elif code:
            entries.append({"code": code["code"], "message": code["message"]})
            lines.append(number)
            raws.append([])
            target = "description" if code["message"] else "message"
        elif not entries:
            titles.append(stripped)
            continue
        else:
            _add(entries[-1], target, stripped)
            structured -= 1
        structured += 1
        raws[-1].append(line)
    return entries, lines, ["\n".join(r) for r in raws], titles, structured


def _alarm_text_table(text: str) -> Table | None:
    """An alarm-message text file (see the module note), or None when the text is not one:
    at least three entries, and code and label lines most of the lines after the first."""
    entries, lines, raws, titles, structured = _alarm_text_entries(text)
    body = sum(len(r.splitlines()) for r in raws)
    labelled = sum(any(k in e for k in ("cause", "remedy", "effect")) for e in entries)
    if len(entries) < 3 or not (structured >= 0.7 * body or labelled >= 0.5 * len(entries)):
        return None
    if len({e["code"] for e in entries}) < 0.8 * len(entries):
        return None
    headers = list(dict.fromkeys(k for e in entries for k in e))
    return Table(headers, entries, lines, raws, titles)


def table_from_text(text: str, layout: str, complete: bool = True) -> Table | None:
    """The table of a text layout (csv, json, jsonl, yaml, text); None when none is found."""
    if layout == "csv":
        return _delimited_table(text)
    if layout == "text":
        return _alarm_text_table(text)
    if layout == "jsonl":
        return _jsonl_table(text, complete)
    return _document_table(text, layout, complete)


def load_table(path: Path, layout: str, encoding: str = "auto") -> Table | None:
    if layout == "xlsx":
        return _workbook_table(path)
    return table_from_text(read_text(path, encoding)[0], layout)


# -- deciding -------------------------------------------------------------------------------


def _holds_codes(values: list[str | None], by_header: bool) -> bool:
    filled = [v.strip() for v in values if v and v.strip()]
    if not filled or len(filled) < 0.7 * len(values):
        return False
    firsts = [re.split(r"\s*(?:[~～/、,，;；]|\s-\s)\s*", v)[0] for v in filled]
    shaped = sum(bool(_CODE_VALUE.match(v)) and len(v) <= 16 for v in firsts) / len(filled)
    if shaped < (0.6 if by_header else 0.9) or len(set(filled)) < 0.5 * len(filled):
        return False
    return by_header or not all(re.fullmatch(r"\d{1,2}", v) for v in filled)


def _code_column(table: Table, named: dict[tuple[str, str | None], str]) -> str | None:
    """The column holding alarm codes: a code header, an id/number header, or by content."""
    by_header = [h for (f, _), h in named.items() if f == "code"]
    ids = [h for h in table.headers if _key(h.split(".")[-1]) in _ID_KEYS]
    others = [h for h in table.headers if h not in named.values() and h not in ids]
    for headers, strict in ((by_header, True), (ids, False), (others, False)):
        for header in headers:
            if _holds_codes([r.get(header) for r in table.records], strict):
                return header
    return None


def work_order_signal(table: Table, used: set[str]) -> str | None:
    """The first column that says work order: a date column, or an order number, asset /
    machine id or technician header; None when there is none."""
    ingest = IngestConfig()
    for header in table.headers:
        if header in used:
            continue
        leaf = header.split(".")[-1]
        found = header_field(leaf, ingest)
        if found and found[0] in _WORK_ORDER_SIGNALS and _key(leaf) not in _ID_KEYS:
            return header
        values = [v for r in table.records[:200] if (v := r.get(header))]
        if values and sum(bool(_DATE.match(v)) for v in values) >= 0.5 * len(values):
            return header
    return None


def fault_columns(table: Table | None) -> Columns | None:
    """The table's code and field columns, or None when it is no fault table."""
    if table is None or not table.records:
        return None
    named: dict[tuple[str, str | None], str] = {}
    for header in table.headers:
        found = field_of(header)
        if found and not found[0].startswith("_") and found not in named:
            named[found] = header
    code = _code_column(table, named)
    if code is None:
        return None
    fields = {k: h for k, h in named.items() if h != code and k[0] != "code"}
    if not any(f in _DETAIL for f, _ in fields):
        return None
    if work_order_signal(table, {code, *fields.values()}) is not None:
        return None
    languages = tuple(sorted({lang for _, lang in fields if lang})) or (None,)
    return Columns(code, fields, languages)


def fault_table_layout(text: str, complete: bool, suffix: str) -> str | None:
    """The layout of a text head that is a fault table (csv, json, jsonl, yaml, text), else
    None. `complete`: the head is the whole file."""
    content = (line.strip() for line in text.splitlines())
    first = next((line[:1] for line in content if line and not line.startswith(_COMMENT)), "")
    if suffix in {".yaml", ".yml"}:
        candidates = ["yaml"]
    elif suffix in {".jsonl", ".ndjson"}:
        candidates = ["jsonl"]
    elif first and first in "[{":
        candidates = ["json", "jsonl"]
    else:
        candidates = ["csv", "text"] if suffix in {".txt", ".text", ".dat", ""} else ["csv"]
    for layout in candidates:
        try:
            table = table_from_text(text, layout, complete or layout in {"csv", "text"})
        except (ValueError, TypeError, yaml.YAMLError, csv.Error, RecursionError):
            continue
        if fault_columns(table) is not None:
            return layout
    return None


def is_fault_workbook(path: Path) -> bool:
    """Whether an XLSX workbook's best sheet (its first rows) is a fault table."""
    try:
        return fault_columns(_workbook_table(path, rows=HEADER_ROWS + 100)) is not None
    except Exception:  # noqa: BLE001 - calamine raises its own types; the reader reports them
        return False


# -- reading --------------------------------------------------------------------------------


def _brand(text: str) -> str | None:
    family = pl.select(family_of(pl.lit(text, dtype=pl.String))).item()
    if family:
        return family
    return next((f for f, p in _BRANDS.items() if re.search(f"(?i){p}", text)), None)


def table_family(path: Path, table: Table) -> str | None:
    """The family the title and headers name, else the folder and file name, else the text."""
    content = " ".join(v for r in table.records[:200] for v in r.values() if v)
    places = (" ".join(table.titles + table.headers), f"{path.parent.name} {path.stem}", content)
    return next((f for text in places if (f := _brand(text))), None)


def _shared_last(item: tuple[tuple[str, str | None], str]) -> bool:
    return item[0][1] is None


def _entry_rows(table: Table, columns: Columns, rel: str, family: str | None) -> list[dict]:
    """One row per entry and language, the description standing in for a missing message."""
    rows = []
    for record, line, raw in zip(table.records, table.lines, table.raws, strict=True):
        for language in columns.languages:
            row = {"source_file": rel, "source_row": line, "family": family, "source": rel}
            row["raw"] = f"[{language}] {raw}" if language else raw
            row["language"] = language
            row["code"] = (record.get(columns.code) or "").strip() or None
            for (name, lang), header in sorted(columns.fields.items(), key=_shared_last):
                if lang in {language, None} and row.get(name) is None:
                    row[name] = record.get(header)
            if not (row.get("message") or "").strip() and row.get("description"):
                row["message"], row["description"] = row["description"], None
            rows.append(row)
    return rows


def read_fault_table(
    path: str | Path, root: str | Path | None, layout: str, family: str | None = None,
    encoding: str = "auto",
) -> StageResult:  # fmt: skip
    """A fault-table file in `layout` → knowledge-base rows, one per code and language; rows
    in a language other than zh/en are rejected (`other_language`). `family`: the configured
    default where the file names none."""
    path = Path(path)
    rel = relative_path(path, root)
    table = load_table(path, layout, encoding)
    columns = fault_columns(table)
    if table is None or columns is None:
        raise InputFileError(f"{rel}: no alarm-code column beside message, cause or remedy")
    family = table_family(path, table) or family
    rows = one_row_per_code(_entry_rows(table, columns, rel, family), family)
    schema = {c: FAULT_CODE_SCHEMA.get(c, pl.String) for c in ("source_file", "source_row")}
    frame = pl.DataFrame(
        rows,
        schema={**schema, **dict.fromkeys(("raw", "family", "source", "language", "problem",
                                           *FIELDS), pl.String)},
    )  # fmt: skip
    other = ~pl.col("language").is_in(list(_KEPT_LANGUAGES)) & pl.col("language").is_not_null()
    result = finish_entries(frame.filter(~other), SOURCE_KIND)
    foreign = make_rejects(
        frame.filter(other), STAGE, "other_language",
        pl.format("{}:{}: entry in language {} (the corpus keeps zh and en)", "source_file",
                  "source_row", "language"),
    )  # fmt: skip
    return stage_result(result.kept, pl.concat([result.rejected, foreign]), read=frame.height)


def _configured(cfg: ManualsConfig, root: Path) -> list[tuple[set[Path], VendorTableSource]]:
    return [
        ({p.resolve() for p in root.glob(s.pattern) if p.is_file()}, s) for s in cfg.vendor_tables
    ]


def read_fault_tables(files: list[tuple[Path, str]], root: Path, cfg: ManualsConfig) -> StageResult:
    """Every fault-table file of the inventory (path, layout): by its configured mapping where
    one matches, else with zero configuration. A file that cannot be read is one reject row
    (`unreadable_table`) naming it; counters add up (plus `files`)."""
    configured = _configured(cfg, root)
    results, problems = [], []
    for path, layout in files:
        source = next((s for found, s in configured if path.resolve() in found), None)
        try:
            if source is not None:
                results.append(read_vendor_table(path, source, root))
            else:
                results.append(read_fault_table(path, root, layout, cfg.fault_table_family))
        except (InputFileError, ValueError, TypeError, KeyError, OSError, yaml.YAMLError) as exc:
            rel = relative_path(path, root)
            why = str(exc).replace(str(path), rel)
            lineage = pl.DataFrame({"source_file": [rel], "source_row": [0]})
            problems.append(make_rejects(lineage, STAGE, "unreadable_table", f"{rel}: {why}"))
    kept = [r.kept for r in results] or [pl.DataFrame(schema=FAULT_CODE_SCHEMA)]
    rejected = [r.rejected for r in results] + problems or [empty_rejects()]
    return stage_result(
        pl.concat(kept),
        pl.concat(rejected),
        read=sum(r.counters["read"] for r in results) + len(problems),
        files=len(files),
    )


def _field(cell: str) -> str | None:
    """The field a header cell names; a blank header is a running-number column."""
    return header_key(cell) or ("_index" if not header_text(cell) else None)
