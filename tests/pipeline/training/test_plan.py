"""Stage plans on realistic token-length distributions of the four corpora."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from pipeline.training.plan import (
    choose_max_seq_len,
    pack_efficiency,
    plan_stages,
    plan_table_rows,
    token_stats,
    write_plan,
)
from schemas.memory import TrainingSetup
from schemas.plan import Plan, PlanConfig, StageConfig


def _lengths() -> dict[str, pl.Series]:
    rng = np.random.default_rng(7)
    # manual chunks near 1-2k tokens; four-part SFT samples a few hundred tokens, long tail
    return {
        "pretrain": pl.Series(rng.integers(300, 2049, 4000)),
        "tier_A": pl.Series(rng.lognormal(6.0, 0.5, 1500).astype(np.int64) + 40),
        "tier_B": pl.Series(rng.lognormal(5.5, 0.7, 6000).astype(np.int64) + 40),
        "tier_C": pl.Series(rng.lognormal(5.0, 0.8, 3000).astype(np.int64) + 40),
        # tool-use samples: tools prompt and knowledge-base answers add a few hundred tokens
        "sft_tools": pl.Series(rng.lognormal(6.3, 0.3, 800).astype(np.int64) + 350),
    }


def test_token_stats_and_seq_len() -> None:
    s = pl.Series([100, 200, 300, 400] * 5 + [5000])
    st = token_stats(s)
    assert (st.rows, st.tokens, st.p50, st.max) == (21, 10000, 300, 5000)
    assert choose_max_seq_len(s, 0.9, 128, 32768) == 512  # 400 -> next multiple of 128
    assert choose_max_seq_len(s, 1.0, 128, 4096) == 4096  # capped by the model context
    assert choose_max_seq_len(pl.Series([1, 2]), 1.0, 128, 32768) == 128


def test_pack_efficiency_best_fit_decreasing() -> None:
    bins, eff = pack_efficiency(np.array([1000, 24, 900, 100, 100]), 1024)
    assert bins == 3  # [1000, 24], [900, 100], [100]
    assert eff == pytest.approx(2124 / (3 * 1024))
    bins, eff = pack_efficiency(np.array([512] * 8), 1024)
    assert (bins, eff) == (4, 1.0)
    bins, _ = pack_efficiency(np.array([5000, 10]), 1024)  # long rows truncated to a full bin
    assert bins == 2


def test_default_plan_covers_five_stages() -> None:
    lengths = _lengths()
    plan = plan_stages(lengths, PlanConfig())
    names = ["domain-adapt", "sft-expert", "sft-broad", "sft-tools", "align"]
    assert [s.name for s in plan.stages] == names
    align = plan.stages[4]
    assert align.stats.rows == 300  # 10 % of tier C
    for st in plan.stages:
        assert st.max_seq_len % 128 == 0
        assert st.max_seq_len >= st.stats.p99 or st.max_seq_len == 32768
        assert 0.0 <= st.truncation_rate <= 0.01 + 1e-9
        # tool samples are narrow (~900 tokens): two or three to a row, fewer slots filled
        assert (0.6 if st.name == "sft-tools" else 0.9) < st.packing_efficiency <= 1.0
        by_gpu = {g.gpu: g for g in st.gpus}
        h200, a100 = by_gpu["h200-141g"], by_gpu["a100-80g"]
        assert h200.fits and h200.micro_batch >= a100.micro_batch >= 1
        for g in st.gpus:
            if not g.fits:
                continue
            assert g.peak_gib is not None and g.peak_gib <= g.memory_gib * 0.85 + 1e-6
            assert g.tokens_per_step is not None and g.steps_per_epoch is not None
            assert g.tokens_per_step >= st.batch.target_tokens_per_step
            assert g.grad_accum_steps is not None and g.micro_batch <= g.max_micro_batch
            assert g.tokens_per_step - st.batch.target_tokens_per_step < (
                g.micro_batch * st.max_seq_len * g.devices
            )
            # accumulation rounds up, by less than one micro-step: at most half the steps lost
            slots = st.sequences_per_epoch * st.max_seq_len
            assert g.steps_per_epoch == -(-slots // g.tokens_per_step)
            assert g.steps_per_epoch >= min(50, st.sequences_per_epoch // g.devices) // 2


def test_recompute_needed_on_small_cards() -> None:
    cfg = PlanConfig(
        stages=[
            StageConfig(
                name="sft",
                corpus="tier_A",
                model="qwen2.5-0.5b",
                method="full",
                quantile=1.0,
                gpus=("rtx-4090", "h200-141g"),
            )  # fmt: skip
        ]
    )
    plan = plan_stages({"tier_A": pl.Series([4000] * 50 + [300] * 50)}, cfg)
    st = plan.stages[0]
    assert st.max_seq_len == 4096 and st.truncation_rate == 0.0
    small, big = st.gpus
    assert small.recompute_needed and small.recompute in ("selective", "full")
    # 100 rows, 54 packed sequences of 4096: one sequence per step, on either card
    assert not big.recompute_needed and big.max_micro_batch > small.max_micro_batch
    assert small.micro_batch == big.micro_batch == 1 and st.sequences_per_epoch == 54
    assert small.peak_gib is not None and small.peak_gib <= 0.85 * small.memory_gib
    # one more row than the chosen micro-batch would break the headroom
    model = get_model("qwen2.5-0.5b")
    setup = TrainingSetup(method="full", seq_len=4096, recompute=small.recompute,
                          micro_batch=small.max_micro_batch + 1, grad_accum_steps=2)  # fmt: skip
    assert estimate(model, setup).total_gib > 0.85 * small.memory_gib


def test_plan_json_and_table(tmp_path) -> None:  # type: ignore[no-untyped-def]
    plan = plan_stages(_lengths(), PlanConfig(headroom=0.2))
    path = write_plan(plan, tmp_path / "plan.json")
    again = Plan.model_validate(json.loads(path.read_text()))
    assert again == plan
    rows = plan_table_rows(plan)
    assert len(rows) == sum(len(s.gpus) for s in plan.stages)
    assert {"stage", "gpu", "max_seq_len", "micro_batch", "grad_accum", "fits"} <= set(rows[0])


def test_config_errors() -> None:
    with pytest.raises(ValueError):
        PlanConfig(headroom=0.05)
    with pytest.raises(ValueError, match="tier_A"):
        plan_stages({"pretrain": pl.Series([10])}, PlanConfig())


def test_plan_snapshot_covers_every_tier_and_pretrain_even_when_empty():
    from pipeline.training.plan import plan_snapshot

    sft = pl.DataFrame(
        {"tier": ["A", "A", "C"], "n_tokens": [300, 500, 120]},
        schema={"tier": pl.String, "n_tokens": pl.Int32},
    )
    plan = plan_snapshot(sft, None, PlanConfig())
    rows = {s.corpus: s.stats.rows for s in plan.stages}
    assert rows == {"pretrain": 0, "tier_A": 2, "tier_B": 0, "tier_C": 1, "sft_tools": 0}


def test_fits_are_decided_on_the_plan_with_figure() -> None:
    plan = plan_stages(_lengths(), PlanConfig())
    for st in plan.stages:
        for g in st.gpus:
            if g.fits:
                assert g.peak_gib is not None and g.plan_with_gib is not None
                assert g.plan_with_gib > g.peak_gib
                assert g.plan_with_gib <= g.memory_gib * 0.85 + 0.01
    row = plan_table_rows(plan)[0]
    assert {"expected_gib", "plan_with_gib"} <= set(row)
