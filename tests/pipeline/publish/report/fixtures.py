"""Inputs the report tests share: a manifest with a funnel of two source kinds (and a hostile
file name), token lengths, a plan from the planner, rendered work-order samples."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.stages.messages import render_messages
from pipeline.training.plan import plan_stages
from schemas.manifest import Counts, InputFile, Manifest, RefreshSummary, StageCounts
from schemas.plan import Plan, PlanConfig, StageConfig

HOSTILE = "workorders/<script>x</script>.csv"
STAGES = {
    "workorder/ingest": {"read": 138, "kept": 136, "rejected": 2, "rejected_malformed_row": 2},
    "workorder/filter": {"read": 136, "kept": 107, "rejected": 29, "rejected_placeholder": 8,
                         "rejected_test_entry": 6, "rejected_empty": 5, "rejected_phone_only": 10},
    "workorder/dedup": {"read": 107, "kept": 100, "rejected": 7, "rejected_exact_dup": 4,
                        "rejected_near_dup": 3},
    "alarm_log/ingest": {"read": 48, "kept": 45, "rejected": 3, "rejected_bad_timestamp": 1,
                         "rejected_malformed_line": 2},
    "alarm_log/incidents": {"read": 45, "kept": 20, "rejected": 25, "rejected_state_change": 16,
                            "rejected_merged_into_incident": 9},
}  # fmt: skip


def manifest() -> Manifest:
    stages = {k: StageCounts.from_counters(v) for k, v in STAGES.items()}
    by_reason: dict[str, int] = {}
    for st in stages.values():
        for reason, n in st.by_reason.items():
            by_reason[reason] = by_reason.get(reason, 0) + n
    rejected = sum(by_reason.values())
    inputs = [
        InputFile(path="workorders/维修工单_2024.csv", source_kind="workorder", bytes=13179,
                  sha256="a" * 64, encoding="gbk", rows=62),
        InputFile(path=HOSTILE, source_kind="workorder", bytes=10120, sha256="b" * 64,
                  encoding="utf-8-sig", rows=76),
        InputFile(path="alarm_logs/VMC-03_fanuc_alarm_history.txt", source_kind="alarm_log",
                  bytes=1748, sha256="c" * 64, encoding="gbk", rows=48, skipped_lines=8),
    ]  # fmt: skip
    return Manifest(
        snapshot_id="20240320T080000000000Z",
        created_at="20240320T080000000000Z",
        flow="refresh-corpus",
        code_version="0.1.0+g3db217b",
        config_hash="d9435be5" * 8,
        inputs=inputs,
        counts=Counts(
            read=186, kept=186 - rejected, rejected=rejected, by_reason=by_reason, stages=stages
        ),  # fmt: skip
        sources={"manual": {"files": 3, "sections": 24, "chunks": 7}},
        refresh=RefreshSummary(
            previous_snapshot=None, processed=[i.path for i in inputs], carried=[], removed=[]
        ),  # fmt: skip
        outputs=[],
    )


def tokens() -> tuple[pl.DataFrame, pl.Series]:
    rng = np.random.default_rng(11)
    a = rng.lognormal(5.0, 0.4, 700).astype(np.int64) + 40  # four-part samples, long tail
    b = rng.lognormal(4.0, 0.6, 170).astype(np.int64) + 10  # short B rows
    sft = pl.DataFrame(
        {"tier": ["A"] * len(a) + ["B"] * len(b), "n_tokens": np.concatenate([a, b])},
        schema={"tier": pl.String, "n_tokens": pl.Int32},
    )
    return sft, pl.Series("n_tokens", rng.integers(300, 2049, 90), pl.Int32)  # manual chunks


def plan(sft: pl.DataFrame, pretrain: pl.Series) -> Plan:
    gpus = ("rtx-4090", "h200-141g")
    cfg = PlanConfig(
        stages=[
            StageConfig(name="domain-adapt", corpus="pretrain", model="qwen2.5-14b",
                        method="full", gpus=gpus),
            StageConfig(name="sft-expert", corpus="tier_A", model="qwen2.5-0.5b", method="full",
                        quantile=1.0, gpus=gpus),
        ]
    )  # fmt: skip
    long_a = pl.Series([4000] * 50 + [300] * 50)  # long rows: the small card needs recomputation
    return plan_stages({"pretrain": pretrain, "tier_A": long_a}, cfg)


def work_orders() -> pl.DataFrame:
    """Rendered work-order samples as technicians type them; machines recur across files."""
    return render_messages(
        pl.DataFrame(
            {
                "record_id": [f"wo-{i}" for i in range(8)],
                "source_file": ["workorders/维修工单_2024.csv"] * 4 + ["workorders/sv.csv"] * 4,
                "source_row": [3, 4, 5, 6, 2, 3, 4, 5],
                "tier": ["A", "A", "B", "C", "A", "A", "B", "A"],
                "asset": ["CNC-25", "CNC-25", "M-205", None, "CNC-25", "M-205", "CNC-25", "M-102"],
                "language": ["zh", "zh", "zh", "zh", "en", "en", "en", "en"],
                "alarm_codes": [["FANUC:SV0436"], ["FANUC:SV0436", "FANUC:SV0401"], [], None,
                                ["FANUC:SV0401"], ["SINUMERIK:25000"], ["FANUC:SV0436"],
                                ["HAAS:161"]],
                "symptom": ["Y轴报警SV0436", "开机报警SV0401 SV0436", "换刀卡刀", "主轴异响",
                            "SV0401 at power on", "25000 X axis encoder", "SV436 again",
                            "Alarm 161 X axis drive fault"],
                "diagnosis": ["润滑不良", "MCC未吸合", None, None, "MCC contact worn",
                              "Encoder cable chafed", "Y axis gib dry", "Amplifier"],
                "action": ["疏通油路", "更换MCC", "调整机械手", None, "Replaced MCC",
                           "Replaced cable", "Lubed Y way", "Replaced amplifier"],
                "prevention": [None] * 8,
            }
        )
    )  # fmt: skip
