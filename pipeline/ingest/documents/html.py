"""HTML manuals and vendor alarm pages → blocks, parsed by selectolax (lexbor).

Dropped first: scripts, styles, forms, navigation (`<nav>`, role navigation/banner/
contentinfo, class or id naming a menu, breadcrumb, sidebar, footer, cookie notice or table of
contents) and `<header>`/`<footer>`/`<aside>` outside the article. Then, in document order:
`<h1>`..`<h6>` headings with their heading path; `<p>`, `<pre>`, `<blockquote>` and loose text
as paragraphs (a labelled one such as `<b>Cause:</b> …` as a labelled item); `<li>` as list
items with their nesting depth; `<table>` as a table (rows of `<thead>` or of `<th>` only are
header rows; `rowspan`/`colspan` resolved by repeating the value); `<dl>` as one definition
block per `<dt>` (its `<dd>`s joined). `<br>` is a line break. The `<title>` is the page's
level-0 heading, at the top of every heading path (unless the first heading repeats it). A
page with no text gives no blocks. `row`: the line of the element's start tag in the file.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from pipeline.ingest.documents.blocks import Block, HeadingStack, table_block
from pipeline.ingest.documents.text import line_blocks

_DROP = (
    "script, style, noscript, template, form, iframe, svg, button, select, nav, "
    "[role=navigation], [role=banner], [role=contentinfo], [aria-hidden=true], [hidden]"
)
_OUTSIDE_ARTICLE = ("header", "footer", "aside")
_BOILERPLATE = re.compile(
    r"(?i)(?:^|[\s_-])(?:nav|navbar|navigation|menu|breadcrumbs?|sidebar|footer|cookies?|"
    r"toc|skip|share|social|pagination|banner)(?:$|[\s_-])"
)
_INLINE = {
    "-text", "a", "abbr", "b", "bdi", "br", "cite", "code", "em", "font", "i", "img", "kbd",
    "mark", "q", "s", "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr",
}  # fmt: skip
_PARAGRAPH = {"p", "pre", "blockquote", "address", "figcaption", "caption", "summary"}
_BREAK = "\u2028"
_IMPLIED = {"html", "head", "body", "tbody", "colgroup"}
_HIDDEN_SOURCE = re.compile(r"(?is)<(script|style)\b.*?</\1\s*>|<!--.*?-->")


def _text(node: Any) -> str:
    """An element's text: whitespace collapsed, `<br>` a line break."""
    raw = node.text(deep=True, separator="") if node.tag != "-text" else node.text_content
    return _collapse(raw)


def _collapse(raw: str) -> str:
    """Whitespace runs as one space; a `<br>` as a line break."""
    return "\n".join(" ".join(line.split()) for line in raw.split(_BREAK)).strip()


def _number_rows(tree: Any, html: str) -> dict[int, int]:
    """Element id → line of its start tag: the tree's elements matched in order to the start
    tags of the source (script, style and comments blanked; implied elements skipped)."""
    source = _HIDDEN_SOURCE.sub(lambda m: "\n" * m.group(0).count("\n"), html)
    starts = [m.start() for m in re.finditer("\n", source)]
    tags = [(m.group(1).lower(), m.start()) for m in re.finditer(r"<([A-Za-z][\w-]*)", source)]
    rows: dict[int, int] = {}
    cursor = 0
    for node in tree.root.traverse():
        if node.tag in _IMPLIED or node.tag.startswith("-"):
            continue
        found = next(
            (k for k in range(cursor, min(cursor + 200, len(tags))) if tags[k][0] == node.tag), None
        )
        if found is not None:
            cursor = found + 1
            rows[node.mem_id] = bisect.bisect_right(starts, tags[found][1]) + 1
    return rows


def _drop_boilerplate(tree: Any) -> None:
    for node in tree.css(_DROP):
        node.decompose()
    for tag in _OUTSIDE_ARTICLE:
        for node in tree.css(tag):
            inside = node.parent
            while inside is not None and inside.tag not in ("article", "main"):
                inside = inside.parent
            if inside is None:
                node.decompose()
    for node in tree.css("[class], [id]"):
        names = f"{node.attributes.get('class') or ''} {node.attributes.get('id') or ''}"
        if node.tag not in ("body", "main", "article", "table") and _BOILERPLATE.search(names):
            node.decompose()
    for node in tree.css("br"):
        node.replace_with(_BREAK)


def _grid(table: Any) -> tuple[list[list[str]], int, list[Any]]:
    """A table's rows with spans resolved, its number of header rows, and its `<tr>`s."""
    rows = [tr for tr in table.css("tr") if _owner(tr) == table.mem_id]
    grid: list[list[str]] = []
    pending: dict[tuple[int, int], str] = {}
    header_rows, body_seen = 0, False
    for r, tr in enumerate(rows):
        cells = [c for c in tr.iter() if c.tag in ("td", "th")]
        row: list[str] = []
        for cell in cells:
            while (r, len(row)) in pending:
                row.append(pending.pop((r, len(row))))
            value = _text(cell)
            span = _span(cell, "colspan")
            for _ in range(span):
                for down in range(1, _span(cell, "rowspan")):
                    pending[(r + down, len(row))] = value
                row.append(value)
        while (r, len(row)) in pending:
            row.append(pending.pop((r, len(row))))
        head = tr.parent is not None and tr.parent.tag == "thead"
        head = head or (cells and all(c.tag == "th" for c in cells))
        if head and not body_seen:
            header_rows += 1
        else:
            body_seen = True
        grid.append(row)
    width = max((len(row) for row in grid), default=0)
    return [[*row, *[""] * (width - len(row))] for row in grid], header_rows, rows


