"""Mitsubishi M70/M80 alarm history.

Mitsubishi M70/M80 (M800/M80 series instruction manual, Diagnosis > Alarm history): per
entry the date and time, the alarm class (S01-S53 servo, M01 operation error, Y, Z, P, T, L,
EMG), the message, the 4-digit detail number (hex) and the axis name, newest first.
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

DESCRIBE = "Mitsubishi alarm history: [No.] date time class message [detail] [axis]"
_ENTRY = (
    rf"^\s*(?:{SEQ})?(?P<date>{DATE})\s+(?P<time>{TIME})\s+"
    r"(?P<cls>[SMYZPTLU]\d{2}|EMG)\b\s*(?P<message>.*?)"
    r"(?:\s+(?P<detail>[0-9A-F]{4}))?(?:\s+(?P<axis>[A-Z]{1,2}\d?))?\s*$"
)


def parse(lines: pl.DataFrame) -> pl.DataFrame:
    """One event a line; the code is `class-detail` (or the class), the axis ends the text."""
    g = pl.col("raw").str.extract_groups(_ENTRY)
    cls, detail = g.struct.field("cls"), g.struct.field("detail")
    code = (
        pl.when(detail.is_not_null()).then(pl.concat_str(cls, pl.lit("-"), detail)).otherwise(cls)
    )
    axis = g.struct.field("axis")
    with_axis = pl.when(axis.is_not_null()).then(pl.lit(" ") + axis)
    message = pl.concat_str(g.struct.field("message"), with_axis, ignore_nulls=True)
    return events(
        lines,
        line_kind(cls.is_not_null(), DATED_RECORD),
        code,
        pl.lit("raised"),
        message,
        parse_datetime(g.struct.field("date"), g.struct.field("time")),
        DESCRIBE,
    )
