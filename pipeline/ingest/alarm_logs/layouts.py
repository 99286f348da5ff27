"""The alarm-log layouts, their parsers, and the layout of a file by its content.

Layouts (what each export looks like is described in its module):

- `fanuc`: FANUC 0i-F / 0i-MF / 30i alarm history, one line per alarm or the screen's two-line
  form (date line, then code line), newest first, `%` tape delimiters and header lines skipped.
- `sinumerik`: SINUMERIK Operate alarm logs: one event a line (`;`, tab or space separated;
  date first or number first), or one alarm a row with came / went / acknowledged time columns
  (`;`/tab separated or fixed columns under a header), in English, German or Chinese.
- `mtconnect`: MTConnect agent / adapter logs (SHDR): conditions of any data item, any device.
- `mitsubishi`: Mitsubishi M70/M80 alarm history: class (S02, M01, ...) message detail [axis].
- `haas`: Haas alarm history: date time number text, or number text date time.
- `fanuc_robot`: FANUC robot controller (R-30iA/iB) error logs, ERRALL.LS / ERRACT.LS style:
  number, date and time, code (SRVO-050), message, cause, severity; `R E S E T` lines.

A parser takes a file's lines (`fields.lines_frame`) and returns `fields.events` rows, each
line's `kind` one of alarm, malformed or skip. `parse_lines` runs one and reads the report
header of any layout: the title lines, blank lines and `key: value` lines (Machine:,
Exported:, Operator:) above the first alarm line, within the first `HEADER_LINES` lines, are
skipped (counted as non-alarm lines), never malformed unless they begin like an entry (with a
digit); detection counts only the lines below that header.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import polars as pl

from pipeline.ingest.alarm_logs import fanuc, fanuc_robot, haas, mitsubishi, mtconnect, sinumerik
from pipeline.ingest.alarm_logs.fields import lines_frame

PARSERS: dict[str, Callable[[pl.DataFrame], pl.DataFrame]] = {
    "fanuc": fanuc.parse,
    "sinumerik": sinumerik.parse,
    "mtconnect": mtconnect.parse,
    "mitsubishi": mitsubishi.parse,
    "haas": haas.parse,
    "fanuc_robot": fanuc_robot.parse,
}
LAYOUTS = tuple(PARSERS)
HEADER_LINES = 30  # lines searched for the first alarm line below a report header (as work orders)


def header_end(parsed: pl.DataFrame) -> int:
    """The number of report-header lines: those above the first alarm line when it lies within
    the first `HEADER_LINES` lines, else 0."""
    first = parsed.filter(pl.col("kind") == "alarm")["source_row"].min()
    return int(first) - 1 if first is not None and first <= HEADER_LINES else 0  # type: ignore[operator]


def parse_lines(layout: str, frame: pl.DataFrame) -> pl.DataFrame:
    """`layout`'s parse of a file's lines, its report header skipped: a line above the first
    alarm line that does not begin with a digit is a title, key or column-header line."""
    parsed = PARSERS[layout](frame)
    header = header_end(parsed)
    title = (pl.col("source_row") <= header) & ~pl.col("raw").str.contains(r"^\s*\d")
    return parsed.with_columns(
        kind=pl.when(title & (pl.col("kind") == "malformed"))
        .then(pl.lit("skip"))
        .otherwise(pl.col("kind"))
    )


def detect_layout(lines: list[str], name: str = "") -> str | None:
    """The layout whose parser recognizes the most of `lines` (a file's first lines), or None
    when none recognizes a fifth of the non-blank lines below its report header. A
    FANUC-shaped history with bare numbers is Haas when the file or its name says Haas."""
    frame = lines_frame(lines)
    if not any(line.strip() for line in lines):
        return None
    scores, shares = {}, {}
    for layout, parse in PARSERS.items():
        parsed = parse(frame)
        alarms = parsed.filter(pl.col("kind") == "alarm")["source_row"].n_unique()
        if layout == "mtconnect":  # samples and events are part of the layout
            alarms = frame.filter(pl.col("raw").str.contains(mtconnect.SHDR_TIME)).height
        content = sum(1 for line in lines[header_end(parsed) :] if line.strip())
        scores[layout], shares[layout] = alarms, alarms * 5 >= content
    best = max(scores, key=lambda k: (scores[k], k != "haas"))
    haas_named = re.search(r"(?i)haas|哈斯", name + "\n" + "\n".join(lines[:20])) is not None
    if scores["haas"] and haas_named and scores["haas"] >= scores[best]:
        best = "haas"
    return best if scores[best] and shares[best] else None
