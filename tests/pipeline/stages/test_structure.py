from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.stages.structure import structure
from schemas.records import INGESTED_SCHEMA, NORMALIZED_EXTRA, PARTS
from schemas.samples import STRUCTURED_EXTRA, StructureConfig


def frame(rows: list[dict]) -> pl.DataFrame:
    """Records as the structure stage receives them (after normalize/filter/dedup)."""
    schema = {**INGESTED_SCHEMA, **NORMALIZED_EXTRA}
    full = []
    for i, row in enumerate(rows):
        base = {c: None for c in schema}
        base |= {
            "record_id": f"r{i}",
            "source_kind": "workorder",
            "source_file": "工单.csv",
            "source_row": i + 2,
            "alarm_codes": [],
            "repairs": [],
            "pii_redactions": 0,
        }
        full.append(base | row)
    return pl.DataFrame(full, schema=schema)


def parts_of(row: dict) -> dict:
    result = structure(frame([row]))
    assert result.kept.height == 1, result.rejected.to_dicts()
    return result.kept.select(*PARTS, "part_origin").to_dicts()[0]


def test_mapped_columns_give_the_four_parts_and_cause_is_consumed():
    out = structure(
        frame(
            [
                {
                    "language": "zh",
                    "machine_model": "VMC850(FANUC 0i-MF)",
                    "symptom": "X轴快移时有异响,伴随振动。",
                    "cause": "X轴丝杠支撑轴承磨损。",
                    "action": "更换X轴丝杠两端支撑轴承,重新预紧。",
                    "prevention": "每季度检查丝杠润滑。",
                    "remarks": "备件已到货",
                }
            ]
        )
    )
    assert "cause" not in out.kept.columns
    for column, dtype in STRUCTURED_EXTRA.items():
        assert out.kept.schema[column] == dtype
    row = out.kept.to_dicts()[0]
    assert row["symptom"] == "X轴快移时有异响,伴随振动。"
    assert row["diagnosis"] == "X轴丝杠支撑轴承磨损。"
    assert row["action"] == "更换X轴丝杠两端支撑轴承,重新预紧。"
    assert row["prevention"] == "每季度检查丝杠润滑。"
    assert row["part_origin"] == {
        "symptom": "column:symptom",
        "diagnosis": "column:cause",
        "action": "column:action",
        "prevention": "column:prevention",
    }
    # Columns the stage does not consume travel on unchanged.
    assert row["machine_model"] == "VMC850(FANUC 0i-MF)"
    assert row["remarks"] == "备件已到货"
    assert row["record_id"] == "r0"


@pytest.mark.parametrize(
    ("text", "expected", "origins"),
    [
        (
            "故障现象:主轴启动后报警SP9012,转速上不去。原因分析:主轴编码器插头松动。"
            "处理措施:重新插紧编码器插头并紧固。预防:每月检查插头。",
            ("主轴启动后报警SP9012,转速上不去。", "主轴编码器插头松动。",
             "重新插紧编码器插头并紧固。", "每月检查插头。"),
            ("cue:故障现象", "cue:原因", "cue:处理措施", "cue:预防"),
        ),
        (
            "【现象】刀库换刀时卡刀 【原因】机械手定位销磨损 【处理】更换定位销 "
            "【建议】每周检查机械手",
            ("刀库换刀时卡刀", "机械手定位销磨损", "更换定位销", "每周检查机械手"),
            ("cue:现象", "cue:原因", "cue:处理", "cue:建议"),
        ),
        (
            "症状:第四轴回零偏差0.02°\n诊断 - A轴刹车片磨损\n维修:更换刹车片,重新标定零点\n"
            "定期:每年检查刹车片厚度",
            ("第四轴回零偏差0.02°", "A轴刹车片磨损", "更换刹车片,重新标定零点",
             "每年检查刹车片厚度"),
            ("cue:症状", "cue:诊断", "cue:维修", "cue:定期"),
        ),
    ],
)  # fmt: skip
def test_labelled_chinese_free_text(text, expected, origins):
    row = parts_of({"language": "zh", "symptom": text})
    assert tuple(row[p] for p in PARTS) == expected
    assert tuple(row["part_origin"][p] for p in PARTS) == origins


