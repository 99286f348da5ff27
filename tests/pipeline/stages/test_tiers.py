from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.stages.filters import apply_filters
from pipeline.stages.normalize import normalize
from pipeline.stages.structure import structure
from pipeline.stages.tiers import assign_tiers
from sample_data.make_samples import sample_index
from schemas.filters import FilterConfig
from schemas.ingest import IngestConfig
from schemas.normalize import NormalizeConfig
from schemas.records import INGESTED_SCHEMA, PARTS
from schemas.samples import TIERED_EXTRA, TierConfig
from tests.pipeline.ingest.workorders.support import read_workorder_file

SYMPTOM_ZH = "X轴快移时伺服报警SV0436,电机过热。"
DIAGNOSIS_ZH = "X轴导轨润滑不足,润滑泵压力开关损坏导致电机过载。"
ACTION_ZH = "更换润滑泵单元并疏通X轴润滑油路。"
PREVENTION_ZH = "每班开机前检查润滑油位。"


def samples(rows: list[dict]) -> pl.DataFrame:
    """Four-part samples as the structure stage emits them."""
    schema = {
        "record_id": pl.String,
        "source_kind": pl.String,
        "language": pl.String,
        "alarm_codes": pl.List(pl.String),
        **{p: pl.String for p in PARTS},
    }
    full = [
        {c: None for c in schema}
        | {"record_id": f"r{i}", "source_kind": "workorder", "alarm_codes": []}
        | row
        for i, row in enumerate(rows)
    ]
    return pl.DataFrame(full, schema=schema)


def tier_of(**parts: str | None) -> tuple[str, list[str]]:
    row = {"language": "zh"} | parts
    result = assign_tiers(samples([row]))
    assert result.kept.height == 1
    return result.kept["tier"][0], result.kept["tier_reasons"][0].to_list()


def test_tier_a_all_four_specific_and_concrete():
    tier, reasons = tier_of(
        symptom=SYMPTOM_ZH, diagnosis=DIAGNOSIS_ZH, action=ACTION_ZH, prevention=PREVENTION_ZH
    )
    assert tier == "A"
    assert reasons == ["all_four_parts", "specific_diagnosis", "concrete_action"]


def test_tier_a_in_english():
    result = assign_tiers(
        samples(
            [
                {
                    "language": "en",
                    "symptom": "Alarm 161 X-AXIS DRIVE FAULT at power-up.",
                    "diagnosis": "Motor power cable chafed in the cable carrier, phase V shorted.",
                    "action": "Replaced X motor cable, megger test > 500 MOhm.",
                    "prevention": "Inspect cable carrier at the 6-month PM.",
                }
            ]
        )
    )
    assert result.kept["tier"].to_list() == ["A"]


@pytest.mark.parametrize(
    ("diagnosis", "action", "prevention", "reasons"),
    [
        (DIAGNOSIS_ZH, ACTION_ZH, None, ["missing_prevention"]),
        (None, ACTION_ZH, PREVENTION_ZH, ["missing_diagnosis"]),
        ("原因不明,待查", ACTION_ZH, PREVENTION_ZH, ["vague_diagnosis"]),
        ("电池", ACTION_ZH, PREVENTION_ZH, ["short_diagnosis"]),
        ("操作习惯不好,没有注意", ACTION_ZH, PREVENTION_ZH, ["generic_diagnosis"]),
        (DIAGNOSIS_ZH, "已处理,试机正常", PREVENTION_ZH, ["vague_action"]),
        (DIAGNOSIS_ZH, "更换后正常", PREVENTION_ZH, ["vague_action"]),
    ],
)
def test_tier_b_lists_what_keeps_it_from_a(diagnosis, action, prevention, reasons):
    tier, got = tier_of(
        symptom=SYMPTOM_ZH, diagnosis=diagnosis, action=action, prevention=prevention
    )
    assert tier == "B"
    assert got == reasons


def test_vague_diagnosis_and_action_alone_cap_at_c():
    """Issue 13: "未查明。" / "重启后正常，继续观察。" say nothing; such rows were tier B."""
    tier, got = tier_of(symptom=SYMPTOM_ZH, diagnosis="未查明。", action="重启后正常，继续观察。")
    assert tier == "C"
    assert got[0] == "vague_action_phrase"
    assert {"vague_diagnosis", "vague_action", "missing_prevention"} <= set(got)


