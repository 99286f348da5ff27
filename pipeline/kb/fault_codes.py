"""Fault-code knowledge base: the common tail of every extractor, its merge, and configured
vendor JSON/CSV tables.

Manuals are read by `pipeline.kb.extract` from their document blocks (tables, labelled items,
definitions, codes in headings and bold prose, prevention notes); it hands its candidate rows
here. A combined or ranged code cell gives one row per code (`one_row_per_code`). A cell or
labelled text holding several items (`<br>`, `；`/`;`, `1. … 2. …`) becomes a list.
Rows without a code or symptom or without any of message/cause/remedy are rejected
(`missing_code`, `no_content`); the same (family, code, language) from several places merges
into the first (`merged_duplicate_code`, pointing to the row kept).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl

from pipeline.core.stage import StageResult, make_rejects, stage_result
from pipeline.ingest.encoding import read_text
from pipeline.ingest.files import relative_path
from pipeline.ingest.lineage import record_ids
from pipeline.kb.layouts import split_codes
from pipeline.text.alarm_codes import canonical_code, code_family, family_from_code
from pipeline.text.language import detect_language
from schemas.manuals import FAULT_CODE_SCHEMA, VendorTableSource

STAGE = "fault_codes"
SOURCE_KIND = "fault_table"

FIELDS = ("code", "symptom", "message", "description", "cause", "remedy", "effect", "prevention")


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
