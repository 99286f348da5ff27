from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from pipeline.alarms.incidents import (
    build_incidents,
    drop_described_incidents,
    incident_funnel,
    link_workorders,
)
from pipeline.ingest.alarm_logs.reader import read_alarm_log
from schemas.alarm_logs import ALARM_EVENT_SCHEMA, INCIDENT_SCHEMA, AlarmLogSource, IncidentConfig
from tests.pipeline.ingest.alarm_logs.support import read_alarm_logs

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "sample_data" / "alarm_logs"
NIST = REPO.parent / "shared" / "external" / "nist-smstestbed-mtconnect"


def _events(*raises: tuple[str, str, int]) -> pl.DataFrame:
    """Raised events (machine, code, seconds after 08:00) in ALARM_EVENT_SCHEMA."""
    t0 = datetime(2024, 3, 16, 8, 0, 0)
    rows = [
        {
            "record_id": f"e{i}",
            "source_kind": "alarm_log",
            "source_file": "x.txt",
            "source_row": i + 1,
            "machine": machine,
            "family": "FANUC",
            "native_code": code,
            "alarm_code": f"FANUC:{code}",
            "event": "raised",
            "level": None,
            "channel": None,
            "message": "V READY OFF",
            "occurred_at": t0 + timedelta(seconds=s),
        }
        for i, (machine, code, s) in enumerate(raises)
    ]
    return pl.DataFrame(rows, schema=ALARM_EVENT_SCHEMA)


def test_bursts_merge_within_the_configured_gap() -> None:
    events = _events(
        ("VMC-03", "SV0401", 0),
        ("VMC-03", "SV0401", 600),  # exactly the gap: same burst
        ("VMC-03", "SV0401", 1201),  # 601 s later: a new incident
        ("VMC-04", "SV0401", 30),  # another machine
        ("VMC-03", "SV0436", 60),  # another code
    )
    result = build_incidents(events, IncidentConfig(burst_gap_s=600))
    got = result.kept.select("machine", "alarm_codes", "count", "event_ids").rows()
    assert sorted(got) == [
        ("VMC-03", ["FANUC:SV0401"], 1, ["e2"]),
        ("VMC-03", ["FANUC:SV0401"], 2, ["e0", "e1"]),
        ("VMC-03", ["FANUC:SV0436"], 1, ["e4"]),
        ("VMC-04", ["FANUC:SV0401"], 1, ["e3"]),
    ]
    assert result.counters["merged_raises"] == 1
    wider = build_incidents(events, IncidentConfig(burst_gap_s=601))
    assert wider.kept.height == 3
    episodes = build_incidents(events, IncidentConfig(burst_gap_s=600, merge_by="machine"))
    assert episodes.kept.filter(pl.col("machine") == "VMC-03")["alarm_codes"].to_list() == [
        ["FANUC:SV0401", "FANUC:SV0436"],  # 0 s, 60 s, 600 s
        ["FANUC:SV0401"],  # 1201 s
    ]


def test_sample_logs_incidents_checked_by_hand() -> None:
    # FANUC VMC-03 (10-minute gap): DS0307 x2 (two days), SV0436 1 (3 raises), EX1002 2,
    # SV0401 2 (4-raise burst 10:05-10:11, 14:30), SP9001 1, OT0500 1, PS0010 1, and the Y-axis
    # cascade SV0410 15:46:02 + SV0401 15:46:03 on 03/18 1 = 11. SINUMERIK DMU-07: 3000, the
    # cascade 25000 09:14:05.117 + 25201 .130 (with 25000 again at 09:21:33), 700016 x2, 10720,
    # 25050, 25000 on 03/13 = 7.
    events = read_alarm_logs(SAMPLES).kept
    result = build_incidents(events)
    incidents = result.kept
    assert incidents.schema == pl.Schema(INCIDENT_SCHEMA)
    assert incidents.group_by("machine").len().sort("machine").rows() == [
        ("DMU-07", 7),
        ("VMC-03", 11),
    ]
    burst = incidents.filter(
        pl.col("alarm_codes").list.first() == "FANUC:SV0401", pl.col("count") == 4
    ).row(0, named=True)
    assert (str(burst["first_at"]), str(burst["last_at"])) == (
        "2024-03-16 10:05:17",
        "2024-03-16 10:11:25",
    )
    assert burst["messages"] == ["V就绪信号关闭 (X轴)"]
    assert burst["source_kind"] == "alarm_log" and burst["source_row"] == 21  # oldest raise
    encoder = incidents.filter(pl.col("alarm_codes").list.first() == "SINUMERIK:25000")
    # 25201 went at 09:16:40.902; 25000's 09:16:41 "went" precedes its second raise: the
    # incident clears when 25000 goes at 09:23:02.120, first acknowledged at 09:23:02.115
    assert encoder.select("alarm_codes", "count", "cleared_at", "acknowledged_at").rows()[0] == (
        ["SINUMERIK:25000", "SINUMERIK:25201"],
        3,
        datetime(2024, 3, 12, 9, 23, 2, 120000),
        datetime(2024, 3, 12, 9, 23, 2, 115000),
    )
    assert incidents["record_id"].n_unique() == incidents.height
    assert build_incidents(events).kept["record_id"].to_list() == incidents["record_id"].to_list()