def _span(cell: Any, name: str) -> int:
    value = (cell.attributes.get(name) or "1").strip()
    return min(int(value), 100) if value.isdigit() and int(value) > 0 else 1


def _owner(tr: Any) -> int | None:
    """The id of the table a row belongs to (not of a table around that one)."""
    node = tr.parent
    while node is not None and node.tag != "table":
        node = node.parent
    return node.mem_id if node is not None else None


class _Reader:
    """Walks the cleaned tree into blocks; `rows` gives each element its line."""

    def __init__(self, rows: dict[int, int]) -> None:
        self.rows = rows
        self.stack = HeadingStack()
        self.blocks: list[Block] = []

    def row(self, node: Any) -> int:
        while node is not None and node.mem_id not in self.rows:
            node = node.parent
        return self.rows.get(node.mem_id, 1) if node is not None else 1

    def walk(self, node: Any, depth: int = 0) -> None:
        """The children of `node` in order; a run of inline content is one paragraph."""
        run: list[Any] = []
        for child in node.iter(include_text=True):
            if child.tag in _INLINE:
                run.append(child)
                continue
            self.inline(run, node)
            run = []
            self.element(child, depth)
        self.inline(run, node)

    def inline(self, run: list[Any], parent: Any) -> None:
        text = "".join(
            c.text_content if c.tag == "-text" else c.text(deep=True, separator="") for c in run
        )
        text = _collapse(text)
        if text:
            self.paragraph(text, self.row(run[0] if run[0].tag != "-text" else parent))

    def paragraph(self, text: str, row: int) -> None:
        lines = [line for line in text.split("\n") if line]
        for block in line_blocks(lines, row, None):
            block.kind = "paragraph" if block.kind == "list_item" else block.kind
            self.blocks.append(self.stack.place(block))

    def element(self, node: Any, depth: int) -> None:
        tag = node.tag
        if re.fullmatch(r"h[1-6]", tag):
            if title := " ".join(_text(node).split()):
                self.blocks.append(self.stack.heading(int(tag[1]), title, self.row(node)))
        elif tag in _PARAGRAPH:
            if text := _text(node):
                self.paragraph(text, self.row(node))
        elif tag in ("ul", "ol", "menu"):
            self.walk(node, depth + 1)
        elif tag == "li":
            self.item(node, depth)
        elif tag == "table":
            cells, header_rows, trs = _grid(node)
            if any(any(c for c in row) for row in cells):
                lines = [self.row(tr) for tr in trs]
                block = table_block(cells, header_rows, lines, row=self.row(node))
                self.blocks.append(self.stack.place(block))
        elif tag == "dl":
            self.definitions(node)
        else:
            self.walk(node, depth)

    def item(self, node: Any, depth: int) -> None:
        """A list item's own text (nested lists excluded), then its nested lists."""
        own = [c for c in node.iter(include_text=True) if c.tag not in ("ul", "ol")]
        text = " ".join(
            " ".join((c.text_content if c.tag == "-text" else _text(c)).split()) for c in own
        ).strip()
        if text:
            block = Block("list_item", text, self.row(node), None, max(depth, 1))
            self.blocks.append(self.stack.place(block))
        for nested in (c for c in node.iter() if c.tag in ("ul", "ol")):
            self.walk(nested, depth + 1)

    def definitions(self, node: Any) -> None:
        """One definition block per `<dt>`, its `<dd>`s joined by line breaks."""
        terms: list[tuple[Any, str, list[str]]] = []
        for child in node.css("dt, dd"):
            if child.tag == "dt":
                terms.append((child, " ".join(_text(child).split()), []))
            elif terms:
                terms[-1][2].append(_text(child))
        for dt, term, parts in terms:
            definition = "\n".join(p for p in parts if p)
            text = f"{term}: {definition}" if definition else term
            block = Block("definition", text, self.row(dt), cells=[[term, definition]])
            self.blocks.append(self.stack.place(block))


def html_blocks(html: str) -> list[Block]:
    """An HTML document → blocks in document order; none when it has no text."""
    tree = LexborHTMLParser(html)
    rows = _number_rows(tree, html)
    _drop_boilerplate(tree)
    if tree.body is None:
        return []
    title = tree.css_first("head title")
    reader = _Reader(rows)
    reader.walk(tree.body)
    return _titled(reader.blocks, _text(title) if title else "", reader.row(title))


def _titled(blocks: list[Block], title: str, row: int) -> list[Block]:
    """The page's `<title>` as its level-0 heading, above every block's heading path: the
    document title names the controller on many vendor pages (`Haas Mill Alarm List`). Not
    for a page without text, nor where the first heading repeats the title."""
    title = " ".join(title.split())
    first = next((b.text for b in blocks if b.kind == "heading"), "")
    if not blocks or not title or title.casefold() == first.casefold():
        return blocks
    for block in blocks:
        block.heading_path = [title, *block.heading_path]
    return [Block("heading", title, row, level=0, heading_path=[title]), *blocks]
