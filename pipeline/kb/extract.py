"""The fault-code knowledge base from document blocks (`schemas.documents`): one extractor over
every layout, not one rule set per layout.

- table blocks whose code column is found by content (`pipeline.kb.tables`): FANUC/SINUMERIK/
  Haas alarm lists, Mitsubishi range cells, tables without a header row;
- headings, paragraphs, list items, definitions and labelled items (`pipeline.kb.text_blocks`):
  a code opens an entry, the labelled items after it fill its fields.

The family of an entry is the first found of: the shape of its codes (SV0401 → FANUC, the
table's first code that names one), the controller named in the code column's header, in the
heading path (the document title included), the family configured for the file
(`ManualSource.family`), the controller the document names most often; else none (UNKNOWN:).
Combined and ranged code cells give one row per code (`one_row_per_code`); rows are finished
and rejected as vendor tables are (`finish_entries`). Lineage: `source_row` is the line of the
entry's (first) row for a table (`row_lines`), else the line of the block that opens it.
"""

from __future__ import annotations

import re
from collections import Counter
from fnmatch import fnmatchcase

import polars as pl

from pipeline.core.stage import StageResult, stage_result
from pipeline.kb.fault_codes import FIELDS, SOURCE_KIND, finish_entries, one_row_per_code
from pipeline.kb.layouts import CODE_ATOM
from pipeline.kb.tables import table_entries
from pipeline.kb.text_blocks import BlockReader
from pipeline.text.alarm_codes import family_from_code, most_named_family
from schemas.config import PipelineConfig
from schemas.documents import BLOCK_KINDS
from schemas.manuals import ManualsConfig

_ROW_SCHEMA: dict[str, pl.DataType] = {
    "source_file": pl.String(),
    "source_row": pl.Int64(),
    "raw": pl.String(),
    "source": pl.String(),
    "_kind": pl.String(),
    "_group": pl.String(),
    "_code_header": pl.String(),
    "_heading": pl.String(),
    "_first_code": pl.String(),
    **{field: pl.String() for field in FIELDS},
}


_FIRST_CODE = re.compile(rf"\s*({CODE_ATOM})")


def _row(block: dict, entry: dict, group: str, kind: str, code_header: str = "") -> dict:
    """One knowledge-base candidate row of an entry found in `block`."""
    path = entry.pop("heading_path", None) or block["heading_path"] or []
    first_code = _FIRST_CODE.match(entry.get("code") or "")
    return {
        "source_file": block["source_file"],
        "source_row": entry.pop("source_row", block["source_row"]),
        "raw": entry.pop("raw"),
        "source": " > ".join([block["source_file"], *path]),
        "_kind": kind,
        "_group": group,
        "_code_header": code_header,
        "_heading": " ".join(path),
        "_first_code": first_code.group(1) if first_code else None,
        **{field: entry[field] for field in FIELDS if entry.get(field)},
    }


def _table_rows(block: dict, counts: Counter) -> list[dict]:
    """The candidate rows of one table block; a table without a code (or symptom) column gives
    none and is counted."""
    counts["tables"] += 1
    found = table_entries(block["cells"] or [], block["header_rows"] or 0)
    if found is None:
        counts["tables_without_code_column"] += 1
        return []
    counts["fault_tables"] += 1
    entries, code_header = found
    group = f"{block['source_file']}\x1f{block['block']}"
    lines = block["row_lines"] or []
    for entry in entries:
        row = entry.pop("row")
        entry["raw"] = f"table {block['block']} row {row}: {entry['raw']}"
        entry["source_row"] = lines[row] if row < len(lines) else block["source_row"]
    return [_row(block, entry, group, "table", code_header) for entry in entries]


def _document_rows(doc: pl.DataFrame, counts: Counter) -> list[dict]:
    """The candidate rows of one document's blocks, in block order."""
    reader = BlockReader()
    rows: list[dict] = []
    blocks = {}
    ordered = list(doc.iter_rows(named=True))
    for index, block in enumerate(ordered):
        blocks[block["block"]] = block
        reader.read(block, ordered[index + 1] if index + 1 < len(ordered) else None)
        if block["kind"] == "table":
            rows.extend(_table_rows(block, counts))
    for n, entry in enumerate(reader.finish()):
        block = blocks[entry["block"]]
        group = f"{block['source_file']}\x1f{block['block']}\x1f{n}"
        rows.append(_row(block, entry, group, entry["kind"]))
    counts["labelled_without_code"] += reader.orphans
    return rows


def configured_family(source_file: str, cfg: ManualsConfig) -> str | None:
    """The family of the first manual source whose pattern matches the file, if it sets one."""
    path = source_file.lower()
    for source in cfg.sources:
        pattern = source.pattern.lower()
        if fnmatchcase(path, pattern) or fnmatchcase(path, pattern.removeprefix("**/")):
            return source.family
    return None


def _with_family(rows: pl.DataFrame, blocks: pl.DataFrame, cfg: ManualsConfig) -> pl.DataFrame:
    """`family` of every candidate row (see the module docstring for the order)."""
    documents = blocks.group_by("source_file").agg(
        most_named_family(pl.col("text").drop_nulls().str.join("\n")).alias("_document")
    )
    documents = documents.with_columns(
        _configured=pl.col("source_file").map_elements(
            lambda f: configured_family(f, cfg), return_dtype=pl.String
        )
    )
    shape = family_from_code(pl.col("_first_code"))
    by_codes = rows.group_by("_group").agg(shape.drop_nulls().first().alias("_codes"))
    return (
        rows.join(by_codes, on="_group", how="left")
        .join(documents, on="source_file", how="left")
        .with_columns(
            family=pl.coalesce(
                "_codes",
                most_named_family(pl.col("_code_header")),
                most_named_family(pl.col("_heading")),
                "_configured",
                "_document",
            )
        )
    )


def fault_entries(blocks: pl.DataFrame, cfg: ManualsConfig) -> StageResult:
    """Knowledge-base rows (FAULT_CODE_SCHEMA) of every fault entry in document blocks
    (DOCUMENT_BLOCK_SCHEMA), one per code.

    Counters: `read` (candidate rows, one per code), `tables`, `fault_tables`,
    `tables_without_code_column`, `entries` (= read) and `entries_<block kind>`,
    `labelled_without_code` (labelled items after no code).
    """
    counts: Counter = Counter()
    rows: list[dict] = []
    ordered = blocks.sort("source_file", "block")
    for _, doc in ordered.group_by("source_file", maintain_order=True):
        rows.extend(_document_rows(doc, counts))
    candidates = _with_family(pl.DataFrame(rows, schema=_ROW_SCHEMA), blocks, cfg)
    split = [
        row
        for found in candidates.iter_rows(named=True)
        for row in one_row_per_code([found], found["family"])
    ]
    frame = pl.DataFrame(split, schema={**_ROW_SCHEMA, "family": pl.String, "problem": pl.String})
    kinds = Counter(frame["_kind"].to_list())
    result = finish_entries(frame.select(pl.exclude("^_.*$")), SOURCE_KIND)
    return stage_result(
        result.kept,
        result.rejected,
        read=frame.height,
        **{name: counts[name] for name in ("tables", "fault_tables", "tables_without_code_column")},
        labelled_without_code=counts["labelled_without_code"],
        entries=frame.height,
        **{f"entries_{kind}": kinds[kind] for kind in BLOCK_KINDS},
    )


def extract_fault_tables(blocks: pl.DataFrame, cfg: PipelineConfig) -> StageResult:
    """`fault_entries` as a funnel stage function (the configuration of the whole run)."""
    return fault_entries(blocks, cfg.manuals)
