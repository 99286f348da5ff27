"""Markdown manuals → blocks, parsed by markdown-it-py (CommonMark with GFM pipe tables):
ATX and setext headings, paragraphs (labelled lines such as `原因：…` or `**Cause:** …` split
out as labelled items), list items with their nesting depth, pipe tables (`<br>` in a cell is
a line break) and fenced or indented code, kept whole as a paragraph (a `#` line in it is no
heading). A block's text is its source lines as written, so its lines are the file's lines
from `row` on.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from pipeline.ingest.documents.blocks import Block, HeadingStack, table_block
from pipeline.ingest.documents.text import line_blocks

_PARSER = MarkdownIt("commonmark").enable("table")
_BR = re.compile(r"(?i)<br\s*/?>")


def _cell(content: str) -> str:
    return "\n".join(part.strip() for part in _BR.split(content.replace("\\|", "|"))).strip()


def _table(tokens: list[Token], i: int) -> tuple[list[list[str]], int, list[int], int]:
    """(rows, header rows, each row's line, index after table_close) of the table opening
    at `i`."""
    rows: list[list[str]] = []
    lines: list[int] = []
    line = (tokens[i].map or [0])[0] + 1
    header_rows = 0
    in_head = False
    while tokens[i].type != "table_close":
        token = tokens[i]
        if token.type in ("thead_open", "thead_close"):
            in_head = token.type == "thead_open"
        elif token.type == "tr_open":
            rows.append([])
            line = token.map[0] + 1 if token.map else line
            lines.append(line)
            header_rows += in_head
        elif token.type == "inline":
            rows[-1].append(_cell(token.content))
        i += 1
    return rows, header_rows, lines, i + 1


class _Reader:
    """Walks the token stream; `items`: the open list items (their first line, depth)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.stack = HeadingStack()
        self.blocks: list[Block] = []
        self.depth = 0
        self.item_row: int | None = None

    def source(self, start: int, end: int) -> list[str]:
        return [line.rstrip("\r") for line in self.lines[start:end]]

    def read(self, tokens: list[Token]) -> list[Block]:
        i = 0
        while i < len(tokens):
            i = self.token(tokens, i)
        return self.blocks

    def token(self, tokens: list[Token], i: int) -> int:
        """Read the token at `i` (and the ones it owns); the index of the next one."""
        token = tokens[i]
        kind, where = token.type, token.map or [0, 0]
        if kind in ("bullet_list_open", "ordered_list_open", "bullet_list_close",
                    "ordered_list_close"):  # fmt: skip
            self.depth += 1 if kind.endswith("_open") else -1
        elif kind == "list_item_open":
            self.item_row = where[0]
        elif kind == "heading_open":
            title = tokens[i + 1].content.strip()
            level = int(token.tag[1])
            self.blocks.append(self.stack.heading(level, title, where[0] + 1))
            return i + 3
        elif kind == "table_open":
            rows, header_rows, lines, after = _table(tokens, i)
            self.blocks.append(self.stack.place(table_block(rows, header_rows, lines)))
            return after
        elif kind in ("fence", "code_block", "html_block"):
            text = "\n".join(self.source(*where)).strip("\n")
            self.blocks.append(self.stack.place(Block("paragraph", text, where[0] + 1)))
        elif kind == "paragraph_open":
            self.paragraph(where)
            return i + 3
        return i + 1

    def paragraph(self, where: list[int]) -> None:
        """A paragraph, or the first paragraph of a list item (from the item's marker line)."""
        if self.item_row is not None:
            lines = self.source(self.item_row, where[1])
            row, self.item_row = self.item_row + 1, None
            found = line_blocks([line.strip() for line in lines], row, None)
            if found and found[0].kind != "labelled":
                found[0].kind, found[0].level = "list_item", self.depth
        else:
            found = line_blocks(self.source(*where), where[0] + 1, None)
            for block in found:
                if block.kind == "list_item":  # "1) …" inside a paragraph: not a list
                    block.kind = "paragraph"
        self.blocks += [self.stack.place(b) for b in found]


def markdown_blocks(text: str) -> list[Block]:
    """A Markdown document → blocks in document order."""
    lines = text.split("\n")
    return _Reader(lines).read(_PARSER.parse(text))
