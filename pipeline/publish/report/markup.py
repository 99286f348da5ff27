"""The report's HTML building blocks: tables, definition lists, sections; every text escaped."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape


class Raw(str):
    """HTML already built and escaped: a table cell that is not escaped again."""


Cell = int | float | str


def table(head: Sequence[str], rows: Iterable[Sequence[Cell]]) -> str:
    """A table: numbers right-aligned with thousands separators, other cells escaped."""
    out = ["<table><tr>", *(f"<th>{escape(h)}</th>" for h in head), "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(_td(v) for v in row) + "</tr>")
    return "".join(out) + "</table>"


def _td(v: Cell) -> str:
    if isinstance(v, Raw):
        return f"<td>{v}</td>"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return f"<td>{escape(str(v))}</td>"
    return f'<td class="n">{v:,}</td>'


def dl(items: Iterable[tuple[str, object]]) -> str:
    """A definition list of (name, value) pairs."""
    return (
        "<dl>"
        + "".join(f"<dt>{escape(str(k))}</dt><dd>{escape(str(v))}</dd>" for k, v in items)
        + "</dl>"
    )


def section(key: str, title: str, body: str) -> str:
    """A titled section the page can be navigated (and tested) by: `<section id=key>`."""
    return f'<section id="{key}"><h2>{escape(title)}</h2>{body}</section>'


def muted(text: str) -> str:
    """A greyed-out paragraph: what a section shows when it has nothing to show."""
    return f'<p class="muted">{text}</p>'


def pct(part: int, whole: int) -> str:
    """`part` as a share of `whole` (`n/a` of nothing)."""
    return f"{part / whole:.1%}" if whole else "n/a"
