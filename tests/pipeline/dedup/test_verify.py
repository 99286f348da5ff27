"""Which candidate pairs are one incident: near duplicates merged; alarm codes, numbers
and machines keep incidents apart, a re-typing slip does not."""

from __future__ import annotations

import polars as pl

from schemas.dedup import DedupConfig
from tests.pipeline.dedup.oracle import dedup
from tests.pipeline.dedup.support import EN, SERVO, ZH, frame, rejects_of


def test_chinese_near_duplicates_are_found() -> None:
    rewritten = {
        **ZH,
        "symptom": ZH["symptom"].replace("明显异响", "异响").replace("操作工", "操作人员"),
        "action": ZH["action"].replace("空运转两小时后", "空转两个小时以后"),
    }
    df = frame(
        {"record_id": "wo-001", **ZH},
        {"record_id": "wo-002", **rewritten},
        {"record_id": "wo-003", **SERVO, "alarm_codes": ["FANUC:SV0401"]},
    )
    result, index = dedup(df, DedupConfig())
    assert rejects_of(result) == {"wo-002": ("near_dup", "wo-001")}
    assert result.kept.get_column("record_id").to_list() == ["wo-001", "wo-003"]
    assert result.counters["rejected_near_dup"] == 1
    assert sorted(index.get_column("record_id").to_list()) == ["wo-001", "wo-003"]


def test_english_near_duplicates_are_found() -> None:
    retyped = {
        **EN,
        "symptom": EN["symptom"].replace("grinding", "rumbling").replace("thirty", "twenty"),
        "cause": EN["cause"].upper(),
        "action": EN["action"].replace("specified", "specified."),
    }
    unrelated = {
        "symptom": "Coolant pump runs but no flow at the nozzle; low coolant alarm on the panel.",
        "cause": "Suction strainer clogged with chips.",
        "action": "Cleaned the strainer and the tank, refilled coolant.",
        "prevention": "Clean the chip basket weekly.",
    }
    df = frame(
        {"record_id": "en-9", **retyped, "language": "en"},
        {"record_id": "en-1", **EN, "language": "en"},
        {"record_id": "en-5", **unrelated, "language": "en"},
    )
    result, _ = dedup(df, DedupConfig())
    # equally complete and as long: the smaller record_id is kept
    assert rejects_of(result) == {"en-9": ("near_dup", "en-1")}


def test_records_differing_only_in_alarm_code_are_kept_apart() -> None:
    in_text = [
        {
            "record_id": f"al-{code}",
            **SERVO,
            "symptom": f"X轴移动时机床突然停机，系统显示伺服报警 SV{code}，复位后可以短时间运行。",
            "alarm_codes": [f"FANUC:SV{code}"],
        }
        for code in ("0401", "0436")
    ]
    column_only = [
        {"record_id": "col-a", **EN, "alarm_codes": ["SIEMENS:25000"], "language": "en"},
        {"record_id": "col-b", **EN, "alarm_codes": ["SIEMENS:25201"], "language": "en"},
    ]
    # the normalizer did not recognize these codes: the numbers in the text keep them apart
    # (they differ in two digits; one re-typed digit would be a slip, see the test below)
    bare = [
        {
            "record_id": f"bare-{code}",
            "symptom": f"After a power cycle, Z axis homes to the wrong spot, {code} displayed.",
            "action": "Re-set the reference point and checked the deceleration dog.",
            "language": "en",
        }
        for code in ("25080", "25201")
    ]
    result, _ = dedup(frame(*in_text, *column_only, *bare), DedupConfig())
    assert result.rejected.height == 0
    assert result.counters["kept"] == 6


def test_a_retyping_slip_in_a_number_is_weighed_not_a_veto() -> None:
    """One dropped, doubled, swapped or mistyped digit in a number of otherwise the same text
    is a re-typed copy; a recognized alarm code with another digit is another alarm."""
    text = "After a power cycle, Z axis homes to the wrong spot, {} displayed on the screen."
    action = "Re-set the reference point and checked the deceleration dog."
    slips = [
        {"record_id": f"s-{code}", "symptom": text.format(code), "action": action}
        for code in ("25080", "2508", "25800", "25090")
    ]
    two_slips = {"record_id": "s-two", "symptom": text.format("25080 / 1203"), "action": action}
    other = {"record_id": "s-x", "symptom": text.format("25080 / 1230"), "action": action}
    alarms = [
        {**SERVO, "record_id": f"a-{c}", "alarm_codes": [f"FANUC:SV{c}"]} for c in ("0410", "0411")
    ]
    result, _ = dedup(frame(*slips, two_slips, other, *alarms), DedupConfig())
    assert rejects_of(result) == {
        "s-2508": ("near_dup", "s-25080"),
        "s-25800": ("near_dup", "s-25080"),
        "s-25090": ("near_dup", "s-25080"),
        "s-x": ("near_dup", "s-two"),
    }
    assert result.counters["slip_pairs"] >= 3


def test_records_on_different_machines_are_kept_apart() -> None:
    df = frame(
        {"record_id": "m-1", **SERVO},
        {"record_id": "m-2", **SERVO},
        {"record_id": "m-3", **SERVO},
        {"record_id": "m-4", **SERVO, "remarks": "no machine recorded"},
    ).with_columns(
        asset=pl.Series(["VMC-01", "VMC-02", "VMC-01", None]),
        machine_model=pl.Series(["VMC850", "VMC850", "VMC850", None]),
    )
    result, _ = dedup(df, DedupConfig())
    assert rejects_of(result) == {"m-3": ("exact_dup", "m-1")}
    kept_apart, _ = dedup(df, DedupConfig(machine_columns=()))
    assert kept_apart.counters["kept"] == 1


def test_an_extra_verification_number_does_not_split_a_duplicate() -> None:
    df = frame(
        {"record_id": "t-1", **SERVO, "action": SERVO["action"] + "试切120件尺寸合格。"},
        {"record_id": "t-2", **SERVO},
    )
    result, _ = dedup(df, DedupConfig())
    assert rejects_of(result) == {"t-2": ("near_dup", "t-1")}
