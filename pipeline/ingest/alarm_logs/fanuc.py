"""FANUC alarm history.

FANUC Series 0i-F / 0i-MF Plus / 30i operator's manuals, "Alarm history screen" and its
output to a memory card: per entry the date and time of occurrence, the alarm number with its
type prefix (SV0401, OT0500, PS0010; old-style 3-4 digit numbers), and the message; newest
first. The 30i screen puts date/time on one line and number/message on the next. Tape output
is framed by `%` lines. Messages are in the display language (GBK Chinese on Chinese panels).
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

DESCRIBE = "FANUC alarm history: [No.] date time code message (or date line, code line)"
_CODE = r"[A-Z]{2}\s?\d{3,4}|\d{3,4}"
_ONE_LINE = (
    rf"^\s*(?:{SEQ})?(?P<date>{DATE})\s+(?P<time>{TIME})\s+(?P<code>{_CODE})"
    r"(?:\s+(?P<message>\S.*?))?\s*$"
)
_DATE_LINE = rf"^\s*(?:{SEQ})?(?P<date>{DATE})\s+(?P<time>{TIME})\s*$"
_CODE_LINE = r"^\s*(?P<code>[A-Z]{2}\s?\d{3,4})(?:\s+(?P<message>\S.*?))?\s*$"


def parse(lines: pl.DataFrame) -> pl.DataFrame:
    """One event per one-line entry or per date line followed by its code line."""
    one = pl.col("raw").str.extract_groups(_ONE_LINE)
    head = pl.col("raw").str.extract_groups(_DATE_LINE)
    nxt = pl.col("raw").shift(-1).str.extract_groups(_CODE_LINE)
    two = head.struct.field("date").is_not_null() & nxt.struct.field("code").is_not_null()
    previous_two = two.shift(1, fill_value=False)

    def field(name: str) -> pl.Expr:
        split = (head if name in {"date", "time"} else nxt).struct.field(name)
        return pl.coalesce(one.struct.field(name), pl.when(two).then(split))

    return events(
        lines,
        line_kind(field("code").is_not_null(), DATED_RECORD, previous_two),
        field("code"),
        pl.lit("raised"),
        field("message"),
        parse_datetime(field("date"), field("time")),
        DESCRIBE,
    )
