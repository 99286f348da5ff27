"""Fault-code knowledge base: alarm tables found in manual sections, and vendor JSON/CSV tables.

Manual layouts recognised inside a section body:
- Markdown tables whose header names a code column and at least one of message / cause /
  remedy (Chinese or English headers, see `HEADER_ALIASES`);
- blocks: a line `CODE message` (or `报警号：CODE` / `Alarm: CODE` plus `信息：message`)
  followed by labelled lines `原因：` / `Cause:`, `处理：` / `Remedy:`, `预防：` / `Prevention:`;
- prevention notes in prose: `Prevention for alarm CODE: …` / `预防（CODE）：…`.

A cell or labelled text holding several items (`<br>`, `；`/`;`, `1. … 2. …`) becomes a list.
Rows without a code or without any of message/cause/remedy are rejected (`missing_code`,
`no_content`); the same (family, code, language) from several places merges into the first
(`merged_duplicate_code`, pointing to the row kept).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import polars as pl

from pipeline.ingest.encoding import read_text
from pipeline.ingest.files import relative_path
from pipeline.ingest.lineage import record_ids
from pipeline.stage import StageResult, empty_rejects, make_rejects, stage_result
from pipeline.text.alarm_codes import canonical_code
from pipeline.text.language import detect_language
from schemas.manuals import FAULT_CODE_SCHEMA, ManualsConfig, VendorTableSource

STAGE = "fault_codes"
SOURCE_KIND = "fault_table"

HEADER_ALIASES: dict[str, tuple[str, ...]] = {
    "code": ("报警号", "报警代码", "报警编号", "故障代码", "代码", "alarm", "alarmno",
             "alarmnumber", "code", "number", "no"),
    "message": ("报警信息", "报警内容", "报警名称", "信息", "内容", "名称", "message", "text",
                "alarmtext", "description"),
    "cause": ("原因", "故障原因", "可能原因", "报警原因", "cause", "causes", "reason"),
    "remedy": ("处理", "处理方法", "处理措施", "排除方法", "对策", "解决方法", "措施", "remedy",
               "remedies", "action", "solution", "countermeasure"),
    "prevention": ("预防", "预防措施", "prevention", "preventiveaction"),
}  # fmt: skip
_ALIAS = {alias: name for name, aliases in HEADER_ALIASES.items() for alias in aliases}
_CODE = r"[A-Z]{2}\s?\d{3,4}|\d{3,6}"
_CODE_LINE = re.compile(rf"^(?P<code>{_CODE})\s+(?P<message>\S.{{0,78}})$")
_LABELLED_CODE = re.compile(
    rf"^(?:报警号|报警代码|故障代码|alarm(?:\s*(?:no\.?|number))?)\s*[:：]\s*(?P<code>{_CODE})\b",
    re.I,
)
_PREVENTION_FOR = re.compile(
    rf"^(?:prevention\s+for\s+alarm|预防\s*(?:报警)?)\s*[(（]?(?P<code>{_CODE})[)）]?\s*[:：]\s*"
    r"(?P<text>\S.*)$",
    re.I,
)
_LABEL = re.compile(
    r"^(?P<label>信息|报警信息|message|原因|故障原因|cause|处理|处理方法|对策|remedy|action|"
    r"预防|预防措施|prevention)\s*[:：]\s*(?P<text>.*)$",
    re.I,
)
_LABEL_FIELD = {
    "信息": "message", "报警信息": "message", "message": "message",
    "原因": "cause", "故障原因": "cause", "cause": "cause",
    "处理": "remedy", "处理方法": "remedy", "对策": "remedy", "remedy": "remedy",
    "action": "remedy",
    "预防": "prevention", "预防措施": "prevention", "prevention": "prevention",
}  # fmt: skip


def _header_key(cell: str) -> str | None:
    return _ALIAS.get(re.sub(r"[\s_.\-/()（）#:：]", "", cell).lower())


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table_rows(text: str, first_row: int) -> list[dict]:
    """Alarm-table rows of the Markdown tables in a section body."""
    lines = text.split("\n")
    rows: list[dict] = []
    i = 0
    while i < len(lines):
        if not (lines[i].lstrip().startswith("|") and i + 1 < len(lines)):
            i += 1
            continue
        separator = lines[i + 1].replace(" ", "")
        header = [_header_key(c) for c in _cells(lines[i])]
        is_table = re.fullmatch(r"\|?:?-{3,}:?(\|:?-{3,}:?)*\|?", separator) is not None
        if not is_table or "code" not in header or not {"message", "cause", "remedy"} & set(header):
            i += 1
            continue
        i += 2
        while i < len(lines) and lines[i].lstrip().startswith("|"):
            cells = _cells(lines[i])
            row = {"source_row": first_row + i, "raw": lines[i]}
            for key, cell in zip(header, cells, strict=False):
                if key and cell:
                    row[key] = cell
            rows.append(row)
            i += 1
    return rows


def _block_rows(text: str, first_row: int) -> list[dict]:
    """Alarm entries written as a code line followed by labelled cause/remedy lines."""
    rows: list[dict] = []
    current: dict | None = None
    field: str | None = None
    for i, line in enumerate(text.split("\n")):
        stripped = line.strip()
        labelled = _LABELLED_CODE.match(stripped)
        coded = _CODE_LINE.match(stripped) if not stripped.endswith(("。", ".")) else None
        label = _LABEL.match(stripped)
        if prevention := _PREVENTION_FOR.match(stripped):
            current = {"source_row": first_row + i, "raw": stripped}
            current.update(code=prevention.group("code"), prevention=prevention.group("text"))
            rows.append(current)
            field = "prevention"
        elif labelled or (coded and not label):
            current = {"source_row": first_row + i, "raw": stripped}
            current["code"] = (labelled or coded).group("code")
            if coded:
                current["message"] = coded.group("message")
            rows.append(current)
            field = None
        elif label and current is not None:
            field = _LABEL_FIELD[label.group("label").lower()]
            current[field] = label.group("text").strip()
            current["raw"] += "\n" + stripped
        elif stripped and current is not None and field is not None:
            current[field] += " " + stripped  # continuation of a labelled paragraph
            current["raw"] += "\n" + stripped
        elif not stripped:
            field = None
    return [r for r in rows if {"cause", "remedy", "prevention"} & set(r)]


def _items(expr: pl.Expr) -> pl.Expr:
    """Split a cell into its items: <br>, ；/;, numbered `1.`/`2、`; strip numbering."""
    return (
        expr.str.replace_all(r"(?i)<br\s*/?>", "\n")
        .str.replace_all(r"[；;]\s*", "\n")
        .str.replace_all(r"\s(\d{1,2}[.、)]\s)", "\n$1")
        .str.split("\n")
        .list.eval(
            pl.element()
            .str.strip_chars()
            .str.replace(r"^\d{1,2}[.、)]\s*", "")
            .str.strip_chars_end("。；;,， ")
            .filter(pl.element().str.len_chars() > 0)
        )
    )


def _finish(raw: pl.DataFrame, source_kind: str) -> StageResult:
    """Common tail: canonical codes, lists, language, lineage; reject empty rows."""
    for col in ("code", "message", "cause", "remedy", "prevention"):
        if col not in raw.columns:
            raw = raw.with_columns(pl.lit(None, dtype=pl.String).alias(col))
    if "language" not in raw.columns:
        raw = raw.with_columns(language=pl.lit(None, dtype=pl.String))
    text = pl.concat_str("message", "cause", "remedy", ignore_nulls=True)
    frame = raw.with_columns(
        record_id=pl.Series(
            [
                record_ids(SOURCE_KIND, f, pl.Series([r]), pl.Series([x]))[0]
                for f, r, x in raw.select("source_file", "source_row", "raw").iter_rows()
            ],
            dtype=pl.String,
        ),
        source_kind=pl.lit(source_kind),
        code=pl.when(pl.col("code").str.strip_chars() != "").then(
            canonical_code(pl.col("family"), pl.col("code").cast(pl.String))
        ),
        causes=_items(pl.col("cause")).fill_null([]),
        remedies=_items(pl.col("remedy")).fill_null([]),
        language=pl.coalesce("language", detect_language(text)),
    )
    no_code = pl.col("code").is_null()
    no_content = (
        pl.col("message").is_null()
        & (pl.col("causes").list.len() == 0)
        & (pl.col("remedies").list.len() == 0)
        & pl.col("prevention").is_null()
    )
    where = pl.format("{}:{}", "source_file", "source_row")
    rejected = pl.concat(
        [
            make_rejects(
                frame.filter(no_code).drop("causes", "remedies"),
                STAGE,
                "missing_code",
                pl.format("{}: no alarm code", where),
            ),
            make_rejects(
                frame.filter(~no_code & no_content).drop("causes", "remedies"),
                STAGE,
                "no_content",
                pl.format("{}: code without message, cause or remedy", where),
            ),
        ]
    )
    kept = frame.filter(~no_code & ~no_content).select(
        [pl.col(c).cast(t) for c, t in FAULT_CODE_SCHEMA.items()]
    )
    return stage_result(kept, rejected, read=frame.height)


def extract_alarm_tables(sections: pl.DataFrame) -> StageResult:
    """Alarm tables and blocks in manual sections (MANUAL_SECTION_SCHEMA) → knowledge-base rows.

    `read` counts the candidate rows found (table rows, code blocks); `sections_with_tables`
    how many sections held any.
    """
    rows: list[dict] = []
    with_tables = 0
    for s in sections.iter_rows(named=True):
        found = _table_rows(s["text"], s["body_row"]) + _block_rows(s["text"], s["body_row"])
        with_tables += bool(found)
        source = " > ".join([s["source_file"], *s["heading_path"]])
        for row in found:
            row.update(source_file=s["source_file"], family=s["family"], source=source)
        rows.extend(found)
    raw = pl.DataFrame(
        rows,
        schema={
            "source_file": pl.String,
            "source_row": pl.Int64,
            "raw": pl.String,
            "family": pl.String,
            "source": pl.String,
            **{k: pl.String for k in HEADER_ALIASES},
        },
    )
    result = _finish(raw, SOURCE_KIND)
    return stage_result(
        result.kept, result.rejected, read=raw.height, sections_with_tables=with_tables
    )


def _path(path: str) -> pl.Expr:
    first, *rest = path.split(".")
    expr = pl.col(first)
    for name in rest:
        expr = expr.struct.field(name)
    return expr.cast(pl.String)


def read_vendor_table(
    path: str | Path, source: VendorTableSource, root: str | Path | None = None
) -> StageResult:
    """A vendor alarm table → knowledge-base rows, one per entry and configured language.

    `source_row` is the 1-based entry index (JSON) or the physical line (CSV, header = 1).
    """
    path = Path(path)
    rel = relative_path(path, root)
    text, _ = read_text(path, source.encoding)
    if source.format == "json":
        data = json.loads(text)
        for key in source.records.split(".") if source.records else []:
            data = data[key]
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON array of alarm entries")
        table = pl.from_dicts(data, infer_schema_length=None)
        raw = [json.dumps(entry, ensure_ascii=False, sort_keys=True) for entry in data]
        first_row = 1
    else:
        table = pl.read_csv(io.StringIO(text), infer_schema=False, separator=source.delimiter)
        raw = [
            source.delimiter.join("" if v is None else v for v in row) for row in table.iter_rows()
        ]
        first_row = 2
    table = table.with_columns(
        _raw=pl.Series(raw, dtype=pl.String),
        _row=pl.int_range(first_row, first_row + table.height, dtype=pl.Int64),
    )
    parts = []
    for language, fields in source.languages.items():
        columns = {"message": fields.message, "cause": fields.cause, "remedy": fields.remedy}
        columns["prevention"] = fields.prevention
        parts.append(
            table.select(
                pl.lit(rel).alias("source_file"),
                pl.col("_row").alias("source_row"),
                pl.concat_str(pl.lit(f"[{language}] "), "_raw").alias("raw"),
                pl.lit(source.family).alias("family"),
                pl.lit(rel).alias("source"),
                pl.lit(language).alias("language"),
                _path(source.code).alias("code"),
                *[
                    (_path(p) if p else pl.lit(None, dtype=pl.String)).alias(name)
                    for name, p in columns.items()
                ],
            ).with_columns(
                [
                    pl.when(pl.col(c).str.strip_chars() != "").then(pl.col(c).str.strip_chars())
                    for c in ("message", "cause", "remedy", "prevention")
                ]
            )
        )
    return _finish(pl.concat(parts), SOURCE_KIND)


def read_vendor_tables(root: str | Path, cfg: ManualsConfig) -> StageResult:
    """Every configured vendor table under `root`; counters add up (plus `files`)."""
    root = Path(root)
    results = [
        read_vendor_table(path, source, root)
        for source in cfg.vendor_tables
        for path in sorted(root.glob(source.pattern))
        if path.is_file()
    ]
    if not results:
        return stage_result(pl.DataFrame(schema=FAULT_CODE_SCHEMA), empty_rejects(), 0, files=0)
    return stage_result(
        pl.concat([r.kept for r in results]),
        pl.concat([r.rejected for r in results]),
        read=sum(r.counters["read"] for r in results),
        files=len(results),
    )


def merge_knowledge_base(*parts: pl.DataFrame) -> StageResult:
    """One row per (code, language): the first row wins, later rows add their causes,
    remedies and prevention where new, and are rejected as `merged_duplicate_code`."""
    rows = pl.concat([p.select(list(FAULT_CODE_SCHEMA)) for p in parts]).with_row_index("_i")
    key = ["code", "language"]
    first = pl.col("_i") == pl.col("_i").min().over(key)
    merged = rows.group_by(key, maintain_order=True).agg(
        pl.col("_i").min(),
        pl.col("causes")
        .list.explode(keep_nulls=False, empty_as_null=False)
        .unique(maintain_order=True),
        pl.col("remedies")
        .list.explode(keep_nulls=False, empty_as_null=False)
        .unique(maintain_order=True),
        pl.col("prevention").drop_nulls().first(),
        pl.col("message").drop_nulls().first(),
    )
    kept = (
        rows.filter(first)
        .drop("causes", "remedies", "prevention", "message")
        .join(merged.drop(key), on="_i")
        .sort("_i")
        .select([pl.col(c).cast(t) for c, t in FAULT_CODE_SCHEMA.items()])
    )
    dups = rows.filter(~first).join(
        rows.filter(first).select(*key, pl.col("record_id").alias("_kept")), on=key
    )
    rejected = make_rejects(
        dups.drop("_i", "causes", "remedies"),
        STAGE,
        "merged_duplicate_code",
        pl.format("{} ({}) also in {}", "code", "language", "source"),
        duplicate_of=pl.col("_kept"),
    )
    return stage_result(kept, rejected, read=rows.height)
