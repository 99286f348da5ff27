"""FANUC robot controller error logs (R-30iA / R-30iB / R-30iB Plus).

The controller's MD: device holds its alarm history as text reports, ERRALL.LS (all), ERRACT.LS
(active), ERRHIST.LS / ERRCURR.LS and the per-group ERRMOT.LS, ERRSYS.LS, ...: a title line
(`ERRALL.LS   Robot Name ROBOT1 24-MAR-18 10:30:15`), then one alarm a line, newest first:
the running number, the date and time (`DD-MON-YY hh:mm:ss`), the alarm code (facility
mnemonic and number: SRVO-050, MOTN-017, INTP-105, SYST-026, PWD -067) with its message,
the cause code and message when there is one (MCTL-014 ...), and the severity (WARN,
PAUSE.L/G, STOP.L/G, SERVO, SERVO2, ABORT.L/G, SYSTEM, NONE) with the state bits. The fields
are framed by `"` (`73447" 27-JUL-18 10:07:30 " SRVO-053 ... " " WARN   00000000"    "`, or
each quoted); the alarm-history screen saved as text has the same fields in columns. A line
`R E S E T` is the operator's reset, which clears the active alarms: an event `cleared`
without a code.
"""

from __future__ import annotations

import polars as pl

from pipeline.ingest.alarm_logs.fields import DATE, TIME, events, line_kind, parse_datetime

DESCRIBE = 'FANUC robot error log: No. "date time" "CODE-nnn message" ["cause"] "severity"'
_MONTH_DATE = r"\d{1,2}-[A-Za-z]{3}-\d{2,4}"
_HEAD = (
    rf'^\s*(?P<seq>\d{{1,6}})\s*"?\s*(?P<date>{_MONTH_DATE}|{DATE})\s+(?P<time>{TIME})\s*"?'
    r"(?P<rest>.*)$"
)
_CODE = r"[A-Z]{2,5}\s?-\s?\d{3,4}"
_SEVERITY = (
    r"WARN|PAUSE\.[GL]|PAUSE|STOP\.[GL]|STOP|SERVO2?|ABORT\.[GL]|ABORT|SYSTEM|NONE|FAULT|RESET"
)
# The alarm field: code and message; in columns (no quotes) the severity and state bits end it.
_ALARM = (
    rf"^(?P<code>{_CODE})(?:\s+(?P<text>.*?))??(?:\s{{2,}}(?P<severity>{_SEVERITY})"
    r"(?:\s+[0-9A-F]{8})?)?\s*$"
)
_RECORD = rf'^\s*\d{{1,6}}\s*"?\s*(?:{_MONTH_DATE}|\d{{1,4}}[/.\-]\d)'


def _datetime(date: pl.Expr, time: pl.Expr) -> pl.Expr:
    """`27-JUL-18` or `27-Jul-2018` (any case) and a time -> datetime; numeric dates as
    `fields.parse_datetime`; null when the date does not exist."""
    four_digit = date.str.replace(r"^(\d{1,2}-[A-Za-z]{3})-(\d{2})$", "${1}-20${2}")
    named = pl.concat_str(four_digit, pl.lit(" "), time.str.replace(",", ".")).str.to_datetime(
        "%d-%b-%Y %H:%M:%S%.f", time_unit="us", strict=False
    )
    return pl.coalesce(named, parse_datetime(date, time))


def parse(lines: pl.DataFrame) -> pl.DataFrame:
    """One event a line: the alarm raised, or `cleared` (no code) for a reset."""
    head = pl.col("raw").str.extract_groups(_HEAD)
    pieces = (
        head.struct.field("rest")
        .str.split('"')
        .list.eval(pl.element().str.strip_chars())
        .list.eval(pl.element().filter(pl.element() != ""))
    )
    first = pieces.list.get(0, null_on_oob=True)
    later = pieces.list.slice(1)
    alarm = first.str.extract_groups(_ALARM)
    severity = pl.coalesce(
        later.list.eval(pl.element().str.extract(rf"^({_SEVERITY})\b"))
        .list.drop_nulls()
        .list.first(),
        alarm.struct.field("severity"),
    )
    cause = later.list.eval(pl.element().filter(pl.element().str.contains(rf"^{_CODE}\b")))
    reset = (first.str.replace_all(r"\s", "").str.to_uppercase() == "RESET") | (
        (severity == "RESET") & alarm.struct.field("code").is_null()
    )
    code = pl.when(~reset).then(alarm.struct.field("code"))
    causes = pl.when(cause.list.len() > 0).then(cause.list.join("; "))
    message = (
        pl.when(reset)
        .then(pl.lit("RESET"))
        .otherwise(
            pl.concat_str(alarm.struct.field("text"), causes, separator="; ", ignore_nulls=True)
        )
    )
    return events(
        lines,
        line_kind(head.struct.field("date").is_not_null() & (code.is_not_null() | reset), _RECORD),
        code,
        pl.when(reset).then(pl.lit("cleared")).otherwise(pl.lit("raised")),
        message,
        _datetime(head.struct.field("date"), head.struct.field("time")),
        DESCRIBE,
        level=pl.when(reset).then(pl.lit("RESET")).otherwise(severity),
    )