@pytest.mark.parametrize(
    ("text", "expected", "origins"),
    [
        (
            "Symptom: spindle overheats after 30 min. Root cause - clogged coolant filter. "
            "Action taken: cleaned filter and flushed lines. Recommendation: weekly filter check.",
            ("spindle overheats after 30 min.", "clogged coolant filter.",
             "cleaned filter and flushed lines.", "weekly filter check."),
            ("cue:Symptom", "cue:Root cause", "cue:Action taken", "cue:Recommendation"),
        ),
        (
            "PROBLEM: door interlock alarm 1021 at cycle start\nFound: door switch actuator bent\n"
            "Fix: replaced door switch, adjusted striker\nPM: clean chips off switch weekly",
            ("door interlock alarm 1021 at cycle start", "door switch actuator bent",
             "replaced door switch, adjusted striker", "clean chips off switch weekly"),
            ("cue:PROBLEM", "cue:Found", "cue:Fix", "cue:PM"),
        ),
        (
            "Complaint: chuck not clamping. Root cause analysis: low hydraulic pressure, pump "
            "worn. Repair: replaced pump, set pressure 3.0 MPa.",
            ("chuck not clamping.", "low hydraulic pressure, pump worn.",
             "replaced pump, set pressure 3.0 MPa.", None),
            ("cue:Complaint", "cue:Root cause", "cue:Repair", None),
        ),
    ],
)  # fmt: skip
def test_labelled_english_free_text(text, expected, origins):
    row = parts_of({"language": "en", "symptom": text})
    assert tuple(row[p] for p in PARTS) == expected
    assert tuple(row["part_origin"][p] for p in PARTS) == origins


def test_unlabelled_chinese_free_text():
    row = parts_of(
        {
            "language": "zh",
            "symptom": "主轴运转时噪音大,伴有振动。主轴前轴承磨损严重。"
            "更换主轴前轴承,重新调整预紧力。建议每季度检查主轴润滑。",
        }
    )
    assert row["symptom"] == "主轴运转时噪音大,伴有振动。"
    assert row["diagnosis"] == "主轴前轴承磨损严重。"
    assert row["action"] == "更换主轴前轴承,重新调整预紧力。"
    assert row["prevention"] == "建议每季度检查主轴润滑。"
    assert row["part_origin"] == {
        "symptom": "column:symptom",
        "diagnosis": "unlabelled",
        "action": "cue:更换",
        "prevention": "cue:建议",
    }


def test_unlabelled_english_free_text():
    row = parts_of(
        {
            "language": "en",
            "symptom": "Spindle noisy above 6000 rpm. Front bearing worn due to lack of grease. "
            "Tech replaced front bearing 7014C and re-greased. We should check lube monthly.",
        }
    )
    assert row["symptom"] == "Spindle noisy above 6000 rpm."
    assert row["diagnosis"] == "Front bearing worn due to lack of grease."
    assert row["action"] == "Tech replaced front bearing 7014C and re-greased."
    assert row["prevention"] == "We should check lube monthly."
    assert row["part_origin"]["diagnosis"] == "unlabelled"
    assert row["part_origin"]["action"] == "cue:replaced"
    assert row["part_origin"]["prevention"] == "unlabelled"


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (
            {"language": "zh",
             "symptom": "X轴回零时报警,检查发现减速开关挡块松动,紧固挡块后回零正常"},
            ("X轴回零时报警", "检查发现减速开关挡块松动", "紧固挡块后回零正常"),
        ),
        (
            {"language": "zh", "symptom": "液压站压力低,经检查溢流阀阀芯卡滞并清洗溢流阀"},
            ("液压站压力低", "经检查溢流阀阀芯卡滞", "清洗溢流阀"),
        ),
        (
            {"language": "en", "symptom": "Z axis drifts during rapid, found loose coupling "
             "and tightened the coupling screws"},
            ("Z axis drifts during rapid", "found loose coupling",
             "tightened the coupling screws"),
        ),
    ],
)  # fmt: skip
def test_cue_words_split_one_sentence(row, expected):
    got = parts_of(row)
    assert (got["symptom"], got["diagnosis"], got["action"]) == expected


