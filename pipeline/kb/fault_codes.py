"""Fault-code knowledge base: alarm tables found in manual sections, and vendor JSON/CSV tables.

Manual layouts recognised inside a section body:
- Markdown tables read as `pipeline.kb.tables` reads table blocks: the code column by content,
  the others by zh/en/de header synonyms (`HEADER_ALIASES`) or by content;
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

from pipeline.core.stage import StageResult, make_rejects, stage_result
from pipeline.ingest.encoding import read_text
from pipeline.ingest.files import relative_path
from pipeline.ingest.lineage import record_ids
from pipeline.kb.layouts import labelled_entries, split_codes
from pipeline.kb.tables import table_entries
from pipeline.text.alarm_codes import canonical_code, code_family, family_from_code
from pipeline.text.language import detect_language
from schemas.manuals import FAULT_CODE_SCHEMA, VendorTableSource

STAGE = "fault_codes"
SOURCE_KIND = "fault_table"

FIELDS = ("code", "symptom", "message", "description", "cause", "remedy", "effect", "prevention")
_CODE = r"[A-Z]{2}\s?\d{3,4}|\d{3,6}"
PREVENTION_FOR = re.compile(
    rf"^(?:prevention\s+for\s+alarm|预防\s*(?:报警)?)\s*[(（]?(?P<code>{_CODE})[)）]?\s*[:：]\s*"
    r"(?P<text>\S.*)$",
    re.I,
)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table_rows(text: str, first_row: int) -> list[dict]:
    """Alarm-table and symptom-table rows of the Markdown tables in a section body."""
    lines = text.split("\n")
    rows: list[dict] = []
    i = 0
    while i < len(lines):
        if not (lines[i].lstrip().startswith("|") and i + 1 < len(lines)):
            i += 1
            continue
        separator = lines[i + 1].replace(" ", "")
        if re.fullmatch(r"\|?:?-{3,}:?(\|:?-{3,}:?)*\|?", separator) is None:
            i += 1
            continue
        end = i + 2
        while end < len(lines) and lines[end].lstrip().startswith("|"):
            end += 1
        body = lines[i + 2 : end]
        found = table_entries([_cells(line) for line in [lines[i], *body]], header_rows=1)
        for entry in found[0] if found else []:
            offset = entry.pop("row") - 1  # the header is row 0
            entry.update(source_row=first_row + i + 2 + offset, raw=body[offset])
            rows.append(entry)
        i = end
    return rows


def _prevention_notes(text: str, first_row: int) -> list[dict]:
    """Prose prevention notes: `Prevention for alarm 25000: …`, `预防（SP9001）：…`."""
    return [
        {"source_row": first_row + i, "raw": line.strip(), "code": m.group("code"),
         "prevention": m.group("text")}
        for i, line in enumerate(text.split("\n"))
        if (m := PREVENTION_FOR.match(line.strip()))
    ]  # fmt: skip


def section_entries(text: str, first_row: int, heading: str) -> list[dict]:
    """Every fault entry of one section body, in every layout (see `pipeline.kb.layouts`)."""
    notes = _prevention_notes(text, first_row)
    noted = {e["source_row"] for e in notes}
    entries = [
        e for e in labelled_entries(text, first_row, heading) if e["source_row"] not in noted
    ]
    return _table_rows(text, first_row) + entries + notes


def one_row_per_code(rows: list[dict], family: str | None) -> list[dict]:
    """Split combined and ranged code cells (SV0410 / SV0411, SV0401~SV0405) into one row
    per code; a range too large to be real is marked for rejection (`bad_code_range`)."""
    out: list[dict] = []
    for row in rows:
        codes = split_codes(row["code"], family) if row.get("code") else [None]
        if codes is None:
            out.append({**row, "problem": "bad_code_range"})
            continue
        for code in codes:
            raw = row["raw"] if len(codes) == 1 else f"{row['raw']}\x1f{code}"
            out.append({**row, "code": code, "raw": raw})
    return out


def _items(expr: pl.Expr) -> pl.Expr:
    """Split a cell into its items: lines, <br>, ；/;, numbered `1.`/`2、`/`(3)`/`④`, bullets;
    strip the numbering."""
    number = r"(?:\d{1,2}[.、)）]|[（(]\d{1,2}[)）]|[①-⑳]|[-*•·])"
    return (
        expr.str.replace_all(r"(?i)<br\s*/?>", "\n")
        .str.replace_all(r"[；;]\s*", "\n")
        .str.replace_all(rf"\s({number}\s)", "\n$1")
        .str.split("\n")
        .list.eval(
            pl.element()
            .str.strip_chars()
            .str.replace(rf"^{number}\s*", "")
            .str.strip_chars_end("。；;,， ")
            .filter(pl.element().str.len_chars() > 0)
        )
    )


def _blank_to_null(column: str) -> pl.Expr:
    text = pl.col(column).str.strip_chars()
    return pl.when(text != "").then(text).alias(column)


def finish_entries(raw: pl.DataFrame, source_kind: str) -> StageResult:
    """Common tail: one row per code, canonical codes, lists, language, lineage; reject rows
    without a code or symptom, without content, or with an impossible code range."""
    for col in (*FIELDS, "problem", "language"):
        if col not in raw.columns:
            raw = raw.with_columns(pl.lit(None, dtype=pl.String).alias(col))
    raw = raw.with_columns([_blank_to_null(c) for c in FIELDS])
    text = pl.concat_str("symptom", "message", "description", "cause", "remedy", ignore_nulls=True)
    family = code_family(pl.coalesce("family", family_from_code(pl.col("code"))), pl.col("code"))
    frame = raw.with_columns(
        record_id=pl.Series(
            [
                record_ids(SOURCE_KIND, f, pl.Series([r]), pl.Series([x]))[0]
                for f, r, x in raw.select("source_file", "source_row", "raw").iter_rows()
            ],
            dtype=pl.String,
        ),
        source_kind=pl.lit(source_kind),
        family=family,
        code=pl.when(pl.col("code").is_not_null()).then(
            canonical_code(family, pl.col("code").cast(pl.String))
        ),
        causes=_items(pl.col("cause")).fill_null([]),
        remedies=_items(pl.col("remedy")).fill_null([]),
        language=pl.coalesce("language", detect_language(text)),
    )
    bad_range = (pl.col("problem") == "bad_code_range").fill_null(False)
    no_key = pl.col("code").is_null() & pl.col("symptom").is_null() & ~bad_range
    no_content = (
        pl.all_horizontal(
            pl.col(c).is_null() for c in ("message", "description", "effect", "prevention")
        )
        & (pl.col("causes").list.len() == 0)
        & (pl.col("remedies").list.len() == 0)
    )
    where = pl.format("{}:{}", "source_file", "source_row")
    checks = [
        (bad_range, "bad_code_range", pl.format("{}: code range too large or backwards", where)),
        (no_key, "missing_code", pl.format("{}: no alarm code", where)),
        (~bad_range & ~no_key & no_content, "no_content",
         pl.format("{}: code without message, cause or remedy", where)),
    ]  # fmt: skip
    rejected = pl.concat(
        [
            make_rejects(frame.filter(rule).drop("causes", "remedies"), STAGE, reason, detail)
            for rule, reason, detail in checks
        ]
    )
    kept = frame.filter(~bad_range & ~no_key & ~no_content).select(
        [pl.col(c).cast(t) for c, t in FAULT_CODE_SCHEMA.items()]
    )
    return stage_result(kept, rejected, read=frame.height)


def extract_alarm_tables(sections: pl.DataFrame) -> StageResult:
    """Fault entries of every layout in manual sections (MANUAL_SECTION_SCHEMA) →
    knowledge-base rows, one per code (symptom-keyed rows carry no code).

    `read` counts the candidate rows found (one per code); `sections_with_tables` how many
    sections held any.
    """
    rows: list[dict] = []
    with_tables = 0
    for s in sections.iter_rows(named=True):
        heading = s["heading_path"][-1] if s["heading_path"] else ""
        found = one_row_per_code(section_entries(s["text"], s["body_row"], heading), s["family"])
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
            "problem": pl.String,
            **{k: pl.String for k in FIELDS},
        },
    )
    result = finish_entries(raw, SOURCE_KIND)
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
    return finish_entries(pl.concat(parts), SOURCE_KIND)


_FIRST_WINS = ("prevention", "message", "description", "effect")


def merge_knowledge_base(*parts: pl.DataFrame) -> StageResult:
    """One row per (code, language): the first row wins, later rows add their causes,
    remedies and prevention where new, and are rejected as `merged_duplicate_code`."""
    rows = (
        pl.concat([p.select(list(FAULT_CODE_SCHEMA)) for p in parts])
        .with_row_index("_i")
        .with_columns(_key=pl.coalesce("code", pl.lit("symptom:") + pl.col("symptom")))
    )
    key = ["_key", "language"]
    first = pl.col("_i") == pl.col("_i").min().over(key)
    merged = rows.group_by(key, maintain_order=True).agg(
        pl.col("_i").min(),
        pl.col("causes")
        .list.explode(keep_nulls=False, empty_as_null=False)
        .unique(maintain_order=True),
        pl.col("remedies")
        .list.explode(keep_nulls=False, empty_as_null=False)
        .unique(maintain_order=True),
        *[pl.col(c).drop_nulls().first() for c in _FIRST_WINS],
    )
    kept = (
        rows.filter(first)
        .drop("causes", "remedies", *_FIRST_WINS)
        .join(merged.drop(key), on="_i")
        .sort("_i")
        .select([pl.col(c).cast(t) for c, t in FAULT_CODE_SCHEMA.items()])
    )
    dups = rows.filter(~first).join(
        rows.filter(first).select(*key, pl.col("record_id").alias("_kept")), on=key
    )
    rejected = make_rejects(
        dups.drop("causes", "remedies"),
        STAGE,
        "merged_duplicate_code",
        pl.format("{} ({}) also in {}", "_key", "language", "source"),
        duplicate_of=pl.col("_kept"),
    )
    return stage_result(kept, rejected, read=rows.height)


def entries_for_codes(
    rows: pl.DataFrame, knowledge_base: pl.DataFrame, columns: list[str], how: str = "inner"
) -> pl.DataFrame:
    """One row per (`_i`, code) of `rows` (`_i`, `language`, `alarm_codes`), codes in order of
    mention (`_pos`), with the knowledge-base entry (`_kb_id` and `columns`) for the code: the
    one in the row's language where there is one, else the first in table order.
    `how="left"` keeps codes without an entry (null `_kb_id`)."""
    per_code = (
        rows.select("_i", "language", pl.col("alarm_codes").alias("code"))
        .explode("code")
        .drop_nulls("code")
        .with_columns(_pos=pl.int_range(pl.len()).over("_i"))
    )
    kb = knowledge_base.select(
        "code",
        pl.col("language").alias("_kb_language"),
        pl.col("record_id").alias("_kb_id"),
        *columns,
    ).with_row_index("_kb_order")
    return (
        per_code.join(kb, on="code", how=how)  # type: ignore[arg-type]
        .sort("_i", "_pos", pl.col("_kb_language") != pl.col("language"), "_kb_order")
        .group_by("_i", "_pos", maintain_order=True)
        .first()
    )