@pytest.mark.skipif(not NIST.exists(), reason="../shared not present: NIST MTConnect log")
@pytest.mark.parametrize(
    ("cfg", "expected", "with_drum"),
    [
        # tests/pipeline/alarms/test_cascades.py reads the log line by line to the same counts
        # (_Oracle: 21 and 10); before cascades and continuations: 72 and 42, the drum alarm
        # 212 in 9 incidents.
        (IncidentConfig(burst_gap_s=600), 21, 2),
        (IncidentConfig(burst_gap_s=3600), 10, 1),
        (IncidentConfig(burst_gap_s=600, merge_by="machine"), 2, 1),
    ],
)
def test_nist_incident_counts(cfg: IncidentConfig, expected: int, with_drum: int) -> None:
    source = AlarmLogSource(
        pattern="*", format="mtconnect", family="MTCONNECT/MAZAK", machine="Mazak01"
    )
    events = read_alarm_log(NIST / "Mazak01-20180220-20180221.txt", source).kept
    result = build_incidents(events, cfg)
    assert result.kept.height == expected
    assert result.kept["count"].sum() == 242
    drum = result.kept.filter(pl.col("alarm_codes").list.contains("MTCONNECT/MAZAK:212"))
    assert drum.height == with_drum


def test_workorders_link_to_the_nearest_incident_with_the_same_code() -> None:
    incidents = build_incidents(read_alarm_logs(SAMPLES).kept).kept
    workorders = pl.DataFrame(
        {
            "record_id": ["wo-1", "wo-2", "wo-3", "wo-4", "wo-5"],
            "asset": ["VMC-03", "VMC-03", "VMC-07", "VMC-03", "DMU-07"],
            "reported_at": [
                "2024/03/16 11:02",  # after the 10:05-10:11 burst, before the 14:30 raise
                "2024-03-30 09:00:00",  # two weeks later: too far
                "2024-03-16 11:00:00",  # other machine
                "2024-03-15 09:40:00",  # SV0436 burst, cites two codes
                "2024-03-12 10:15:00",  # encoder incident on the Siemens machine
            ],
            "alarm_codes": [
                ["FANUC:SV0401"],
                ["FANUC:SV0401"],
                ["FANUC:SV0401"],
                ["FANUC:SV0436", "FANUC:SP9001"],
                ["SINUMERIK:25000"],
            ],
        }
    )
    linked, links = link_workorders(incidents, workorders)
    assert sorted(links["workorder_id"]) == ["wo-1", "wo-4", "wo-5"]
    by_order = {r["workorder_id"]: r for r in links.iter_rows(named=True)}
    burst = linked.filter(pl.col("workorder_ids").list.contains("wo-1")).row(0, named=True)
    assert (burst["count"], str(burst["first_at"])) == (4, "2024-03-16 10:05:17")
    assert by_order["wo-1"]["distance_s"] == pytest.approx(50 * 60 + 35)
    assert by_order["wo-4"]["alarm_code"] == "FANUC:SV0436"
    assert linked.height == incidents.height
    assert linked["workorder_ids"].list.len().sum() == 3
    narrow, _ = link_workorders(incidents, workorders, IncidentConfig(link_window_s=1800))
    assert narrow["workorder_ids"].list.len().sum() == 1  # only wo-4 (18:10 after last raise)


