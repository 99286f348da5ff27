"""Plain-text manuals → blocks: numbered headings (`3`, `3.2.1` + a short title, `第N章/节`,
`一、`), aligned-column grids (fields separated by a tab or 2+ spaces at the header's column
positions over 3+ lines, a `----` ruler under the header allowed) as tables, labelled items
(`原因：…`, `Cause: …`), list items (`-`, `1.`, `（2）`, `①`) and paragraphs; every line kept
as written in its block, so a block's lines are the file's lines from `row` on.

A grid line whose first column is empty continues the row above it (a wrapped cell); the
columns are found by display width, a Han character counting two.
"""

from __future__ import annotations

import re
import unicodedata

from pipeline.ingest.documents.blocks import Block, HeadingStack, join_wrapped, table_block
from pipeline.kb.layouts import label_of

_NUMBERED = re.compile(r"^(\d{1,2}(?:\.\d{1,2}){0,4})\s+(\S.{0,48})$")
_CHAPTER = re.compile(r"^第\s*([0-9一二三四五六七八九十百]+)\s*([章节])\s*(.{0,40})$")
_CN_ORDINAL = re.compile(r"^([一二三四五六七八九十]{1,3})、\s*(\S.{0,30})$")
_CLOSING = tuple("。．.，,；;：:！!？?")
_LIST_ITEM = re.compile(r"^(\s*)(?:[-*•·▪◦]\s+|\d{1,2}[.)、]\s*|[（(]\d{1,2}[)）]\s*|[①-⑳]\s*)\S")
_RULER = re.compile(r"^[\s\-=_+|:─━═]{3,}$")
_FIELD_GAP = re.compile(r"\t+|\s{2,}")
_TOLERANCE = 2


def text_heading(line: str, outline: dict[str, int] | None = None) -> tuple[int, str] | None:
    """(level, title) when a line is a heading: an outline title at its depth when the
    document has an outline, else a numbered or chapter heading without closing punctuation."""
    stripped = " ".join(line.split())
    if not stripped:
        return None
    if outline:
        return (outline[stripped], stripped) if stripped in outline else None
    if stripped.endswith(_CLOSING) or len(stripped) > 60:
        return None
    if m := _NUMBERED.match(stripped):
        return m.group(1).count(".") + 1, stripped
    if m := _CHAPTER.match(stripped):
        return (1 if m.group(2) == "章" else 2), stripped
    if _CN_ORDINAL.match(stripped):
        return 1, stripped
    return None


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _fields(line: str) -> list[tuple[int, str]]:
    """(display column where it starts, text) of each field of a grid line; with tabs, the
    field's number stands for its column."""
    if "\t" in line:
        parts = [f.strip() for f in line.strip().split("\t")]
        return [(i * 1000, f) for i, f in enumerate(parts) if f]
    return [(_width(line[: m.start()]), m.group()) for m in re.finditer(r"\S+(?: \S+)*", line)]


def _columns(starts: list[int], fields: list[tuple[int, str]]) -> list[int] | None:
    """The header column of each field, or None when a field starts at no column."""
    out = []
    for start, _ in fields:
        near = [i for i, s in enumerate(starts) if abs(s - start) <= _TOLERANCE]
        if not near:
            return None
        out.append(near[0])
    return out


def _grid(lines: list[str], i: int) -> tuple[list[list[str]], list[int], int] | None:
    """(cells with the header first, the index of each row's first line, index after the
    grid) of an aligned grid at line `i`."""
    header = _fields(lines[i])
    if len(header) < 2 or _FIELD_GAP.search(lines[i].strip()) is None:
        return None
    if any(len(text) > 40 or re.search(r"[:：]\S", text) for _, text in header):
        return None
    starts = [s for s, _ in header]
    rows: list[list[list[str]]] = []
    starts_at = [i]
    j = i + 1
    if j < len(lines) and _RULER.match(lines[j]) and lines[j].strip():
        j += 1
    while j < len(lines) and lines[j].strip() and not _RULER.match(lines[j]):
        fields = _fields(lines[j])
        columns = _columns(starts, fields)
        if columns is None or (len(fields) < 2 and (not rows or columns[0] == 0)):
            break
        if columns[0] == 0 or not rows:
            rows.append([[] for _ in starts])
            starts_at.append(j)
        for column, (_, text) in zip(columns, fields, strict=True):
            rows[-1][column].append(text)
        j += 1
    if len(rows) < 2:
        return None
    cells = [[text for _, text in header]] + [[join_wrapped(c) for c in row] for row in rows]
    return cells, starts_at, j


def line_blocks(lines: list[str], row: int, page: int | None) -> list[Block]:
    """A run of non-blank lines → list items, labelled items and paragraphs (lines kept). A
    ruler (`-----`, `=====`) is a paragraph of its own and ends the block above it, as a line
    with a label the knowledge base does not keep (`Program continuation:`, `注意：`) starts
    one: neither is text of the label above."""
    blocks: list[Block] = []
    ended = False  # the line before was a ruler: the next line starts a block
    for offset, line in enumerate(lines):
        labelled = label_of(line.strip())
        item = _LIST_ITEM.match(line)
        if labelled is not None and labelled[0] != "_other":
            name = re.split(r"[:：]", line.strip().lstrip("-*•· "), maxsplit=1)[0]
            name = name.strip("*_【】[] ")
            block = Block("labelled", line, row + offset, page, cells=[[name, labelled[1]]])
        elif item is not None:
            level = 1 + len(item.group(1).expandtabs(4)) // 2
            block = Block("list_item", line.strip(), row + offset, page, level)
        elif blocks and not ended and labelled is None and not _RULER.match(line):
            blocks[-1].text += "\n" + line
            if blocks[-1].cells is not None:
                label, value = blocks[-1].cells[0]
                blocks[-1].cells[0] = [label, join_wrapped([value, line])]
            continue
        else:
            block = Block("paragraph", line, row + offset, page)
        blocks.append(block)
        ended = _RULER.match(line) is not None
    return blocks


def text_blocks(
    lines: list[str],
    first_row: int = 1,
    page: int | None = None,
    stack: HeadingStack | None = None,
    outline: dict[str, int] | None = None,
) -> list[Block]:
    """Lines of a text (or of a PDF page's text) → blocks; `first_row`: the first line's
    number; `stack`: the headings carried from earlier pages."""
    stack = stack or HeadingStack()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        if heading := text_heading(lines[i], outline):
            blocks.append(stack.heading(heading[0], heading[1], first_row + i, page))
            i += 1
            continue
        if grid := _grid(lines, i):
            cells, starts_at, end = grid
            row_lines = [first_row + k for k in starts_at]
            blocks.append(stack.place(table_block(cells, 1, row_lines, page)))
            i = end
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() and not text_heading(lines[j], outline):
            if _grid(lines, j):
                break
            j += 1
        blocks += [stack.place(b) for b in line_blocks(lines[i:j], first_row + i, page)]
        i = j
    return blocks
