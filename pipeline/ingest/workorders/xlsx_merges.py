"""Merged cells of an XLSX sheet, read from the workbook's XML (calamine does not report them).

A merged block shows its value in the top-left cell only; readers get blanks below it. Filling
exactly the merged blocks repairs such exports without guessing, where a CSV export needs the
configured `fill_down` instead.
"""

from __future__ import annotations

import posixpath
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import polars as pl

_NS = {
    "m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
    "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    "rel": "http://schemas.openxmlformats.org/package/2006/relationships",
}
_CELL = re.compile(r"([A-Z]+)(\d+)")


def _cell(ref: str) -> tuple[int, int]:
    """'C12' -> (column 2, row 12): 0-based column, 1-based row."""
    letters, row = _CELL.fullmatch(ref).groups()  # type: ignore[union-attr]
    col = 0
    for ch in letters:
        col = col * 26 + ord(ch) - 64
    return col - 1, int(row)


@dataclass(frozen=True)
class SheetLayout:
    """Where calamine's grid sits in the sheet, and the merged blocks."""

    first_row: int  # 1-based sheet row of the grid's first row (first row holding a value)
    first_col: int  # 0-based sheet column of the grid's first column
    merged: list[tuple[int, int, int, int]]  # (first col, first row, last col, last row)


def _sheet_xml(path: Path, sheet: str | int) -> ElementTree.Element:
    with zipfile.ZipFile(path) as book:
        workbook = ElementTree.fromstring(book.read("xl/workbook.xml"))
        sheets = workbook.findall("m:sheets/m:sheet", _NS)
        chosen = (
            sheets[sheet]
            if isinstance(sheet, int)
            else next(s for s in sheets if s.get("name") == sheet)
        )
        rel_id = chosen.get(f"{{{_NS['r']}}}id")
        rels = ElementTree.fromstring(book.read("xl/_rels/workbook.xml.rels"))
        target = next(
            r.get("Target") for r in rels.findall("rel:Relationship", _NS) if r.get("Id") == rel_id
        )
        member = target.lstrip("/") if target.startswith("/") else posixpath.join("xl", target)
        return ElementTree.fromstring(book.read(member))


def sheet_layout(path: Path, sheet: str | int) -> SheetLayout:
    """The grid's offset in the sheet (calamine starts at the first cell holding a value) and
    the merged blocks."""
    root = _sheet_xml(path, sheet)
    ranges = []
    for merge in root.findall("m:mergeCells/m:mergeCell", _NS):
        first, _, last = merge.get("ref", "").partition(":")
        (c1, r1), (c2, r2) = _cell(first), _cell(last or first)
        ranges.append((c1, r1, c2, r2))
    filled = [
        _cell(c.get("r", "A1"))
        for c in root.iterfind("m:sheetData/m:row/m:c", _NS)
        if c.find("m:v", _NS) is not None or c.find("m:is", _NS) is not None
    ]
    first_row = min((r for _, r in filled), default=1)
    first_col = min((c for c, _ in filled), default=0)
    return SheetLayout(first_row, first_col, ranges)


def fill_merged(
    frame: pl.DataFrame,
    ranges: list[tuple[int, int, int, int]],
    header_row: int = 1,
    first_col: int = 0,
) -> pl.DataFrame:
    """Copy each vertically merged block's top value into the rows below it. `frame` holds the
    sheet rows below `header_row`, its first column being sheet column `first_col`."""
    if not ranges:
        return frame
    sources = {name: np.arange(frame.height) for name in frame.columns}
    for c1, r1, _c2, r2 in ranges:
        top = r1 - header_row - 1  # sheet row r is frame index r - header_row - 1
        col = c1 - first_col
        if top < 0 or not 0 <= col < frame.width:
            continue  # a merged header or title cell
        # A block's value belongs to its first column; rows below the top repeat it.
        sources[frame.columns[col]][top : min(r2 - header_row, frame.height)] = top
    identity = np.arange(frame.height)
    return frame.select(
        pl.col(name).gather(pl.Series(idx)) if (idx != identity).any() else pl.col(name)
        for name, idx in sources.items()
    )
