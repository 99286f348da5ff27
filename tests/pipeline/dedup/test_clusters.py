"""Per cluster the most complete record is kept; published records are never replaced."""

from __future__ import annotations

import polars as pl

from schemas.dedup import DedupConfig, index_schema
from tests.pipeline.dedup.oracle import dedup
from tests.pipeline.dedup.support import EN, SERVO, ZH, frame, rejects_of


def test_most_complete_member_is_kept() -> None:
    no_prevention = {**ZH, "prevention": None}
    vague_cause = {**ZH, "cause": "轴承磨损，润滑不足，预紧力下降导致径向跳动超过0.02毫米。"}
    df = frame(
        {"record_id": "a-1", **no_prevention, "alarm_codes": ["FANUC:SP9031"]},
        {"record_id": "a-2", **vague_cause, "alarm_codes": ["FANUC:SP9031"]},
        {"record_id": "a-3", **ZH},  # complete, but no alarm code
        {"record_id": "a-4", **ZH, "alarm_codes": ["FANUC:SP9031"]},  # complete, with code
    )
    result, _ = dedup(df, DedupConfig())
    assert result.kept.get_column("record_id").to_list() == ["a-4"]
    assert rejects_of(result) == {
        "a-1": ("near_dup", "a-4"),
        "a-2": ("near_dup", "a-4"),
        "a-3": ("exact_dup", "a-4"),
    }


def test_new_records_are_checked_against_a_persisted_index(tmp_path) -> None:
    cfg = DedupConfig()
    old_result, old_index = dedup(
        frame({"record_id": "old-1", **ZH, "prevention": None}, {"record_id": "old-2", **EN}),
        cfg,
    )
    assert old_result.rejected.height == 0
    path = tmp_path / "dedup_index.parquet"
    old_index.write_parquet(path)
    index = pl.read_parquet(path)
    assert index.schema == pl.Schema(index_schema(cfg.num_perm))

    new = frame(
        # more complete than old-1, still rejected: published records are never replaced
        {"record_id": "new-1", **ZH, "symptom": ZH["symptom"].replace("操作工", "操作人员")},
        {"record_id": "new-2", **{k: v.lower() for k, v in EN.items()}},
        {"record_id": "new-3", **SERVO, "alarm_codes": ["FANUC:SV0401"]},
        {"record_id": "new-4", **SERVO, "alarm_codes": ["FANUC:SV0401"], "remarks": "急"},
    )
    result, new_index = dedup(new, cfg, index)
    assert rejects_of(result) == {
        "new-1": ("near_dup", "old-1"),
        "new-2": ("exact_dup", "old-2"),
        "new-4": ("exact_dup", "new-3"),
    }
    assert new_index.get_column("record_id").to_list() == ["new-3"]