def test_an_incident_a_work_order_describes_is_rejected_as_the_same_incident():
    incidents = pl.DataFrame(
        {
            "record_id": ["inc1", "inc2"],
            "machine": ["VMC-03", "VMC-03"],
            "alarm_codes": [["FANUC:SV0401"], ["FANUC:SV0436"]],
            "first_at": [datetime(2024, 3, 18, 8, 12), datetime(2024, 5, 2, 14, 0)],
            "last_at": [datetime(2024, 3, 18, 8, 40), datetime(2024, 5, 2, 14, 5)],
        }
    )
    samples = incidents.select(
        "record_id",
        pl.lit("alarm_log").alias("source_kind"),
        pl.lit("VMC-03_fanuc.txt").alias("source_file"),
        pl.lit(3, pl.Int64).alias("source_row"),
        "machine",
        "alarm_codes",
    )
    workorders = pl.DataFrame(
        {
            "record_id": ["wo9"],
            "asset": ["VMC-03"],
            "reported_at": ["2024-03-18 09:30"],
            "alarm_codes": [["FANUC:SV0401"]],
        }
    )
    result = drop_described_incidents(samples, incidents, workorders)
    assert result.kept["record_id"].to_list() == ["inc2"]
    rejected = result.rejected.row(0, named=True)
    assert (rejected["record_id"], rejected["reason"], rejected["duplicate_of"]) == (
        "inc1",
        "same_incident",
        "wo9",
    )


def test_incident_funnel_accounts_for_every_event(sample_data):
    events = read_alarm_logs(sample_data / "alarm_logs").kept
    result = incident_funnel(events)
    raises = events.filter(pl.col("event") == "raised").height
    assert result.counters["read"] == events.height
    assert result.counters["kept"] == result.kept.height
    assert result.counters["rejected_merged_into_incident"] == raises - result.kept.height
    assert result.counters["rejected_state_change"] == events.height - raises
    merged = result.rejected.filter(pl.col("reason") == "merged_into_incident")
    assert set(merged["duplicate_of"]) <= set(result.kept["record_id"])


EXPORTS = REPO / "tests" / "fixtures" / "exports"


def test_incident_table_keeps_every_incident_with_raises_and_related_work_order():
    from pipeline.alarms.incidents import incident_table
    from pipeline.ingest.alarm_logs.reader import read_alarm_log_file
    from schemas.manuals import FAULT_CODE_SCHEMA

    events = pl.concat(
        read_alarm_log_file(EXPORTS / name, root=EXPORTS).result.kept
        for name in ("VMC-11_0i-MF_alarm_history.txt", "DMC-5_alarmlog.csv")
    )
    incidents = build_incidents(events).kept
    workorders = pl.DataFrame(
        {
            "record_id": ["wo-a", "wo-b", "wo-c", "wo-d"],
            "asset": ["vmc 11", "DMC_5", "VMC-11", "VMC-12"],  # written loosely
            "reported_at": [
                "2024-08-16 15:10",  # an hour after the SV0436 burst
                "2024/08/16 09:30",
                "2024-08-25 08:00",  # nine days later
                "2024-08-16 15:10",  # other machine
            ],
            "alarm_codes": [["FANUC:SV0436"], ["ALARM:27001"], ["FANUC:SV0436"], ["FANUC:SV0436"]],
        }
    )
    kb = pl.DataFrame(
        {"code": ["FANUC:SV0436"], "language": ["zh"]}, schema_overrides=FAULT_CODE_SCHEMA
    ).select(pl.col(c).cast(t) if c in ("code", "language") else pl.lit(None, t).alias(c)
             for c, t in FAULT_CODE_SCHEMA.items())  # fmt: skip
    table = incident_table(incidents, events, workorders, kb, IncidentConfig(link_window_s=7200))
    assert table.height == incidents.height == 6  # nothing dropped for lack of an entry
    burst = table.filter(pl.col("codes").list.contains("FANUC:SV0436")).row(0, named=True)
    assert (burst["occurrences"], burst["raise_lines"]) == (2, [6, 4])  # oldest raise first
    assert burst["raise_files"] == ["VMC-11_0i-MF_alarm_history.txt"] * 2
    assert (burst["fault_code_entry"], burst["workorder_id"], burst["cleared"]) == (
        True, "wo-a", False,
    )  # fmt: skip
    safety = table.filter(pl.col("codes").list.contains("SINUMERIK:27001")).row(0, named=True)
    assert (safety["workorder_id"], safety["fault_code_entry"], safety["cleared"]) == (
        "wo-b", False, True,
    )  # fmt: skip
    assert str(safety["end"]) == "2024-08-16 09:13:05.114000"  # the clear ends it
    assert table["workorder_id"].drop_nulls().len() == 2
    narrow = incident_table(incidents, events, workorders, kb, IncidentConfig(link_window_s=1200))
    assert narrow["workorder_id"].drop_nulls().to_list() == ["wo-b"]  # 17 min; wo-a: 67 min
