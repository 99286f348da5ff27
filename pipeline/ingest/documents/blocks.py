"""The shared pieces of the document parsers: blocks as they are found, the block frame
(`schemas.documents.DOCUMENT_BLOCK_SCHEMA`), the one text rendering of a table, labelled
items split out of a run of lines, and sections (`MANUAL_SECTION_SCHEMA`) cut from blocks at
headings, so that chunking and the knowledge base read every format alike.

A table is rendered as a pipe table: the header row (several header rows merged column by
column), a `| --- |` ruler, then one line per row; a line break inside a cell is written
`<br>` and a `|` as `\\|`. A section's text places every block at its own line (counted from
the section's body line), so the line of anything found in it is the line of the source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from pipeline.core.errors import InputFileError
from pipeline.ingest.lineage import record_ids
from schemas.documents import DOCUMENT_BLOCK_SCHEMA
from schemas.manuals import MANUAL_SECTION_SCHEMA

SOURCE_KIND = "manual"
_HAN_END = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
_HAN = re.compile(r"[\u4e00-\u9fff]")
_LIST_MARK = re.compile(
    r"^\s*(?:[-*•·▪◦]\s+|\d{1,2}[.．)、](?!\d)\s*|[（(]\d{1,2}[)）]\s*|[①-⑳]\s*)\S"
)


class ManualError(InputFileError, ValueError):
    """A manual that cannot be read at all; the message names the file."""


@dataclass
class Block:
    """One block as a parser finds it; `row`: its first line; `page`: PDF page or None;
    `row_lines`: the line of each row of `cells` (a definition or labelled item: `row`)."""

    kind: str
    text: str
    row: int
    page: int | None = None
    level: int = 0
    cells: list[list[str]] | None = None
    header_rows: int = 0
    heading_path: list[str] = field(default_factory=list)
    row_lines: list[int] | None = None

    def __post_init__(self) -> None:
        if self.row_lines is None and self.kind in ("definition", "labelled"):
            self.row_lines = [self.row]


@dataclass
class Document:
    """What a parser gave: the blocks, the pages without text (PDF), page and line counts."""

    blocks: list[Block] = field(default_factory=list)
    textless: list[int] = field(default_factory=list)
    pages: int = 0
    lines: int = 0


class HeadingStack:
    """The headings above the current position; gives each block its heading path."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, str]] = []

    def heading(self, level: int, title: str, row: int, page: int | None = None) -> Block:
        """A heading block; it closes the headings of its level and below."""
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, title))
        return Block("heading", title, row, page, level, heading_path=self.path())

    def path(self) -> list[str]:
        return [title for _, title in self.stack]

    def place(self, block: Block) -> Block:
        """`block` under the current headings."""
        block.heading_path = self.path()
        return block


def join_wrapped(lines: list[str]) -> str:
    """Lines of one wrapped cell or sentence as one value: other text joined with a space;
    without one where the break touches a Han character or the line before holds Han text
    (Chinese is wrapped at any character, `参数N` + `o.1829` is `参数No.1829`); a line that
    starts a list item stays on its own line."""
    out = ""
    before = ""
    for line in (part.strip() for part in lines):
        if not line:
            continue
        if not out:
            out = line
        elif _LIST_MARK.match(line):
            out += "\n" + line
        else:
            han = _HAN_END.match(out[-1]) or _HAN_END.match(line[0]) or _HAN.search(before)
            out += ("" if han else " ") + line
        before = line
    return out