@pytest.mark.parametrize(
    ("language", "diagnosis", "reason"),
    [
        ("en", "Unknown, TBD", "vague_diagnosis"),
        ("en", "Bad part.", "short_diagnosis"),
        ("en", "Operator did something wrong.", "generic_diagnosis"),
        ("en", "Intermittent fault, see alarm 1021 history", None),
        ("zh", "参见SV0436报警履历", None),
    ],
)
def test_diagnosis_rules(language, diagnosis, reason):
    row = {
        "language": language,
        "symptom": "Spindle stops",
        "diagnosis": diagnosis,
        "action": "Replaced the spindle drive fan",
        "prevention": "Clean the cabinet filter monthly",
    }
    got = assign_tiers(samples([row])).kept.to_dicts()[0]
    if reason is None:
        assert got["tier"] == "A"
    else:
        assert (got["tier"], got["tier_reasons"]) == ("B", [reason])


@pytest.mark.parametrize(
    ("action", "concrete"),
    [
        ("更换X轴伺服电机,重新设定参数2021", True),
        ("拆洗减压阀,换液压油", True),
        ("轴承已更换,运行正常", True),
        ("带电更换电池(A98L-0031-0012)", True),
        ("更换后正常", False),
        ("已处理,继续观察", False),
        ("Replaced the turret clamp proximity switch", True),
        ("Spindle cartridge rebuilt by vendor and reinstalled", True),
        ("Pump was replaced", True),
        ("Installed A06B-6079-H106", True),
        ("Replaced it, ok now", False),
        ("Fixed it.", False),  # "Fixed" alone is too short: the action counts as missing
        ("Alarm cleared, machine running", False),
        ("Done on 2024-01-10", False),
    ],
)
def test_concrete_action(action, concrete):
    row = {"language": "zh" if action[0] > "\u2e80" else "en", "symptom": "主轴报警"}
    row |= {"diagnosis": "主轴编码器插头氧化", "action": action, "prevention": "每月检查插头"}
    got = assign_tiers(samples([row])).kept.to_dicts()[0]
    assert ("vague_action" not in got["tier_reasons"]) == concrete, got["tier_reasons"]


def test_tier_c_symptom_and_action_only():
    tier, reasons = tier_of(symptom=SYMPTOM_ZH, action=ACTION_ZH)
    assert tier == "C"
    assert reasons == [
        "symptom_and_action_only",
        "missing_diagnosis",
        "missing_prevention",
    ]


def test_fault_log_rows_are_c_unless_complete():
    incident = {
        "source_kind": "alarm_log",
        "language": "zh",
        "symptom": "SV0436 软过热继电器 X轴,30分钟内报警5次",
        "diagnosis": "伺服电机过载,导轨润滑不足",
        "action": "检查润滑,更换润滑泵",
    }
    complete = incident | {"prevention": "定期检查润滑泵压力"}
    result = assign_tiers(samples([incident, complete]))
    got = result.kept.sort("record_id").to_dicts()
    assert got[0]["tier"] == "C"
    assert got[0]["tier_reasons"][0] == "fault_log"
    assert got[1]["tier"] == "A"


def test_rules_come_from_configuration():
    row = {
        "symptom": SYMPTOM_ZH,
        "diagnosis": DIAGNOSIS_ZH,
        "action": ACTION_ZH,
        "prevention": PREVENTION_ZH,
    }
    cfg = TierConfig(min_diagnosis_chars_zh=40)
    got = assign_tiers(samples([{"language": "zh"} | row]), cfg).kept.to_dicts()[0]
    assert (got["tier"], got["tier_reasons"]) == ("B", ["short_diagnosis"])


def test_rows_without_symptom_or_action_are_below_tier_c():
    rows = [
        {"language": "zh", "symptom": SYMPTOM_ZH, "action": ACTION_ZH},
        {"language": "zh", "symptom": SYMPTOM_ZH, "diagnosis": DIAGNOSIS_ZH},
        {"language": "en", "action": "Replaced the coolant pump", "prevention": "   "},
    ]
    result = assign_tiers(samples(rows))
    assert result.counters["read"] == result.counters["kept"] + result.counters["rejected"] == 3
    assert result.counters["rejected_below_tier_c"] == 2
    assert (result.counters["tier_A"], result.counters["tier_C"]) == (0, 1)
    rejected = result.rejected.sort("record_id")
    assert rejected["reason"].to_list() == ["below_tier_c", "below_tier_c"]
    assert rejected["stage"].to_list() == ["tier", "tier"]
    assert rejected["detail"].to_list() == ["missing action", "missing symptom"]
    for column, dtype in TIERED_EXTRA.items():
        assert result.kept.schema[column] == dtype