def test_first_sentence_stays_symptom_even_with_an_action_verb():
    row = parts_of({"language": "zh", "symptom": "更换刀具后工件尺寸超差。重新对刀,补偿刀长。"})
    assert row["symptom"] == "更换刀具后工件尺寸超差。"
    assert row["action"] == "重新对刀,补偿刀长。"


def test_mapped_column_wins_over_free_text_for_the_same_part():
    row = parts_of(
        {
            "language": "zh",
            "symptom": "冷却泵不出水 原因:冷却泵电机烧坏 处理:更换冷却泵电机",
            "cause": "冷却泵电机绕组烧毁,热继电器未动作",
        }
    )
    assert row["symptom"] == "冷却泵不出水"
    assert row["diagnosis"] == "冷却泵电机绕组烧毁,热继电器未动作"
    assert row["action"] == "更换冷却泵电机"
    assert row["part_origin"] == {
        "symptom": "column:symptom",
        "diagnosis": "column:cause",
        "action": "cue:处理",
        "prevention": None,
    }


def test_remarks_fill_a_missing_part():
    row = parts_of(
        {
            "language": "en",
            "symptom": "X axis alarm SV0401 on power up",
            "remarks": "Replaced servo amplifier A06B-6240-H105. Customer complained about "
            "downtime.",
        }
    )
    assert row["action"] == "Replaced servo amplifier A06B-6240-H105."
    assert row["part_origin"]["action"] == "cue:Replaced"
    assert row["diagnosis"] is None


def test_remarks_without_part_words_are_not_a_part():
    row = parts_of(
        {
            "language": "zh",
            "symptom": "排屑器不转",
            "action": "清理链板卡住的铁屑",
            "remarks": "备件2024-03-10到货",
        }
    )
    assert row["symptom"] == "排屑器不转"
    assert row["diagnosis"] is None and row["prevention"] is None


NOISE_ZH = ["急", "!!", "催了三天", "客户很生气", "尽快", "[NAME]", "—"]
NOISE_EN = ["ASAP", "angry", "third time", "Regards", "[NAME]", "iPhone", "Thanks"]


@pytest.mark.parametrize(
    ("row", "noise", "kept"),
    [
        (
            {"language": "zh", "symptom": "急!! 刀库换刀时卡刀,客户很生气,已经催了三天。"
             "检查发现机械手定位销松动,更换定位销后试运行正常。—[NAME]工",
             "remarks": "请尽快处理!!!"},
            NOISE_ZH,
            ("刀库换刀时卡刀", "检查发现机械手定位销松动", "更换定位销后试运行正常。"),
        ),
        (
            {"language": "zh", "symptom": "故障现象:加急!主轴不能定向。原因:定向参数被误改。"
             "处理:恢复参数4077。客户投诉停机两天,要求今天修好 ——[NAME]"},
            NOISE_ZH,
            ("主轴不能定向。", "定向参数被误改。", "恢复参数4077。"),
        ),
        (
            {"language": "en", "symptom": "URGENT!! Spindle will not orient ASAP. Customer is "
             "angry, third time this month. Found orientation parameter changed. Restored "
             "parameter 4077 from backup.\n\nRegards,\n[NAME]\nSent from my iPhone"},
            NOISE_EN,
            ("Spindle will not orient.", "Found orientation parameter changed.",
             "Restored parameter 4077 from backup."),
        ),
        (
            {"language": "en", "symptom": "Coolant pump trips. Pump motor bearing seized. "
             "Replaced pump motor. Thanks, [NAME]"},
            NOISE_EN,
            ("Coolant pump trips.", "Pump motor bearing seized.", "Replaced pump motor."),
        ),
    ],
)  # fmt: skip
def test_complaints_urgency_and_signatures_are_stripped(row, noise, kept):
    got = parts_of(row)
    for part in PARTS:
        for fragment in noise:
            assert fragment not in (got[part] or ""), (part, got[part])
    assert (got["symptom"], got["diagnosis"], got["action"]) == kept


