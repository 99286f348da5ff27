"""MTConnect SHDR logs: which `Normal` lines clear an alarm, and the controller family of the
device's codes. Logs hand-written in the SHDR layout of MTConnect Part 1 (conditions
`time|item|level|native_code|native_severity|qualifier|text`), with the idle-item `Normal`
reports and the `Unavailable` / `Normal` pairs an adapter writes when it reconnects."""

from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.alarm_logs.reader import read_alarm_log_file
from schemas.alarm_logs import AlarmLogSource

REPO = Path(__file__).resolve().parents[4]
NIST_LOG = REPO.parent / "shared/external/nist-smstestbed-mtconnect/Mazak01-20180220-20180221.txt"

RECONNECTS = """\
2024-05-06T13:00:00.000Z|avail|AVAILABLE
2024-05-06T13:00:00.000Z|logic_cond|Normal||||
2024-05-06T13:00:00.000Z|servo_cond|Normal||||
2024-05-06T13:00:02.125Z|Xload|14|Sload|22
2024-05-06T13:05:10.500Z|logic_cond|Warning|212|||MAGAZINE DRUM MALFUNCTION
2024-05-06T13:05:11.750Z|logic_cond|Warning|1253|||MOVE INH.(ATC ARM)
2024-05-06T13:05:20.000Z|servo_cond|Normal||||
2024-05-06T13:05:30.000Z|logic_cond|Normal|1253|||
2024-05-06T13:05:31.250Z|logic_cond|Normal|1253|||
2024-05-06T13:20:00.000Z|logic_cond|Unavailable||||
2024-05-06T13:20:00.000Z|servo_cond|Unavailable||||
2024-05-06T13:22:30.000Z|logic_cond|Normal||||
2024-05-06T13:22:30.000Z|servo_cond|Normal||||
2024-05-06T13:24:35.000Z|logic_cond|Warning|212|||MAGAZINE DRUM MALFUNCTION
2024-05-06T13:40:00.000Z|logic_cond|Normal||||
2024-05-06T13:40:05.000Z|logic_cond|Normal||||
"""


def _read(tmp_path: Path, name: str, text: str, controllers: dict[str, str] | None = None):
    path = tmp_path / name
    path.write_text(text, encoding="ascii")
    return read_alarm_log_file(path, AlarmLogSource(pattern="*"), tmp_path, controllers)


def test_a_clear_is_a_normal_after_an_active_condition_of_the_item(tmp_path: Path) -> None:
    read = _read(tmp_path, "Mazak03_20240506.txt", RECONNECTS)
    got = read.result.kept.select("source_row", "event", "alarm_code", "channel").rows()
    assert got == [
        (5, "raised", "MAZAK:212", "logic_cond"),
        (6, "raised", "MAZAK:1253", "logic_cond"),
        (8, "cleared", "MAZAK:1253", "logic_cond"),  # the second Normal 1253 clears nothing
        # 13:22:30 Normal right after Unavailable: the adapter reconnecting, 212 still active
        (14, "raised", "MAZAK:212", "logic_cond"),
        (15, "cleared", None, "logic_cond"),  # clears 212; 13:40:05 finds nothing active
    ]
    c = read.result.counters
    # 16 lines: 5 events; the idle servo_cond reports, reconnect lines and samples skipped
    assert (c["lines_total"], c["read"], c["skipped_non_alarm"]) == (16, 5, 11)
    assert read.warning is None


def test_family_from_the_device_a_configured_table_or_a_warning(tmp_path: Path) -> None:
    okuma = _read(
        tmp_path,
        "agent.txt",
        "2024-05-06T08:00:01.000Z|MB-46VAE:system|Fault|2011|1||SPINDLE OVERHEAT\n",
        {"mb-46*": "Okuma OSP-P300M"},  # machine -> controller model, as for work orders
    )
    assert (okuma.machine, okuma.result.kept["alarm_code"].to_list()) == (
        "MB-46VAE",
        ["OKUMA:2011"],
    )
    agie = _read(
        tmp_path, "GFAgie01-20180301.txt", "2018-03-01T09:12:00.000Z|cond|Fault|130|||E-STOP\n"
    )
    assert agie.result.kept["alarm_code"].to_list() == ["AGIE:130"]
    unknown = _read(
        tmp_path, "cell4.shdr", "2024-05-06T08:00:01.000Z|HMC-5:logic_cond|Warning|379|||AIR\n"
    )
    assert unknown.result.kept["alarm_code"].to_list() == ["MTCONNECT:379"]
    assert unknown.warning == (
        "cell4.shdr: machine HMC-5: MTConnect names no controller for the device; its codes "
        "are filed as MTCONNECT:<code> (set normalize.asset_controllers, e.g. "
        "{'HMC-5' = 'MAZAK'}, or the source's family)"
    )
    configured = read_alarm_log_file(
        tmp_path / "cell4.shdr", AlarmLogSource(pattern="*", family="MAZAK"), tmp_path
    )
    assert configured.result.kept["alarm_code"].to_list() == ["MAZAK:379"]
    assert configured.warning is None


@pytest.mark.skipif(not NIST_LOG.exists(), reason="../shared not present: NIST MTConnect log")
def test_nist_mazak_codes_under_the_device_family() -> None:
    # SOURCE.md: device Mazak01, a Mazak Integrex 100-IV (Mazatrol control)
    read = read_alarm_log_file(NIST_LOG, root=NIST_LOG.parent)
    raised = read.result.kept.filter(pl.col("event") == "raised")
    assert read.machine == "Mazak01" and read.warning is None
    assert raised["alarm_code"].str.starts_with("MAZAK:").all()
    assert raised["alarm_code"].value_counts(sort=True).row(0) == ("MAZAK:212", 63)