def _sample_workorders(sample_data: Path) -> pl.DataFrame:
    root = sample_data / "workorders"
    frames = [
        read_workorder_file(path, root, IngestConfig()).result.kept
        for path in sorted(root.iterdir())
        if path.suffix in (".csv", ".xlsx")
    ]
    return pl.concat(frames, how="diagonal_relaxed")


def test_sample_workorders_land_in_their_tagged_tiers(sample_data):
    """ingest -> normalize -> filters -> structure -> tiers on the hand-written exports."""
    normalized = normalize(_sample_workorders(sample_data), NormalizeConfig()).kept
    filtered = apply_filters(normalized, FilterConfig())
    structured = structure(filtered.kept)
    tiered = assign_tiers(structured.kept)
    for stage in (filtered, structured, tiered):
        counters = stage.counters
        assert counters["read"] == counters["kept"] + counters["rejected"]

    tags = sample_index().rename({"file": "source_file", "line": "source_row"})
    got = tiered.kept.join(tags, on=["source_file", "source_row"], how="inner")
    expected = (
        pl.when(pl.col("tags").list.contains("expert"))
        .then(pl.lit("A"))
        .when(pl.col("tags").list.contains("usable"))
        .then(pl.lit("B"))
        .when(pl.col("tags").list.contains("sym_action"))
        .then(pl.lit("C"))
    )
    # Mojibake rows are tagged by their broken text; once repaired they carry a cause.
    checked = got.with_columns(expected.alias("expected")).filter(
        pl.col("expected").is_not_null() & ~pl.col("tags").list.contains("mojibake_gbk")
    )
    assert checked.height >= 60
    wrong = checked.filter(pl.col("tier") != pl.col("expected"))
    assert wrong.height == 0, wrong.select("order_id", "tags", "tier", "tier_reasons").to_dicts()

    # Free-text stories in the symptom column give all four parts from their cue words.
    freetext = got.filter(pl.col("tags").list.contains("freetext"))
    assert freetext.height >= 5
    assert freetext.select(pl.col("symptom", "diagnosis", "action").is_not_null().all()).row(0) == (
        True,
        True,
        True,
    )
    origins = freetext.select(pl.col("part_origin").struct.unnest()).unpivot()["value"]
    assert origins.drop_nulls().str.starts_with("cue:").all()


def test_gbk_repair_that_lost_a_character_caps_at_c_through_normalize():
    """A GBK export of mojibake: normalize repairs it, tags a lost character, tiers cap it."""

    def gbk_export(text: str) -> str:
        return text.encode("utf-8").decode("gbk", errors="replace").replace("\ufffd", "?")

    rows = [
        {"action": gbk_export("更换润滑泵单元并疏通润滑油路。")},  # 通 and 路 are lost
        {"action": gbk_export("更换润滑泵单元。")},  # only the final 。 is lost
    ]
    df = pl.DataFrame(
        [
            {c: None for c in INGESTED_SCHEMA}
            | {
                "record_id": f"r{i}",
                "source_kind": "workorder",
                "source_file": "orders.csv",
                "source_row": i + 2,
                "machine_model": "FANUC 0i-MF",
                "symptom": SYMPTOM_ZH,
                "cause": DIAGNOSIS_ZH,
                "prevention": PREVENTION_ZH,
            }
            | row
            for i, row in enumerate(rows)
        ],
        schema=INGESTED_SCHEMA,
    )
    normalized = normalize(df, NormalizeConfig()).kept
    assert normalized["repairs"].to_list() == [["gbk_as_utf8", "gbk_lossy"], ["gbk_as_utf8"]]
    tiered = assign_tiers(structure(normalized).kept).kept.sort("record_id")
    assert tiered["tier"].to_list() == ["C", "A"]
    assert "lossy_repair" in tiered["tier_reasons"][0].to_list()
