"""SINUMERIK Operate alarm logs.

SINUMERIK Operate, Diagnostics > Alarm log, saved as text: per event the time stamp, the
state (came / went / acknowledged; Kommen / Gehen / Quittieren; 出现 / 消失 / 确认), the alarm
number (4-6 digits), optionally its source (NCK, PLC, HMI, DRIVE) and the alarm text, either
`;`-separated (`16.08.2024 09:12:44.020;出现;27001;...`) or in columns; some exports start
with the number. The other variant lists one alarm a row, with its came, went and
acknowledged times in columns named in a header line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from pipeline.ingest.alarm_logs.fields import (
    DATE,
    TIME,
    events,
    line_kind,
    parse_datetime,
    split_datetime,
)

DESCRIBE = "SINUMERIK alarm log: date time came|went|acknowledged number [source] text"
_STATE_WORDS: dict[str, tuple[str, ...]] = {
    "raised": ("came", "coming", "come", "kommt", "kommen", "gekommen", "出现", "产生", "发生"),
    "cleared": ("went", "going", "gone", "geht", "gehen", "gegangen", "消失", "清除", "解除"),
    "acknowledged": (
        "acknowledged", "acknowledge", "ack", "quittiert", "quittieren", "quittung", "确认",
        "已确认", "应答",
    ),
}  # fmt: skip
_STATE = {word: event for event, words in _STATE_WORDS.items() for word in words}
_STATES = "|".join(sorted(_STATE, key=len, reverse=True))
_SEP = r"(?:\s*[;\t|]\s*|\s+)"
_SOURCE = r"NCK|PLC|HMI|DRIVE|DRV|SINAMICS"
_TAIL = rf"(?:{_SEP}(?P<source>(?i:{_SOURCE}))\b)?(?:{_SEP}(?P<message>[^;\s].*?))?[\s;]*$"
_STAMP = rf"(?P<date>{DATE})(?:\s*;\s*|[\sT]+)(?P<time>{TIME})"
_EVENT_LINES = (
    rf"^\s*{_STAMP}{_SEP}(?P<event>(?i:{_STATES})){_SEP}(?P<code>\d{{4,6}})\b{_TAIL}",
    rf"^\s*(?P<code>\d{{4,6}}){_SEP}{_STAMP}{_SEP}(?P<event>(?i:{_STATES})){_TAIL}",
    rf"^\s*(?P<event>(?i:{_STATES})){_SEP}{_STAMP}{_SEP}(?P<code>\d{{4,6}})\b{_TAIL}",
)
_RECORD = rf"^\s*(?:\d{{4,6}}{_SEP})?(?:{DATE})[\sT;]"


def parse(lines: pl.DataFrame) -> pl.DataFrame:
    """A came/went/acknowledged table when the head of the file has its header, else one
    event a line."""
    table = _find_table(lines["raw"].head(60).to_list())
    return _parse_events(lines) if table is None else _parse_table(lines, table)


def _parse_events(lines: pl.DataFrame) -> pl.DataFrame:
    groups = [pl.col("raw").str.extract_groups(p) for p in _EVENT_LINES]
    field = lambda name: pl.coalesce(*(g.struct.field(name) for g in groups))  # noqa: E731
    return events(
        lines,
        line_kind(field("code").is_not_null(), _RECORD),
        field("code"),
        field("event").str.to_lowercase().replace_strict(_STATE, default=None),
        field("message"),
        parse_datetime(field("date"), field("time")),
        DESCRIBE,
        level=field("source").str.to_uppercase(),
    )


# --- one alarm a row, came / went / acknowledged times in columns ----------------------------
_HEADER_WORDS: dict[str, tuple[str, ...]] = {
    "code": (
        "alarm", "alarm no", "alarm number", "alarm nr", "number", "no", "nr", "alarmnummer",
        "alarm-nr", "nummer", "报警号", "报警编号", "报警", "编号", "号码",
    ),
    "raised": (*_STATE_WORDS["raised"], "came time", "time came", "kommen zeit", "出现时间"),
    "cleared": (*_STATE_WORDS["cleared"], "went time", "time went", "gehen zeit", "消失时间"),
    "acknowledged": (*_STATE_WORDS["acknowledged"], "ack time", "确认时间"),
    "message": (
        "text", "message", "alarm text", "alarmtext", "meldung", "meldetext", "description",
        "文本", "报警文本", "信息", "报警信息", "描述", "内容",
    ),
    "source": ("source", "quelle", "来源", "type", "typ"),
}  # fmt: skip
_HEADER_NAME = {w: col for col, words in _HEADER_WORDS.items() for w in words}
# Wide (CJK) characters take two columns in a fixed-column export: a NUL after each keeps
# character positions equal to display columns.
_WIDE = "([\u4e00-\u9fff\u3040-\u30ff\u3000-\u303f\uff01-\uff60])"
_TABLE_EVENTS = ("raised", "cleared", "acknowledged")


@dataclass(frozen=True)
class _Table:
    """Columns of a came/went/acknowledged table: header line, separator, cells by name."""

    header_row: int
    delimiter: str | None  # None: fixed columns
    columns: dict[str, tuple[int, int | None]]  # name -> field index (delimited) or span


def _header_name(cell: str) -> str | None:
    key = re.sub(r"[\s_.:：#()（）\[\]]+", " ", cell.replace("\x00", "").lower()).strip()
    return _HEADER_NAME.get(key)


def _find_table(lines: list[str]) -> _Table | None:
    """A header naming an alarm-number column and at least two of came/went/acknowledged."""
    for row, line in enumerate(lines[:60], start=1):
        delimiter = next((d for d in (";", "\t") if d in line), None)
        if delimiter:
            cells = [(c, i) for i, c in enumerate(line.split(delimiter))]
        else:
            shown = re.sub(_WIDE, "\\1\x00", line)
            cells = [(m.group(), m.start()) for m in re.finditer(r"\S+(?: \S+)*", shown)]
        named = {}
        for k, (cell, pos) in enumerate(cells):
            name = _header_name(cell)
            if name and name not in named:
                end = None if delimiter or k + 1 == len(cells) else cells[k + 1][1]
                named[name] = (pos, end if not delimiter else pos)
        states = {"raised", "cleared", "acknowledged"} & named.keys()
        if "code" in named and len(states) >= 2:
            if not delimiter:  # a cell starts where its header starts, ends at the next header
                starts = sorted(p for p, _ in named.values())
                named = {
                    n: (p, next((s for s in starts if s > p), None)) for n, (p, _) in named.items()
                }
            return _Table(row, delimiter, named)
    return None


def _cell_reader(table: _Table) -> Callable[[str], pl.Expr]:
    """The text of a named column in each line (null when the table has no such column)."""
    if table.delimiter:
        parts = pl.col("raw").str.split(table.delimiter)

        def cell(name: str) -> pl.Expr:
            if name not in table.columns:
                return pl.lit(None, dtype=pl.String)
            return parts.list.get(table.columns[name][0], null_on_oob=True).str.strip_chars()

    else:
        shown = pl.col("raw").str.replace_all(_WIDE, "$1\x00")

        def cell(name: str) -> pl.Expr:
            if name not in table.columns:
                return pl.lit(None, dtype=pl.String)
            start, end = table.columns[name]
            text = shown.str.slice(start, None if end is None else end - start)
            return text.str.replace_all("\x00", "", literal=True)

    return cell


def _parse_table(lines: pl.DataFrame, table: _Table) -> pl.DataFrame:
    """Up to three events a row (one per filled time column); a line is alarm, malformed or
    skip once: its events are kept, or else one row for it."""
    cell = _cell_reader(table)
    code = cell("code").str.strip_chars().str.extract(r"^(\d{4,6})$")
    frames = [
        _table_events(lines, table, cell, code, event)
        for event in _TABLE_EVENTS
        if event in table.columns
    ]
    parsed = pl.concat(frames)
    is_alarm = (pl.col("kind") == "alarm").any().over("source_row")
    first = pl.int_range(pl.len()).over("source_row") == 0
    return parsed.filter((pl.col("kind") == "alarm") | (~is_alarm & first)).sort(
        "source_row", maintain_order=True
    )


def _table_events(
    lines: pl.DataFrame,
    table: _Table,
    cell: Callable[[str], pl.Expr],
    code: pl.Expr,
    event: str,
) -> pl.DataFrame:
    """The `event` (raised, cleared or acknowledged) of each row below the header: an alarm
    where the row has a number (and, but for `raised`, a time); a row without a number is
    malformed once, in the `raised` pass, unless it is a ruler."""
    stamp = cell(event).str.strip_chars()
    has_stamp = stamp.fill_null("") != ""
    after_header = pl.col("source_row") > table.header_row
    row = after_header & code.is_not_null()
    first_event = event == "raised"
    kind = (
        pl.when(row & (has_stamp if not first_event else pl.lit(True)))
        .then(pl.lit("alarm"))
        .when(after_header & ~pl.col("raw").str.contains(r"^[\s\-=_;|]*$") & first_event)
        .then(pl.lit("malformed"))
        .otherwise(pl.lit("skip"))
    )
    return events(
        lines,
        kind,
        code,
        pl.lit(event),
        cell("message").str.replace_all(r"\s+", " "),
        split_datetime(stamp.fill_null("")),
        DESCRIBE,
        level=cell("source").str.strip_chars().str.to_uppercase(),
    )