def _cell_text(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", "<br>")


def render_table(cells: list[list[str]], header_rows: int) -> str:
    """The one text form of a table (see the module note); no header: a ruler first."""
    width = max((len(row) for row in cells), default=0)
    rows = [[*row, *[""] * (width - len(row))] for row in cells]
    header: list[str] = []
    for column in range(width):
        parts = list(dict.fromkeys(r[column] for r in rows[:header_rows] if r[column]))
        header.append(" ".join(parts))
    lines = [f"| {' | '.join(_cell_text(c) for c in header)} |"] if header_rows else []
    lines.append("| " + " | ".join(["---"] * width) + " |")
    lines += [f"| {' | '.join(_cell_text(c) for c in row)} |" for row in rows[header_rows:]]
    return "\n".join(lines)


def table_block(
    cells: list[list[str]],
    header_rows: int,
    row_lines: list[int],
    page: int | None = None,
    row: int | None = None,
) -> Block:
    """A table block; `row_lines`: the line of each row of `cells`; `row`: the block's first
    line (default: its first row's)."""
    if len(row_lines) != len(cells):
        raise ValueError(f"table of {len(cells)} rows given {len(row_lines)} row lines")
    text = render_table(cells, header_rows)
    first = row_lines[0] if row is None else row
    return Block("table", text, first, page, 0, cells, header_rows, row_lines=row_lines)


def block_frame(blocks: list[Block], rel: str) -> pl.DataFrame:
    """Blocks in document order → DOCUMENT_BLOCK_SCHEMA, with lineage."""
    schema = {k: v for k, v in DOCUMENT_BLOCK_SCHEMA.items() if k not in ("record_id",)}
    frame = pl.DataFrame(
        {
            "source_kind": [SOURCE_KIND] * len(blocks),
            "source_file": [rel] * len(blocks),
            "source_row": [b.row for b in blocks],
            "block": list(range(len(blocks))),
            "kind": [b.kind for b in blocks],
            "heading_path": [b.heading_path for b in blocks],
            "level": [b.level for b in blocks],
            "text": [b.text for b in blocks],
            "cells": [b.cells for b in blocks],
            "header_rows": [b.header_rows for b in blocks],
            "page": [b.page for b in blocks],
            "row_lines": [b.row_lines for b in blocks],
        },
        schema=schema,
    )
    ids = record_ids(SOURCE_KIND, rel, frame["source_row"], frame["kind"] + "\x1f" + frame["text"])
    return frame.with_columns(ids).select(list(DOCUMENT_BLOCK_SCHEMA))


def _place(lines: list[str], start: int, text: str) -> None:
    """Write `text` into `lines` from line `start` (0-based), after what is there already."""
    while len(lines) < start:
        lines.append("")
    lines.extend(text.split("\n"))


def sections_from_blocks(blocks: pl.DataFrame, family: str | None) -> pl.DataFrame:
    """Blocks (DOCUMENT_BLOCK_SCHEMA) of one or more documents → sections
    (MANUAL_SECTION_SCHEMA): one per heading, with the blocks down to the next heading as
    its body; the blocks before the first heading form a section with an empty path."""
    rows: list[dict] = []
    for b in blocks.iter_rows(named=True):
        new_file = not rows or rows[-1]["source_file"] != b["source_file"]
        if b["kind"] == "heading" or new_file:
            heading = b["kind"] == "heading"
            rows.append(
                {
                    "source_file": b["source_file"],
                    "source_row": b["source_row"],
                    "heading_path": b["heading_path"] if heading else [],
                    "level": b["level"] if heading else 0,
                    "page": b["page"],
                    "lines": [],
                    "body_row": None,
                }
            )
            if heading:
                continue
        section = rows[-1]
        if section["body_row"] is None:
            section["body_row"] = b["source_row"]
        _place(section["lines"], b["source_row"] - section["body_row"], b["text"])
    return _section_frame(rows, family)


def _section_frame(rows: list[dict], family: str | None) -> pl.DataFrame:
    frame = pl.DataFrame(
        {
            "source_kind": [SOURCE_KIND] * len(rows),
            "source_file": [r["source_file"] for r in rows],
            "source_row": [r["source_row"] for r in rows],
            "heading_path": [r["heading_path"] for r in rows],
            "level": [r["level"] for r in rows],
            "text": ["\n".join(r["lines"]).strip() for r in rows],
            "body_row": [r["body_row"] or r["source_row"] for r in rows],
            "page": [r["page"] for r in rows],
            "family": [family] * len(rows),
        },
        schema={k: v for k, v in MANUAL_SECTION_SCHEMA.items() if k != "record_id"},
    )
    parts = [
        part.with_columns(
            record_ids(
                SOURCE_KIND,
                part["source_file"][0],
                part["source_row"],
                part.select(
                    pl.concat_str(pl.col("heading_path").list.join(" > "), "text", separator="\n")
                ).to_series(),
            )
        ).select(list(MANUAL_SECTION_SCHEMA))
        for part in frame.partition_by("source_file", maintain_order=True)
    ]
    return pl.concat(parts) if parts else pl.DataFrame(schema=MANUAL_SECTION_SCHEMA)
