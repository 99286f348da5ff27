from pathlib import Path

import polars as pl
import pytest

from pipeline.alarms.incidents import build_incidents
from pipeline.alarms.samples import incident_samples
from pipeline.kb.extract import fault_entries
from pipeline.kb.fault_codes import merge_knowledge_base
from schemas.alarm_logs import IncidentConfig
from schemas.manuals import ManualsConfig
from tests.pipeline.ingest.alarm_logs.support import read_alarm_logs
from tests.pipeline.ingest.documents.support import read_blocks

REPO = Path(__file__).resolve().parents[3]
SAMPLES = REPO / "sample_data"


@pytest.fixture(scope="module")
def kb() -> pl.DataFrame:
    tables = fault_entries(read_blocks(SAMPLES / "manuals"), ManualsConfig()).kept
    return merge_knowledge_base(tables).kept


@pytest.fixture(scope="module")
def events() -> pl.DataFrame:
    return read_alarm_logs(SAMPLES / "alarm_logs").kept


def test_incidents_join_the_knowledge_base(kb: pl.DataFrame, events: pl.DataFrame) -> None:
    incidents = build_incidents(events).kept
    result = incident_samples(incidents, kb)
    c = result.counters
    # 18 incidents (two cascades: SINUMERIK 25000 + 25201, FANUC SV0410 + SV0401); OT0500 and
    # PS0010 are in no manual table -> rejected; 4 repeat another incident's machine, alarm and
    # answer with other times and counts -> collapsed (issue 13): DS0307, EX1002, SV0401 (X)
    # and 700016
    assert (c["read"], c["kept"], c["rejected_no_fault_code_entry"]) == (18, 12, 2)
    assert c["rejected_exact_dup"] == 4
    assert sorted(result.rejected.filter(pl.col("reason") != "exact_dup")["detail"]) == [
        "no knowledge-base entry for FANUC:OT0500; the incident stays in incidents/",
        "no knowledge-base entry for FANUC:PS0010; the incident stays in incidents/",
    ]
    samples = result.kept
    burst = samples.filter(
        pl.col("alarm_codes").list.first() == "FANUC:SV0401", pl.col("count") == 5
    ).row(0, named=True)
    assert burst["symptom"] == (
        "VMC-03 报警 FANUC:SV0401 V就绪信号关闭 (X轴)"
        "（2024-03-16 10:05:17 起，至 14:30:48 共报警 5 次）"
    )
    assert burst["diagnosis"].startswith("伺服放大器就绪信号（VRDY）断开；急停解除后主接触器")
    assert burst["action"].split("；")[0] == "检查 MCC 及其线圈回路"
    assert burst["prevention"] is None and burst["tier_hint"] == "C"
    assert burst["language"] == "zh" and burst["source_kind"] == "alarm_log"
    incident = incidents.filter(pl.col("record_id") == burst["record_id"]).row(0, named=True)
    assert burst["event_ids"][:4] == incident["event_ids"] and len(burst["event_ids"]) == 5
    repeat = result.rejected.filter(pl.col("duplicate_of") == burst["record_id"])
    assert repeat.get_column("reason").to_list() == ["exact_dup"]
    assert (burst["source_file"], burst["source_row"]) == (
        "VMC-03_fanuc_alarm_history_20240318.txt",
        21,
    )

    # the encoder incident gets the table's cause/remedy and the prose prevention note
    encoder = samples.filter(pl.col("alarm_codes").list.first() == "SINUMERIK:25000").row(
        0, named=True
    )
    assert encoder["symptom"].startswith(
        "Alarm SINUMERIK:25000, SINUMERIK:25201 Axis X1 hardware fault of active encoder / "
        "Axis X1 drive fault on DMU-07 (from 2024-03-12 09:14:05, raised 3 times until "
        "09:21:33, cleared 2024-03-12 09:23:02)"
    )
    assert encoder["prevention"].startswith("inspect encoder cables")
    assert encoder["tier_hint"] is None  # complete: the tier stage decides
    assert encoder["part_origin"]["prevention"] == "fault_table:prevention"
    assert samples.filter(pl.col("tier_hint").is_null()).height == c["complete"] == 5


def test_knowledge_base_entry_in_the_incident_language_wins(
    kb: pl.DataFrame, events: pl.DataFrame
) -> None:
    english = kb.filter(pl.col("code") == "FANUC:SV0401").with_columns(
        record_id=pl.lit("kb-en"),
        language=pl.lit("en"),
        causes=pl.lit(["Amplifier ready signal VRDY off"]),
        remedies=pl.lit(["Check the MCC contactor"]),
    )
    incidents = build_incidents(events).kept
    for table in (pl.concat([english, kb]), pl.concat([kb, english])):
        samples = incident_samples(incidents, table).kept
        sv0401 = samples.filter(pl.col("alarm_codes").list.first() == "FANUC:SV0401")
        assert sv0401["kb_ids"].list.first().is_in(["kb-en"]).sum() == 0
        assert sv0401["action"].str.starts_with("检查 MCC").all()
    only_english = pl.concat([english, kb.filter(pl.col("code") != "FANUC:SV0401")])
    samples = incident_samples(incidents, only_english).kept
    sv0401 = samples.filter(pl.col("alarm_codes").list.first() == "FANUC:SV0401")
    # the X-axis bursts; the Y-axis SV0401 follows SV0410 in one cascade
    assert sv0401["action"].to_list() == ["Check the MCC contactor"]


def test_episode_with_several_codes_labels_each_cause(
    kb: pl.DataFrame, events: pl.DataFrame
) -> None:
    cfg = IncidentConfig(burst_gap_s=600, merge_by="machine")
    incidents = build_incidents(events, cfg).kept
    samples = incident_samples(incidents, kb).kept
    episode = samples.filter(pl.col("alarm_codes").list.len() == 2).row(0, named=True)
    assert episode["alarm_codes"] == ["SINUMERIK:25000", "SINUMERIK:25201"]
    assert episode["diagnosis"].startswith("SINUMERIK:25000: Signals of the active position")
    assert ". SINUMERIK:25201: The drive reports a fault" in episode["diagnosis"]
    assert len(episode["kb_ids"]) == 2
