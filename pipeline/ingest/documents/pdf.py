"""Text-layer PDFs → blocks, read with pdfplumber page by page (each page closed after use, so
memory stays bounded on a manual of thousands of pages).

- Tables come from pdfplumber's table finder (ruled tables): a cell wrapped over several lines
  is one value (`blocks.join_wrapped`), a merged cell's value is repeated over the cells it
  covers, leading rows of short text without digits are header rows. A table that ends a page
  and a table that starts the next one with the same columns are one table: a repeated header
  is dropped, a row cut by the page break (its first cell empty) is joined to the row above.
- Text outside tables is cut into lines from its words, in reading order: a page with a
  gutter free of words down its middle is read as two columns (lines across the gutter, such
  as a title, in their place). Wide gaps between words keep their width, so an unruled grid
  is found as in plain text. The lines become blocks as plain text does (`text.text_blocks`),
  the PDF outline giving the headings when there is one.
- Running heads and footers (a line in the top or bottom tenth of a page that a page at most
  two away repeats at the same height, page numbers aside: `第七章 报警信息`, `— 213 —`) are
  dropped, so they neither cut a table continued over pages nor become headings.
- A page without text is reported (`no_text_layer`); a file that does not open, is damaged or
  is encrypted raises `ManualError` naming the file; one with more pages than allowed (counted
  in the page tree, before any page is read) raises `TooManyPagesError`.

`row` of a block: its line in the document's text as read here (a blank line between
paragraphs, a table its rendered lines), counted over the document. `row_lines` of a table:
the rendered line of each row (header rows: the header line); the rows continued on the next
page follow its last row, or, where lines were read between (a running page header), those.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pdfplumber
from pdfminer.pdfdocument import PDFDocument, PDFNoOutlines
from pdfminer.pdfparser import PDFParser
from pdfminer.pdftypes import resolve1

from pipeline.ingest.documents.blocks import (
    Block,
    Document,
    HeadingStack,
    ManualError,
    join_wrapped,
    render_table,
    table_block,
)
from pipeline.ingest.documents.text import text_blocks

_HEADER_CELL = re.compile(r"^[^\d]{1,40}$")
_X_TOLERANCE = 6.0
# Running heads and footers: lines in the top or bottom tenth of a page that a page at most
# _NEAR pages away repeats at the same height (page numbers aside).
_BAND = 0.1
_NEAR = 2
_SAME_TOP = 3.0


class TooManyPagesError(ManualError):
    """A PDF with more pages than `manuals.max_pdf_pages`: quarantined unread."""

    reason = "too_many_pages"


def _page_count(path: Path) -> int | None:
    """The page count the page tree's root declares (None where it declares none), read
    with pdfminer alone: no page is listed or parsed."""
    with path.open("rb") as stream:
        catalog = PDFDocument(PDFParser(stream)).catalog
        count = resolve1(resolve1(catalog.get("Pages")) or {}).get("Count")
        count = resolve1(count)
    return count if isinstance(count, int) else None


def _outline(pdf: Any) -> dict[str, int]:
    """Outline (bookmark) titles → depth; empty when the PDF has none."""
    try:
        return {
            " ".join(str(title).split()): level
            for level, title, *_ in pdf.doc.get_outlines()
            if title
        }
    except PDFNoOutlines:
        return {}


def _resolved(table: Any) -> list[list[str]]:
    """Cell values, merged cells repeated: a missing cell covered by the cell to its left
    takes that value (a column span), else the value above it (a row span)."""
    rows: list[list[str]] = []
    starts = [
        next((r.cells[k][0] for r in table.rows if r.cells[k] is not None), None)
        for k in range(len(table.rows[0].cells) if table.rows else 0)
    ]
    for raw, row in zip(table.extract(), table.rows, strict=True):
        out: list[str] = []
        for column, value in enumerate(raw):
            if value is not None:
                out.append(join_wrapped(value.split("\n")))
                continue
            left = next((c for c in reversed(row.cells[:column]) if c is not None), None)
            x0 = starts[column] if column < len(starts) else None
            spans_left = left is not None and x0 is not None and left[2] > x0 + 1
            if out and spans_left:
                out.append(out[-1])
            else:
                out.append(rows[-1][column] if rows and column < len(rows[-1]) else "")
        rows.append(out)
    return rows


def _header_rows(cells: list[list[str]]) -> int:
    """Leading rows (at most two, never all) of short text without digits in every cell."""
    count = 0
    for row in cells[:2]:
        if count + 1 >= len(cells) or not all(_HEADER_CELL.match(c) for c in row):
            break
        count += 1
    return count


@dataclass
class _Table:
    block: Block
    columns: list[float]


def _columns(table: Any) -> list[float]:
    return [cell[0] for cell in table.rows[0].cells if cell is not None]


def _continues(previous: _Table, table: Any, cells: list[list[str]]) -> bool:
    columns = _columns(table)
    return (
        len(columns) == len(previous.columns)
        and all(abs(a - b) <= _X_TOLERANCE for a, b in zip(columns, previous.columns, strict=True))
        and len(cells[0]) == len(previous.block.cells[0])
    )


def _rendered_lines(first: int, rows: int, header_rows: int) -> list[int]:
    """The line of each row of a table rendered from line `first`: the header rows on the
    (one) header line, the body rows one a line after the ruler."""
    body = first + (2 if header_rows else 1)
    return [first] * header_rows + list(range(body, body + rows - header_rows))


def _join(previous: Block, cells: list[list[str]], first_line: int) -> int:
    """Rows of a table continued on the next page appended to `previous` (header dropped),
    counted from `first_line`, where they are read; how many rows were added (a row cut by
    the page break joins the row above and keeps its line)."""
    header = previous.cells[: previous.header_rows]
    while header and cells[: len(header)] == header:
        cells = cells[len(header) :]
    if cells and not cells[0][0] and previous.cells[previous.header_rows :]:
        last = previous.cells[-1]
        previous.cells[-1] = [join_wrapped([a, b]) for a, b in zip(last, cells[0], strict=True)]
        cells = cells[1:]
    previous.cells.extend(cells)
    previous.row_lines = [*(previous.row_lines or []), *range(first_line, first_line + len(cells))]
    previous.text = render_table(previous.cells, previous.header_rows)
    return len(cells)


def _gutter(words: list[dict], width: float) -> float | None:
    """The x of a word-free gutter between two columns of text, or None for one column."""
    if len(words) < 20:
        return None
    best: tuple[float, float] | None = None
    run_start = None
    for x in [width * k / 100 for k in range(35, 66)]:
        free = not any(w["x0"] < x < w["x1"] for w in words)
        if free and run_start is None:
            run_start = x
        if (not free or x >= width * 0.65) and run_start is not None:
            if best is None or x - run_start > best[1] - best[0]:
                best = (run_start, x)
            run_start = None
    if best is None:
        return None
    middle = (best[0] + best[1]) / 2
    left = sum(w["x1"] < middle for w in words)
    right = sum(w["x0"] > middle for w in words)
    return middle if min(left, right) >= 0.25 * len(words) else None


def _lines(words: list[dict]) -> list[list[dict]]:
    """Words grouped into lines by their top, each line left to right."""
    lines: list[list[dict]] = []
    for word in sorted(words, key=lambda w: (round(w["top"]), w["x0"])):
        if lines and abs(lines[-1][0]["top"] - word["top"]) <= 2.5:
            lines[-1].append(word)
        else:
            lines.append([word])
    return [sorted(line, key=lambda w: w["x0"]) for line in lines]


def _signature(line: list[dict]) -> str:
    """A line's words with their numbers masked (`— 213 —` and `— 214 —` are alike)."""
    return re.sub(r"\d+", "#", " ".join(w["text"] for w in line))


