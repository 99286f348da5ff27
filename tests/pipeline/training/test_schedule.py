"""Tokens per step from the stage's size, and learning rate, epochs and warmup, hand-worked."""

from __future__ import annotations

import polars as pl

from pipeline.training.plan import plan_stages
from pipeline.training.schedule import schedule, warmup_steps
from schemas.plan import PlanConfig, StageConfig


def _stage(corpus: str, rows: int, length: int, **kw: object) -> StageConfig:
    return StageConfig(name="s", corpus=corpus, model="qwen2.5-0.5b", packing=False,
                       quantile=1.0, gpus=("h200-141g", "2xa100-80g"), **kw)  # type: ignore[arg-type]  # fmt: skip


def _plan(corpus: str, rows: int, length: int, **kw: object):  # type: ignore[no-untyped-def]
    cfg = PlanConfig(stages=[_stage(corpus, rows, length, **kw)])
    return plan_stages({corpus: pl.Series([length] * rows)}, cfg).stages[0]


def test_a_164_row_stage_gets_many_steps_per_epoch() -> None:
    # 164 rows of 500 tokens, padded to 512: floor(164 / 50) = 3 sequences = 1,536 tokens a step
    st = _plan("tier_A", 164, 500, method="full")
    assert (st.max_seq_len, st.sequences_per_epoch) == (512, 164)
    assert st.batch.target_tokens_per_step == 1536
    h200, two = st.gpus
    # one card: micro-batch min(fits, 3) = 3, accumulation 1; ceil(164 x 512 / 1536) = 55 steps
    assert (h200.micro_batch, h200.grad_accum_steps, h200.tokens_per_step) == (3, 1, 1536)
    assert h200.max_micro_batch > 3
    # 3 epochs (tier A) -> 165 steps; warmup max(ceil(0.03 x 165) = 5, 10 <= 16) = 10
    assert (h200.steps_per_epoch, h200.total_steps, h200.warmup_steps) == (55, 165, 10)
    # two cards: ceil(1536 / (512 x 2)) = 2 rows each, accumulation 1: 2,048 tokens, 41 steps
    assert (two.micro_batch, two.grad_accum_steps, two.tokens_per_step) == (2, 1, 2048)
    assert (two.steps_per_epoch, two.total_steps, two.warmup_steps) == (41, 123, 10)
    assert st.schedule.learning_rate == 1e-5 and st.schedule.epochs == 3


def test_a_3_row_stage_steps_once_per_sample() -> None:
    st = _plan("tier_C", 3, 100)
    assert st.batch.target_tokens_per_step == 128 and "one sequence per step" in st.batch.reason
    h200 = st.gpus[0]
    assert (h200.micro_batch, h200.grad_accum_steps, h200.steps_per_epoch) == (1, 1, 3)
    # 1 epoch (tier C); warmup max(ceil(0.09) = 1, no floor: 10 > 3 // 10) = 1
    assert (h200.total_steps, h200.warmup_steps) == (3, 1)
    assert st.schedule.learning_rate == 1e-4 and st.schedule.epochs == 1


def test_a_large_stage_is_capped_at_max_tokens_per_step() -> None:
    st = _plan("pretrain", 10_000, 1000)
    # floor(10000 / 50) = 200 sequences, capped at 131072 / 1024 = 128
    assert st.batch.target_tokens_per_step == 131_072 and "capped" in st.batch.reason
    for g in st.gpus:
        assert g.tokens_per_step is not None and g.grad_accum_steps is not None
        per_micro_step = g.micro_batch * 1024 * g.devices
        assert 131_072 <= g.tokens_per_step < 131_072 + per_micro_step
        assert g.micro_batch == min(g.max_micro_batch, 128 // g.devices)
        assert g.steps_per_epoch == -(-10_000 * 1024 // g.tokens_per_step)
    assert st.schedule.epochs == 1


def test_schedule_by_method_and_configured() -> None:
    assert schedule(_stage("tier_B", 1, 1, method="qlora")).learning_rate == 2e-4
    sched = schedule(_stage("tier_B", 1, 1, learning_rate=3e-5, epochs=4, scheduler="linear"))
    assert (sched.learning_rate, sched.epochs, sched.scheduler) == (3e-5, 4, "linear")
    assert sched.reasons["learning_rate"] == sched.reasons["epochs"] == "configured"
    assert schedule(_stage("sft_tools", 1, 1)).epochs == 2
    assert "QLoRA" in schedule(_stage("tier_B", 1, 1, method="qlora")).reasons["learning_rate"]


def test_warmup_steps() -> None:
    sched = schedule(_stage("tier_A", 1, 1))  # 3 %, at least 10 where 10 <= a tenth
    assert [warmup_steps(n, sched) for n in (0, 3, 90, 100, 1000)] == [0, 1, 3, 10, 30]