def test_emergency_stop_is_not_urgency():
    row = parts_of(
        {"language": "zh", "symptom": "急停按钮按下后无法复位", "action": "更换急停按钮"}
    )
    assert row["symptom"] == "急停按钮按下后无法复位"
    assert row["action"] == "更换急停按钮"


def test_placeholder_values_are_absent_parts():
    row = parts_of(
        {
            "language": "zh",
            "symptom": "液压站压力低",
            "cause": "无",
            "action": "调整溢流阀压力至4.5MPa",
            "prevention": "/",
        }
    )
    assert row["diagnosis"] is None and row["prevention"] is None
    assert row["part_origin"]["diagnosis"] is None and row["part_origin"]["prevention"] is None


def test_rows_with_neither_symptom_nor_action_are_rejected_with_reason():
    rows = [
        {"language": "zh", "symptom": "主轴异响", "action": "更换主轴轴承"},
        {"language": "zh", "symptom": "机床无法开机", "cause": "不明", "remarks": "待查"},
        {"language": "en", "action": "Replaced the coolant pump"},
        {"language": "zh", "symptom": "客户很生气,催了三天", "action": "—[NAME]"},
        {"language": "en", "symptom": "", "remarks": "ASAP!!"},
        {"language": "zh", "cause": "原因:润滑泵损坏", "prevention": "定期检查润滑泵"},
    ]
    result = structure(frame(rows))
    assert result.counters["read"] == 6
    assert result.counters["read"] == result.counters["kept"] + result.counters["rejected"]
    assert result.counters["rejected_no_usable_parts"] == 3
    # One of the two is enough here; the tier stage rejects what meets no tier.
    assert result.kept["record_id"].to_list() == ["r0", "r1", "r2"]
    assert result.kept["action"].to_list() == ["更换主轴轴承", None, "Replaced the coolant pump"]
    rejected = result.rejected.sort("record_id")
    assert rejected["stage"].unique().to_list() == ["structure"]
    assert rejected["detail"].to_list() == [
        "no symptom and no action",
        "no symptom and no action",
        "no symptom and no action; found diagnosis, prevention",
    ]
    assert rejected["source_row"].to_list() == [5, 6, 7]
    # The payload is the record as the stage saw it, original text included.
    assert json.loads(rejected["payload"][0])["symptom"] == "客户很生气,催了三天"


def test_language_detected_when_column_missing():
    df = frame([{"symptom": "主轴异响。主轴轴承磨损。更换主轴轴承。"}]).drop("language")
    row = structure(df).kept.to_dicts()[0]
    assert row["diagnosis"] == "主轴轴承磨损。"
    assert row["action"] == "更换主轴轴承。"


def test_cue_lists_come_from_configuration():
    cfg = StructureConfig(
        label_cues={
            "symptom": ["Beschreibung"],
            "diagnosis": ["Ursache"],
            "action": ["Maßnahme"],
            "prevention": ["Vorbeugung"],
        }
    )
    text = "Beschreibung: Spindel laut. Ursache: Lager defekt. Maßnahme: Lager getauscht."
    row = structure(frame([{"language": "en", "symptom": text}]), cfg).kept.to_dicts()[0]
    assert (row["diagnosis"], row["action"]) == ("Lager defekt.", "Lager getauscht.")
    assert row["part_origin"]["action"] == "cue:Maßnahme"


def test_unknown_part_in_configuration_is_an_error():
    with pytest.raises(ValueError, match="unknown part"):
        StructureConfig(label_cues={"cause": ["原因"]})


def test_empty_frame():
    result = structure(frame([]))
    assert result.kept.height == 0 and result.rejected.height == 0
    assert result.counters == {"read": 0, "kept": 0, "rejected": 0}
    assert set(STRUCTURED_EXTRA) <= set(result.kept.columns)