def _in_band(obj: dict, height: float) -> bool:
    return obj["bottom"] <= height * _BAND or obj["top"] >= height * (1 - _BAND)


def _band_lines(page: Any) -> list[tuple[str, float]]:
    """(signature, top) of the lines in a page's top and bottom bands."""
    words = page.filter(lambda obj: _in_band(obj, page.height)).extract_words()
    return [(_signature(line), line[0]["top"]) for line in _lines(words)]


def _running(line: list[dict], height: float, near: list[tuple[str, float]]) -> bool:
    """Whether a line is a running head or footer: in a band, repeated on a page near by."""
    if not all(_in_band(w, height) for w in line):
        return False
    signature, top = _signature(line), line[0]["top"]
    return any(s == signature and abs(t - top) <= _SAME_TOP for s, t in near)


def _pages(pdf: Any) -> Iterator[tuple[int, Any, list[tuple[str, float]]]]:
    """(number, page, band lines of the pages near it); a page is closed once read, so at most
    _NEAR + 1 pages are open (those ahead parsed for their bands)."""
    pages = pdf.pages
    bands: dict[int, list[tuple[str, float]]] = {}
    for index, page in enumerate(pages):
        for ahead in range(index, min(index + _NEAR + 1, len(pages))):
            if ahead not in bands:
                bands[ahead] = _band_lines(pages[ahead])
        near = [
            line
            for other in range(index - _NEAR, index + _NEAR + 1)
            if other != index
            for line in bands.get(other, [])
        ]
        yield index + 1, page, near
        page.close()
        bands.pop(index - _NEAR, None)


