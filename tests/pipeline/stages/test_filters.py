from __future__ import annotations

import polars as pl

from pipeline.stages.filters import apply_filters
from schemas.filters import FilterConfig
from schemas.records import INGESTED_SCHEMA, NORMALIZED_EXTRA

GOOD_ZH = {
    "symptom": "X轴移动时报警,伺服准备未完成",
    "cause": "伺服放大器电源模块损坏",
    "action": "更换放大器,试机正常",
}


def frame(rows: list[dict]) -> pl.DataFrame:
    """Normalized records as the filter stage receives them."""
    schema = {**INGESTED_SCHEMA, **NORMALIZED_EXTRA}
    full = []
    for i, row in enumerate(rows):
        base = {c: None for c in schema}
        base |= {
            "record_id": f"r{i}",
            "source_kind": "workorder",
            "source_file": "wo.csv",
            "source_row": i + 2,
            "alarm_codes": [],
            "repairs": [],
            "pii_redactions": 0,
            "language": "zh",
        }
        full.append(base | row)
    return pl.DataFrame(full, schema=schema)


def reasons(rows: list[dict], cfg: FilterConfig | None = None) -> list[str | None]:
    df = frame(rows)
    result = apply_filters(df, cfg or FilterConfig())
    by_id = dict(zip(result.rejected["record_id"], result.rejected["reason"], strict=True))
    return [by_id.get(f"r{i}") for i in range(len(rows))]


def test_each_filter_gives_its_reason():
    rows = [
        GOOD_ZH,
        {"symptom": "测试", "action": "测试"},
        {"symptom": "主轴报警", "action": "更换编码器", "remarks": "测试工单，请忽略"},
        {"symptom": "同上", "cause": "同上", "action": "无"},
        {"symptom": "1111", "action": "N/A"},
        {"symptom": "   ", "remarks": "abc"},
        {"symptom": "[PHONE]", "action": "电话 [PHONE]"},
        {"symptom": "坏了", "action": "修"},
        {"symptom": "怎么又坏了！！催了三天了，什么时候来人", "action": "已经反映给领导"},
        {"symptom": "The customer says the machine is bad today", "action": "Will visit next week"},
        {
            "symptom": "锟斤拷锟斤拷锟斤拷锟斤拷",
            "action": "锟斤拷锟斤拷",
            "repairs": ["unrecoverable"],
        },
    ]
    assert reasons(rows) == [
        None,
        "test_entry",
        "test_entry",
        "placeholder",
        "placeholder",
        "empty",
        "phone_only",
        "too_short",
        "complaint_only",
        "no_technical_content",
        "unrecoverable_encoding",
    ]


def test_alarm_code_alone_counts_as_technical():
    row = {
        "symptom": "开机出现 SV0401",
        "action": "已处理完毕，客户确认",
        "alarm_codes": ["FANUC:SV0401"],
    }
    assert reasons([row]) == [None]


def test_english_records_kept_and_complaints_rejected():
    rows = [
        {
            "symptom": "Spindle alarm 108 at 8000 rpm",
            "cause": "Drive fan clogged",
            "action": "Cleaned fan and filter",
        },
        {"symptom": "Third time this month!! Unacceptable", "action": "Escalated to manager"},
    ]
    assert reasons(rows) == [None, "complaint_only"]


def test_thresholds_come_from_configuration():
    row = {"symptom": "主轴异响", "action": "加油"}
    assert reasons([row]) == [None]
    assert reasons([row], FilterConfig(min_chars=20)) == ["too_short"]


def test_counters_add_up_and_rejects_keep_payload():
    rows = [GOOD_ZH, {"symptom": "测试"}, {"symptom": "同上", "action": "同上"}]
    result = apply_filters(frame(rows), FilterConfig())
    assert result.counters == {
        "read": 3,
        "kept": 1,
        "rejected": 2,
        "rejected_placeholder": 1,
        "rejected_test_entry": 1,
    }
    assert result.kept.columns == frame(rows).columns
    payload = result.rejected.filter(pl.col("reason") == "test_entry")["payload"][0]
    assert '"symptom":"测试"' in payload
    assert result.rejected["stage"].unique().to_list() == ["filter"]
