"""Recomputes the calibration error against published peaks (../shared/reference)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.memory import margins
from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from schemas.memory import ALLOCATOR_RESERVE, FRAGMENTATION, GIB, HEADLINE_BIAS
from tools.calibration import (
    DEFAULT_CSV,
    LORO_MEDIAN_LIMIT,
    MEDIAN_APE_LIMIT,
    PROJECT_CSV,
    SHARED_EXCLUDED,
    _estimates,
    _parts,
    by_regime,
    evaluate,
    load_cases,
    row_to_case,
    run,
    summarize,
)


@pytest.fixture(scope="module")
def cases():  # type: ignore[no-untyped-def]
    if not DEFAULT_CSV.exists():
        pytest.skip(f"../shared not present: {DEFAULT_CSV}")
    return load_cases(DEFAULT_CSV)


def test_median_error_within_limit(cases) -> None:  # type: ignore[no-untyped-def]
    rows, skipped = cases
    assert len(rows) >= 130 and len(skipped) <= 3
    s = summarize(evaluate(rows))
    assert s["median_ape"] <= MEDIAN_APE_LIMIT, s
    assert s["p90_ape"] < 0.6, s
    assert by_regime(evaluate(rows)).height >= 6


@pytest.fixture(scope="module")
def report():  # type: ignore[no-untyped-def]
    if not DEFAULT_CSV.exists():
        pytest.skip(f"../shared not present: {DEFAULT_CSV}")
    return run([DEFAULT_CSV, PROJECT_CSV])


def test_leave_one_repository_out_error_within_limit(report) -> None:  # type: ignore[no-untyped-def]
    loro = summarize(report["loro"])
    assert loro["n"] >= 190
    assert loro["median_ape"] <= LORO_MEDIAN_LIMIT, loro
    assert report["loro"]["group"].n_unique() >= 6
    # every group was estimated with constants fitted without it
    assert set(report["loro_constants"]) == set(report["loro"]["group"].unique())


def test_shipped_constants_and_margins_match_the_calibration(report) -> None:  # type: ignore[no-untyped-def]
    assert report["constants"] == (ALLOCATOR_RESERVE, FRAGMENTATION, HEADLINE_BIAS)
    by_regime_margin, overall = report["margins"]
    assert by_regime_margin == margins.PLAN_MARGINS
    assert overall == margins.DEFAULT_PLAN_MARGIN


def test_project_rows_carry_citation_settings_and_caveats() -> None:
    df = pl.read_csv(PROJECT_CSV, infer_schema_length=None)
    for col in ("url", "measured", "stack", "caveats", "notes", "seq_len", "micro_batch"):
        assert df[col].null_count() == 0, col
    assert df["url"].str.starts_with("https://github.com/").all()
    assert set(df["measured"]) <= {"allocated", "reserved", "device"}
    cases, skipped = load_cases(PROJECT_CSV)
    assert len(cases) >= 55 and all(f == "project" for f, _, _ in skipped)
    assert all(why for _, _, why in skipped)  # every unused row says why


def _row(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "source": "QwenLM/Qwen README.md 'Profiling of Memory and Speed' table",
        "model": "Qwen-7B",
        "params_b": 7.72,
        "method": "LoRA",
        "precision": "bf16 (HF Trainer --bf16)",
        "optimizer": "AdamW",
        "seq_len": 2048,
        "micro_batch": 1,
        "grad_ckpt": "on",
        "packing": "no (padded to length)",
        "zero_or_fsdp": "none",
        "n_gpus": 1,
        "gpu": "A100-SXM4-80GB",
        "peak_mem_gb": 23.8,
        "unit": "GB",
        "notes": "grad accum 8; LoRA r=64 on c_attn,c_proj,w1,w2",
    }
    return base | kw


def test_row_parsing_units_and_totals() -> None:
    c = row_to_case(0, _row())
    assert not isinstance(c, str)
    assert c.measured_bytes == pytest.approx(23.8e9)
    assert c.setup.lora_rank == 64 and len(c.setup.lora_targets) == 7
    assert c.setup.grad_accum_steps == 8 and c.setup.recompute == "full"
    total = row_to_case(0, _row(unit="GB_sum_all_gpus", n_gpus=4, peak_mem_gb=95.1,
                                zero_or_fsdp="DeepSpeed ZeRO-2"))  # fmt: skip
    assert not isinstance(total, str)
    assert total.measured_bytes == pytest.approx(95.1e9 / 4)
    assert total.setup.zero == 2 and total.setup.dp == 4
    gib = row_to_case(0, _row(unit="GiB", peak_mem_gb=10.0))
    assert not isinstance(gib, str) and gib.measured_bytes == 10 * GIB
    tp = row_to_case(0, _row(method="full", zero_or_fsdp="FSDP 32 x TP 8", n_gpus=256,
                             grad_ckpt="selective (op)"))  # fmt: skip
    assert not isinstance(tp, str)
    assert (tp.setup.dp, tp.setup.tp, tp.setup.zero, tp.setup.recompute) == (
        32,
        8,
        3,
        "selective_op",
    )
    assert isinstance(row_to_case(0, _row(n_gpus=None)), str)
    bnb = row_to_case(0, _row(method="QLoRA (bnb NF4, no double quant)", stack="lightning",
                              measured="allocated", variable_length="yes"))  # fmt: skip
    assert not isinstance(bnb, str)
    assert (bnb.setup.double_quant, bnb.setup.stack, bnb.setup.attention) == (
        False,
        "lightning",
        "sdpa",
    )
    assert bnb.setup.variable_length and bnb.measured_kind == "allocated"
    gptq8 = row_to_case(0, _row(method="LoRA (GPTQ int8 base)"))
    assert not isinstance(gptq8, str) and gptq8.setup.quantization == "gptq_int8"
    assert not isinstance(c, str) and (c.setup.lora_dropout, c.setup.kbit_upcast) == (0.05, None)
    stated = row_to_case(
        0,
        _row(
            method="QLoRA (bnb NF4 base)",
            notes="LoRA r=16 dropout 0.0 on q,v",
            caveats="train.py prepares the base itself: no fp32 upcast",
        ),
    )
    assert not isinstance(stated, str)
    assert (stated.setup.lora_dropout, stated.setup.kbit_upcast) == (0.0, False)
    assert row_to_case(0, _row(use="no: peak is a load transient")) == "peak is a load transient"
    # HF's reentrant checkpointing unless stated otherwise or Answer.AI's checkpoint_wrapper
    assert not isinstance(c, str) and c.setup.hf_reentrant_checkpointing
    for kw in ({"grad_ckpt": "on (use_reentrant False)"}, {"source": "AnswerDotAI/fsdp_qlora x"}):
        off = row_to_case(0, _row(**kw))
        assert not isinstance(off, str) and not off.setup.hf_reentrant_checkpointing


def test_deepspeed_buckets_as_stated_else_the_frameworks_config() -> None:
    def buckets(source: str, notes: str) -> tuple[float, bool]:
        c = row_to_case(0, _row(source=source, notes=notes, zero_or_fsdp="DeepSpeed ZeRO-2"))
        assert not isinstance(c, str)
        return c.setup.reduce_bucket_elements, c.setup.overlap_comm

    # Qwen1's finetune scripts pass finetune/ds_config_zero2.json (2e8, overlap_comm true)
    assert buckets("QwenLM/Qwen README.md table", "finetune.py") == (2e8, True)
    assert buckets("someone/else", "trainer run") == (5e8, False)  # DeepSpeed's defaults
    stated = "reduce_bucket_size 5e7, overlap_comm: false"
    assert buckets("QwenLM/Qwen README.md table", stated) == (5e7, False)
    # ZeRO-3: Qwen1's ds_config_zero3.json leaves both buckets "auto", which HF's Trainer
    # fills with hidden^2 and 0.9 hidden^2 (Qwen-7B: 4096^2 = 16,777,216; 15,099,494)
    c = row_to_case(0, _row(source="QwenLM/Qwen README.md table", notes="finetune.py",
                            zero_or_fsdp="DeepSpeed ZeRO-3", model="Qwen-7B"))  # fmt: skip
    assert not isinstance(c, str)
    assert (c.setup.reduce_bucket_elements, c.setup.prefetch_bucket_elements) == (
        16_777_216,
        15_099_494,
    )


def test_compiled_loss_parsed_where_the_framework_compiled_it() -> None:
    def compiled(source: str, notes: str, **kw: object) -> bool:
        c = row_to_case(0, _row(source=source, notes=notes, method="full", **kw))
        assert not isinstance(c, str)
        return c.setup.compile_loss

    titan = "pytorch/torchtitan benchmarks/llama3_8b_h200_{}_x.md"
    # torchtitan compiles its loss under --training.compile since 2025-04; its 2024 train.py
    # left that commented out
    assert compiled(titan.format("202506"), "torch.compile; FSDP2")
    assert not compiled(titan.format("202412"), "Table 3 + torch.compile")
    assert not compiled(titan.format("202506"), "no compile")
    # torchtune's recipes keep only an in-place compiled chunked CE (2024-09 onwards)
    tune = "pytorch/torchtune README.md table (added commit abc 2024-11-18)"
    assert compiled(tune, "packing+compile+chunked CE")
    assert not compiled(tune, "+ torch.compile; standard CE")
    assert not compiled("pytorch/torchtune README.md table at commit x (2024-05-09)",
                        "Uses torch compile; chunked CE")  # fmt: skip
    assert not compiled("QwenLM/Qwen README.md", "torch.compile")  # no known compiled loss


def test_headline_figures_reached_leave_one_repository_out(report) -> None:  # type: ignore[no-untyped-def]
    # the figures docs/calibration.md reports (8.2 %, 23.7 %, 11.7 %), with a little slack; issue
    # 11's three new sources had raised the share under-estimated by >10 % from 8 % (195 rows)
    # to 20 %; the kbit fp32 stream, FSDP's unsharded root and held outputs brought it to 12 %;
    # the 16-bit Qwen1 loss and compiled losses took p90 from 28.9 % to 23.9 %; DeepSpeed's
    # gradient buckets sized by reduce_bucket_size, not by what trains, to 23.7 % and 11.7 %;
    # FSDP1's held layer-input gradients (frozen units, reentrant checkpointing) to 23.2 % and
    # 6.8 %; FSDP's gradient shards cached in the reduce-scatter stream's pool lifted the
    # over-estimated sharded full fine-tunes (torchtitan, torchtune 70B) to p90 23.3 %; without
    # the DeepSpeed prefetch bucket FSDP had been charged, Answer.AI's 7B LoRA at 512 tokens
    # fell to -10.5 %: 19 rows (7.2 %), p90 23.3 %
    head = summarize(report["loro"])
    assert head["median_ape"] <= 0.085, head
    assert head["p90_ape"] <= 0.234, head
    assert head["under_10"] <= 0.072, head
    # no bias: 7.1 %, 19.5 % (the median was 7.6 % while long-sequence over-estimates offset the
    # constant under-estimates; see the report's notes)
    expected = summarize(report["loro"], "err_expected")
    assert expected["median_ape"] <= 0.072 and expected["p90_ape"] <= 0.197, expected
    # every fold's bias was fitted without the held-out source and kept the median cap
    assert all(0.0 <= c[2] <= 0.2 for c in report["loro_constants"].values())


def test_the_fit_reproduces_the_estimator(report) -> None:  # type: ignore[no-untyped-def]
    """The vectorized figures the constants are fitted on equal what estimate() answers."""
    cases = report["cases"][::7]
    p = _parts(cases)
    for reserve, frag in ((0.0, 0.0), (0.13, 1.5), (0.2, 2.0)):
        fast = _estimates(p, np.array(reserve), np.array(frag))
        for c, f in zip(cases, fast, strict=True):
            b = estimate(get_model(c.model), c.setup.model_copy(
                update={"allocator_reserve": reserve, "fragmentation": frag}))  # fmt: skip
            assert f == pytest.approx(b.measured(c.measured_kind), rel=1e-6, abs=64), c.label


def test_shared_rows_that_contradict_their_settings_are_reported_not_used() -> None:
    if not DEFAULT_CSV.exists():
        pytest.skip(f"../shared not present: {DEFAULT_CSV}")
    df = pl.read_csv(DEFAULT_CSV, infer_schema_length=None)
    for i, reason in SHARED_EXCLUDED.items():
        assert "torchtune" in str(df.row(i, named=True)["source"])
        assert row_to_case(i, df.row(i, named=True)) == reason