def _line_text(words: list[dict], left: float, unit: float) -> str:
    """A line's words; a gap wider than two characters becomes spaces up to the word's
    column (`unit`: the page's mean character width), so aligned grids stay aligned."""
    out = ""
    for previous, word in zip([None, *words], words, strict=False):
        if previous is not None:
            wide = word["x0"] - previous["x1"] > 2 * unit
            column = round((word["x0"] - left) / unit)
            out += " " * max(2, column - len(out)) if wide else " "
        out += word["text"]
    return out


@dataclass
class _Item:
    key: tuple[int, int, float]
    bottom: float
    size: float
    text: str | None = None
    table: Any = None


def _split_columns(line: list[dict], gutter: float | None) -> list[tuple[int, list[dict]]]:
    """(column, words): 0 for a line across the gutter (or one column), 1 left, 2 right."""
    if gutter is None or any(w["x0"] < gutter < w["x1"] for w in line):
        return [(0, line)]
    parts = [
        (1, [w for w in line if w["x1"] <= gutter]),
        (2, [w for w in line if w["x0"] >= gutter]),
    ]
    return [(c, ws) for c, ws in parts if ws]


def _pitch(items: list[_Item]) -> float | None:
    """The usual distance between the tops of consecutive lines of one column (None: too
    few lines to tell)."""
    steps = [
        b.key[2] - a.key[2]
        for a, b in zip(items, items[1:], strict=False)
        if a.table is None and b.table is None and a.key[1] == b.key[1]
    ]
    return statistics.median(steps) if len(steps) >= 2 else None


