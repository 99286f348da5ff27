"""MTConnect agent / adapter logs (SHDR).

MTConnect Standard Part 1, SHDR adapter protocol (also what an agent's raw `.txt` logs hold):
`timestamp|item|value[|item|value...]` for samples and events; a condition on its own line:
`timestamp|item|level|native_code|native_severity|qualifier|message`, level Normal, Warning,
Fault or Unavailable. Items are any name (`logic_cond`, `Ytravel`, `Mazak01:system`); a
`device:` prefix names the device. Native codes are the controller's (decimal or hex).
"""

from __future__ import annotations

import polars as pl

from pipeline.ingest.alarm_logs.fields import events

DESCRIBE = "MTConnect SHDR: time|item|value or time|item|level|code|severity|qualifier|text"
# A line of an SHDR log: samples and events as much as conditions.
SHDR_TIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?\|"
_LEVELS = {"warning": "raised", "fault": "raised", "normal": "cleared"}


def parse(lines: pl.DataFrame) -> pl.DataFrame:
    """Warning / Fault / Normal conditions are events; samples, `Unavailable` and blank lines
    are skipped; `device` is the item's device prefix."""
    parts = pl.col("raw").str.strip_chars_end().str.split("|")
    field = lambda i: parts.list.get(i, null_on_oob=True).str.strip_chars()  # noqa: E731
    level = field(2).str.to_lowercase()
    is_condition = (parts.list.len() >= 7) & level.is_in(
        ["normal", "warning", "fault", "unavailable"]
    )
    item = field(1).str.extract_groups(r"^(?:(?P<device>[^:]+):)?(?P<item>.*)$")
    message = parts.list.slice(6).list.join("|")
    sample = pl.col("raw").str.contains(SHDR_TIME) & (parts.list.len() > 2)
    blank = pl.col("raw").str.strip_chars() == ""
    parsed = events(
        lines,
        pl.when(is_condition & (level != "unavailable"))
        .then(pl.lit("alarm"))
        .when(is_condition | blank | sample)
        .then(pl.lit("skip"))
        .otherwise(pl.lit("malformed")),
        pl.when(field(3) != "").then(field(3)),
        level.replace_strict(_LEVELS, default=None),
        message,
        field(0).str.strip_suffix("Z").str.to_datetime(
            "%Y-%m-%dT%H:%M:%S%.f", time_unit="us", strict=False
        ),
        DESCRIBE,
        level=field(2),
        channel=item.struct.field("item"),
    )  # fmt: skip
    return parsed.with_columns(device=pl.when(is_condition).then(item.struct.field("device")))
