"""MTConnect agent / adapter logs (SHDR).

MTConnect Standard Part 1, SHDR adapter protocol (also what an agent's raw `.txt` logs hold):
`timestamp|item|value[|item|value...]` for samples and events; a condition on its own line:
`timestamp|item|level|native_code|native_severity|qualifier|message`, level Normal, Warning,
Fault or Unavailable. Items are any name (`logic_cond`, `Ytravel`, `Mazak01:system`); a
`device:` prefix names the device. Native codes are the controller's (decimal or hex).

A condition is state, not an event log: a Warning or Fault makes its native code active on its
item; `Normal` with a code clears that code, `Normal` without one clears every active code of
the item; `Unavailable` (the adapter lost the controller, and reconnects) says nothing about
what is active. So a `Normal` is a clear only when a code of its item is active: the `Normal`
lines an adapter writes for every item on connecting, after an `Unavailable`, and the routine
ones while nothing is active are state reports, skipped and counted with the non-alarm lines.
An alarm active before an `Unavailable` gap stays active across it.

MTConnect is the transport, not the controller: the codes are filed under the controller family
that `device_family` finds for the device (configured, else named by the device or its log).
"""

from __future__ import annotations

import polars as pl

from pipeline.ingest.alarm_logs.fields import events
from pipeline.text.alarm_codes import controller_family

DESCRIBE = "MTConnect SHDR: time|item|value or time|item|level|code|severity|qualifier|text"
TRANSPORT = "MTCONNECT"
# A line of an SHDR log: samples and events as much as conditions.
SHDR_TIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?\|"
_LEVELS = {"warning": "raised", "fault": "raised", "normal": "cleared"}


def parse(lines: pl.DataFrame) -> pl.DataFrame:
    """Warning / Fault conditions and the `Normal` lines that clear one are events; samples,
    `Unavailable`, routine `Normal` lines and blank lines are skipped; `device` is the item's
    device prefix."""
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
    condition = lines.with_columns(
        _item=pl.when(is_condition).then(field(1)),
        _level=pl.when(is_condition).then(level),
        _code=field(3).fill_null(""),
    )
    state_report = is_condition & (level == "normal") & ~pl.lit(_clears(condition))
    parsed = events(
        lines,
        pl.when(is_condition & (level != "unavailable") & ~state_report)
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


def _clears(condition: pl.DataFrame) -> pl.Series:
    """Per line: a `Normal` that clears an active code of its item (in line order).

    Each item's lines split into spans ended by a `Normal` without a code that does not follow
    an `Unavailable` (such a `Normal` resets everything; one right after `Unavailable` is the
    adapter reconnecting). A coded `Normal` clears when the code's previous line in its span
    raised it; a span-ending `Normal` clears when some code's last line in the span raised it.
    """
    raised = pl.col("_level").is_in(["warning", "fault"])
    codeless = (pl.col("_level") == "normal") & (pl.col("_code") == "")
    ends = codeless & (pl.col("_level").shift(1).over("_item") != "unavailable").fill_null(True)
    lines = (
        condition.select("source_row", "_item", "_level", "_code")
        .with_row_index("_i")
        .filter(pl.col("_item").is_not_null())
        .with_columns(_ends=ends)
        .with_columns(_n=pl.col("_ends").cast(pl.UInt32))
        .with_columns(_span=pl.col("_n").cum_sum().over("_item") - pl.col("_n"))
    )
    coded = lines.filter(raised | ((pl.col("_level") == "normal") & (pl.col("_code") != "")))
    span = ["_item", "_span"]
    by_code = coded.with_columns(
        _clear=(pl.col("_level") == "normal")
        & raised.shift(1).over(*span, "_code").fill_null(False),
        _active=raised.last().over(*span, "_code"),
    )
    active = by_code.group_by(span).agg(pl.col("_active").any())
    span_ends = lines.filter("_ends").join(active, on=span, how="left")
    found = pl.concat(
        [
            by_code.select("_i", "_clear"),
            span_ends.select("_i", pl.col("_active").fill_null(False).alias("_clear")),
        ]
    )
    flags = condition.with_row_index("_i").select("_i").join(found, on="_i", how="left")
    return flags.sort("_i")["_clear"].fill_null(False)


def device_family(
    machine: str | None, devices: list[str], header: list[str], controllers: dict[str, str]
) -> tuple[str, str | None]:
    """The controller family of an MTConnect log's codes, and a warning when only the transport
    is known: the family `controllers` (machine glob -> family or model) gives the machine,
    else the one its machine, device names and header lines name (`Mazak01` -> MAZAK,
    `Okuma-MB5000` -> OKUMA), else MTCONNECT."""
    family = controller_family(machine, [machine or "", *devices, *header], controllers)
    if family:
        return family, None
    return TRANSPORT, (
        f"machine {machine or '(none)'}: MTConnect names no controller for the device; its codes "
        f"are filed as {TRANSPORT}:<code> (set normalize.asset_controllers, e.g. "
        f"{{'{machine or '*'}' = 'MAZAK'}}, or the source's family)"
    )
