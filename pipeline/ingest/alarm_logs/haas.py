"""Haas alarm history.

Haas (Next Generation Control operator's manual, Alarms > Alarm History tab, saved as text):
alarm number (with an optional `.` sub-number), text, date and time of each alarm; some saved
lists put date and time first.
"""

from __future__ import annotations

import polars as pl

from pipeline.ingest.alarm_logs.fields import (
    DATE,
    DATED_RECORD,
    SEQ,
    TIME,
    events,
    line_kind,
    parse_datetime,
)

DESCRIBE = "Haas alarm history: date time number text, or number text date time"
_CODE = r"(?:(?i:alarm)\s*)?(?P<code>\d{3,5}(?:\.\d{1,3})?)"
_ENTRIES = (
    rf"^\s*(?:{SEQ})?(?P<date>{DATE})\s+(?P<time>{TIME})\s+{_CODE}\s+(?P<message>\S.*?)\s*$",
    rf"^\s*{_CODE}\s+(?P<message>\S.*?)\s+(?P<date>{DATE})\s+(?P<time>{TIME})\s*$",
)


def parse(lines: pl.DataFrame) -> pl.DataFrame:
    """One event a line, date first or number first."""
    groups = [pl.col("raw").str.extract_groups(p) for p in _ENTRIES]
    field = lambda name: pl.coalesce(*(g.struct.field(name) for g in groups))  # noqa: E731
    record = rf"{DATED_RECORD}|^\s*\d{{3,5}}(?:\.\d+)?\s+\S.*\d:\d\d"
    return events(
        lines,
        line_kind(field("code").is_not_null(), record),
        field("code"),
        pl.lit("raised"),
        field("message"),
        parse_datetime(field("date"), field("time")),
        DESCRIBE,
    )
