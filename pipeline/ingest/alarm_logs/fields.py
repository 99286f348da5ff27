"""What every alarm-log layout parser shares: date and time patterns, dates in any common
order, a file's lines as a frame, and the columns each parser returns."""

from __future__ import annotations

import polars as pl

DATE = r"\d{4}[/.\-]\d{1,2}[/.\-]\d{1,2}|\d{1,2}[/.\-]\d{1,2}[/.\-]\d{2,4}"
TIME = r"\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,6})?"
SEQ = r"(?:(?i:no\.?)\s*)?\d{1,5}\s+"  # the running number of a history screen
# A line that starts like a dated history entry (after an optional running number).
DATED_RECORD = rf"^\s*(?:{SEQ})?\d{{1,4}}[/.\-]\d"


def parse_datetime(date: pl.Expr, time: pl.Expr) -> pl.Expr:
    """A date in any common order and a time -> datetime; null when it does not exist.

    `2024/03/18`, `2024-03-18`: year first. `16.08.2024`, `16.08.24`: day first (dotted, as
    German and Chinese SINUMERIK exports write it). `08/16/2024`: month first unless the first
    number exceeds 12. `24/08/16`: two-digit year first (Japanese controllers)."""
    g = date.str.strip_chars().str.extract_groups(r"^(\d+)[/.\-](\d+)[/.\-](\d+)$")
    a, b, c = (g.struct.field(str(i)) for i in (1, 2, 3))
    dotted = date.str.contains(r"\.")
    y, m, d = (
        pl.when(a.str.len_chars() == 4)
        .then(field)
        .when(dotted)
        .then(dotted_field)
        .when(c.str.len_chars() == 4)
        .then(us_field)
        .otherwise(ymd_field)
        for field, dotted_field, us_field, ymd_field in (
            (a, c, c, a),
            (b, b, pl.when(a.cast(pl.Int32, strict=False) > 12).then(b).otherwise(a), b),
            (c, a, pl.when(a.cast(pl.Int32, strict=False) > 12).then(a).otherwise(b), c),
        )
    )
    y = pl.when(y.str.len_chars() == 2).then(pl.concat_str(pl.lit("20"), y)).otherwise(y)
    text = pl.concat_str(
        y, pl.lit("-"), m.str.zfill(2), pl.lit("-"), d.str.zfill(2), pl.lit(" "),
        time.str.replace(",", "."),
    )  # fmt: skip
    return text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False)


def split_datetime(cell: pl.Expr) -> pl.Expr:
    """A `date time` cell (space or T between) -> datetime; null when empty or invalid."""
    g = cell.str.extract_groups(rf"^\s*(?P<d>{DATE})[\sT]+(?P<t>{TIME})\s*$")
    return parse_datetime(g.struct.field("d"), g.struct.field("t"))


def lines_frame(lines: list[str]) -> pl.DataFrame:
    """A file's physical lines as `source_row` (1-based) and `raw`."""
    return pl.DataFrame(
        {"source_row": pl.int_range(1, len(lines) + 1, eager=True, dtype=pl.Int64), "raw": lines},
        schema={"source_row": pl.Int64, "raw": pl.String},
    )


def events(
    lines: pl.DataFrame,
    kind: pl.Expr,
    code: pl.Expr,
    event: pl.Expr,
    message: pl.Expr,
    occurred_at: pl.Expr,
    describe: str,
    level: pl.Expr | None = None,
    channel: pl.Expr | None = None,
) -> pl.DataFrame:
    """The columns every parser returns, one row per line (or per event of a line);
    `describe` is the layout's one-line description, which a malformed line's reject names."""
    null = pl.lit(None, dtype=pl.String)
    return lines.select(
        "source_row",
        "raw",
        kind.alias("kind"),
        code.alias("native_code"),
        event.alias("event"),
        (level if level is not None else null).alias("level"),
        (channel if channel is not None else null).alias("channel"),
        pl.when(message.str.strip_chars() != "").then(message.str.strip_chars()).alias("message"),
        occurred_at.alias("occurred_at"),
        pl.lit(None, dtype=pl.String).alias("device"),
        pl.lit(describe).alias("_layout"),
    )


def line_kind(parsed: pl.Expr, record: str, continuation: pl.Expr | None = None) -> pl.Expr:
    """alarm (parsed), malformed (looks like a record, does not parse) or skip."""
    skip = pl.lit(False) if continuation is None else continuation
    return (
        pl.when(parsed)
        .then(pl.lit("alarm"))
        .when(~skip & pl.col("raw").str.contains(record))
        .then(pl.lit("malformed"))
        .otherwise(pl.lit("skip"))
    )
