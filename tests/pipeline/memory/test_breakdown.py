"""The peak's regime and plan margin."""

from __future__ import annotations

from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from schemas.memory import TrainingSetup

QWEN7 = get_model("qwen2.5-7b")


def test_plan_with_adds_the_regime_margin() -> None:
    b = estimate(QWEN7, TrainingSetup(method="lora"))
    assert b.regime == "LoRA" and b.plan_margin > 0
    assert b.plan_with_bytes == int(b.total_bytes * (1 + b.plan_margin))
    assert estimate(QWEN7, TrainingSetup(method="qlora")).regime == "QLoRA (NF4)"
    assert estimate(QWEN7, TrainingSetup(method="full", zero=3, dp=2)).regime == (
        "full, sharded/parallel"
    )