class _Reader:
    """Reads pages one at a time into the document's blocks, carrying the headings, the line
    count and a table that may continue on the next page."""

    def __init__(self, outline: dict[str, int]) -> None:
        self.outline = outline
        self.stack = HeadingStack()
        self.doc = Document()
        self.open_table: _Table | None = None

    def page(self, page: Any, number: int, near: list[tuple[str, float]]) -> None:
        """One page's tables and text, in reading order, without its running heads and
        footers (`near`: the band lines of the pages near it)."""
        self.doc.pages += 1
        if not page.chars:
            self.doc.textless.append(number)
            self.open_table = None
            return
        tables = page.find_tables()
        boxes = [t.bbox for t in tables]

        def outside(obj: dict) -> bool:
            return not any(
                b[0] - 1 <= obj["x0"] and obj["x1"] <= b[2] + 1 and b[1] - 1 <= obj["top"]
                and obj["bottom"] <= b[3] + 1
                for b in boxes
            )  # fmt: skip

        words = page.filter(outside).extract_words(extra_attrs=["size"])
        lines = [line for line in _lines(words) if not _running(line, page.height, near)]
        items = self._items(lines, tables, page.width)
        self._emit(items, number)

    def _items(self, lines: list[list[dict]], tables: list[Any], width: float) -> list[_Item]:
        """Lines (a two-column page: their halves) and tables, sorted into reading order."""
        words = [word for line in lines for word in line]
        gutter = _gutter(words, width)
        left = min((w["x0"] for w in words), default=0.0)
        unit = sum(w["x1"] - w["x0"] for w in words) / max(1, sum(len(w["text"]) for w in words))
        items: list[_Item] = []
        for line in lines:
            size = statistics.median(w["size"] for w in line)
            for column, ws in _split_columns(line, gutter):
                text = _line_text(ws, left if column != 2 else ws[0]["x0"], unit)
                bottom = max(w["bottom"] for w in ws)
                items.append(_Item((0, column, ws[0]["top"]), bottom, size, text=text))
        for table in tables:
            x0, top, x1, bottom = table.bbox
            column = 0 if gutter is None or x0 < gutter < x1 else (1 if x1 <= gutter else 2)
            items.append(_Item((0, column, top), bottom, 0.0, table=table))
        spans = sorted(i.key[2] for i in items if i.key[1] == 0)
        for item in items:
            _, column, top = item.key
            region = (
                bisect.bisect_left(spans, top) + 1
                if column == 0
                else bisect.bisect_right(spans, top)
            )
            item.key = (region, column, top)
        return sorted(items, key=lambda i: i.key)

    def _emit(self, items: list[_Item], number: int) -> None:
        """Items in reading order → blocks; a blank line where the text leaves a gap."""
        lines: list[str] = []
        previous: _Item | None = None
        first = True
        pitch = _pitch(items)
        for item in items:
            if item.table is not None:
                self._flush(lines, number)
                lines = []
                self._table(item.table, number, continues=first)
            else:
                gap = (
                    previous is not None
                    and previous.table is None
                    and (
                        item.key[1] != previous.key[1]
                        or item.key[2] - previous.key[2] > 1.4 * (pitch or item.size * 1.2)
                    )
                )
                if gap:
                    lines.append("")
                lines.append(item.text or "")
                first = first and len(lines) <= 2 and len(item.text or "") <= 40
            previous = item
        self._flush(lines, number)
        if lines and (len(lines) > 2 or any(len(line) > 40 for line in lines)):
            self.open_table = None

    def _flush(self, lines: list[str], number: int) -> None:
        if not lines:
            return
        self.doc.blocks += text_blocks(lines, self.doc.lines + 1, number, self.stack, self.outline)
        self.doc.lines += len(lines) + 1

    def _table(self, table: Any, number: int, continues: bool) -> None:
        cells = _resolved(table)
        if not cells:
            return
        if continues and self.open_table is not None and _continues(self.open_table, table, cells):
            previous = self.open_table.block
            # right after its last row when nothing was read since, else after what was
            first = previous.row_lines[-1] + 1 if self.doc.blocks[-1] is previous else None
            if _join(previous, cells, first or self.doc.lines + 1):
                self.doc.lines = previous.row_lines[-1] + 1
            return
        header_rows = _header_rows(cells)
        lines = _rendered_lines(self.doc.lines + 1, len(cells), header_rows)
        block = self.stack.place(table_block(cells, header_rows, lines, number))
        self.doc.blocks.append(block)
        self.doc.lines += block.text.count("\n") + 2
        self.open_table = _Table(block, _columns(table))


def pdf_blocks(path: Path, max_pages: int | None = None) -> Document:
    """A PDF → its blocks and the pages without text; ManualError when it cannot be read,
    TooManyPagesError when it has more than `max_pages` pages (None: no limit)."""
    try:
        pages = _page_count(path) if max_pages is not None else None
        if max_pages is not None and pages is not None and pages > max_pages:
            raise TooManyPagesError(
                f"{path}: {pages} pages, more than manuals.max_pdf_pages ({max_pages}); not read"
            )
        with pdfplumber.open(path) as pdf:
            reader = _Reader(_outline(pdf))
            for number, page, near in _pages(pdf):
                reader.page(page, number, near)
            return reader.doc
    except ManualError:
        raise
    except Exception as exc:  # noqa: BLE001 - pdfminer raises many types on a broken file
        reason = "encrypted" if "password" in f"{type(exc).__name__} {exc!r}".lower() else "damaged"
        raise ManualError(
            f"{path}: not a readable PDF ({reason}): {type(exc).__name__}: {exc}"
        ) from None
