"""Per-stage training plans: token budget, sequence length, and the GPU fit of each stage."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.memory.estimate import estimate, max_micro_batch
from pipeline.memory.gpus import get_gpu
from pipeline.memory.models import get_model
from pipeline.training.schedule import batch_rule, schedule, warmup_steps
from schemas.memory import GIB, ModelSpec, TrainingSetup
from schemas.plan import GpuFit, Plan, PlanConfig, StageConfig, StagePlan, TokenStats

_RECOMPUTE_ORDER = ("none", "selective", "full")


def token_stats(lengths: pl.Series) -> TokenStats:
    s = lengths.drop_nulls().cast(pl.Int64)
    if s.len() == 0:
        return TokenStats(rows=0, tokens=0, mean=0.0, p50=0, p90=0, p95=0, p99=0, max=0)

    def q(x: float) -> int:
        return int(math.ceil(s.quantile(x, interpolation="higher") or 0))

    return TokenStats(
        rows=s.len(),
        tokens=int(s.sum()),
        mean=float(s.mean() or 0.0),  # type: ignore[arg-type]
        p50=q(0.5),
        p90=q(0.9),
        p95=q(0.95),
        p99=q(0.99),
        max=int(s.max() or 0),  # type: ignore[arg-type]
    )


def choose_max_seq_len(lengths: pl.Series, quantile: float, multiple: int, cap: int) -> int:
    """The `quantile` of row lengths, rounded up to `multiple`, capped by the model context."""
    s = lengths.drop_nulls()
    top = int(s.quantile(quantile, interpolation="higher") or 1) if s.len() else 1
    rounded = max(multiple, math.ceil(top / multiple) * multiple)
    return min(rounded, cap // multiple * multiple or cap)


def pack_efficiency(lengths: np.ndarray, capacity: int) -> tuple[int, float]:
    """Best-fit-decreasing packing of rows (truncated to `capacity`) into bins of `capacity`.

    Works on the length histogram, so the cost grows with distinct lengths, not rows.
    Returns (bins, real tokens / (bins * capacity)).
    """
    clipped = np.minimum(lengths[lengths > 0], capacity).astype(np.int64)
    if clipped.size == 0:
        return 0, 0.0
    counts = np.bincount(clipped, minlength=capacity + 1)
    open_bins = np.zeros(capacity + 1, dtype=np.int64)  # open_bins[r]: bins with r slots left
    bins = 0
    for length in np.flatnonzero(counts)[::-1]:
        left = int(counts[length])
        while left:
            fitting = np.flatnonzero(open_bins[length:])
            if fitting.size == 0:  # open new bins, each taking as many of these rows as fit
                per_bin = capacity // length
                full, rest = divmod(left, per_bin)
                open_bins[capacity - per_bin * length] += full
                if rest:
                    open_bins[capacity - rest * length] += 1
                bins += full + (1 if rest else 0)
                break
            room = length + int(fitting[0])  # the tightest bin that still fits
            take = min(left, int(open_bins[room]))
            open_bins[room] -= take
            open_bins[room - length] += take
            left -= take
    return bins, float(clipped.sum()) / (bins * capacity)


def _setup(stage: StageConfig, seq_len: int, devices: int, recompute: str) -> TrainingSetup:
    return TrainingSetup(
        method=stage.method,
        precision=stage.precision,
        optimizer=stage.optimizer,
        attention=stage.attention,
        loss=stage.loss,
        lora_rank=stage.lora_rank,
        lora_targets=stage.lora_targets,
        packing=stage.packing,
        seq_len=seq_len,
        recompute=recompute,  # type: ignore[arg-type]
        dp=devices,
        zero=stage.multi_gpu_zero if devices > 1 else 0,  # type: ignore[arg-type]
    )


def _no_fit(gpu_name: str, devices: int, memory_gib: float) -> GpuFit:
    return GpuFit(
        gpu=gpu_name,
        devices=devices,
        memory_gib=round(memory_gib, 2),
        fits=False,
        recompute="full",
        recompute_needed=True,
        micro_batch=0,
        max_micro_batch=0,
        micro_batch_full_recompute=0,
        grad_accum_steps=None,
        tokens_per_step=None,
        steps_per_epoch=None,
        total_steps=None,
        warmup_steps=None,
        peak_gib=None,
        plan_with_gib=None,
    )


def fit_gpu(
    model: ModelSpec, stage: StageConfig, sp: StagePlan, gpu_name: str, headroom: float
) -> GpuFit:
    """The least recomputation that fits, its largest micro-batch, and from the stage's target
    tokens per step (`sp.batch`) the micro-batch and accumulation actually used.

    micro_batch = min(largest that fits, ceil(target / (seq x devices))) and accumulation =
    ceil(target / (micro_batch x seq x devices)). Fits are decided on the conservative
    plan-with figure (expected total plus the margin of its regime)."""
    gpu, seq = get_gpu(gpu_name), sp.max_seq_len
    target = sp.batch.target_tokens_per_step
    wanted = max(1, math.ceil(target / (seq * gpu.count)))

    def best(recompute: str, accum: int) -> tuple[TrainingSetup, int]:
        s = _setup(stage, seq, gpu.count, recompute).model_copy(update={"grad_accum_steps": accum})
        return s, max_micro_batch(model, s, gpu, headroom)

    def accum_for(mb: int) -> int:
        return max(1, math.ceil(target / (mb * seq * gpu.count)))

    chosen, setup, largest = "full", None, 0
    for mode in _RECOMPUTE_ORDER:
        setup, largest = best(mode, 1)
        if largest and accum_for(min(largest, wanted)) > 1:  # gradients live during forward
            setup, largest = best(mode, 2)
        if largest:
            chosen = mode
            break
    if not largest or setup is None:
        return _no_fit(gpu.name, gpu.count, gpu.memory_gib)
    mb = min(largest, wanted)
    accum = accum_for(mb)
    _, mb_full = best("full", 2 if accum > 1 else 1)
    peak = estimate(model, setup.model_copy(update={"micro_batch": mb, "grad_accum_steps": accum}))
    tokens = mb * seq * gpu.count * accum
    steps = math.ceil(sp.sequences_per_epoch * seq / tokens)  # 0 for a stage without rows
    total = steps * sp.schedule.epochs
    return GpuFit(
        gpu=gpu.name,
        devices=gpu.count,
        memory_gib=round(gpu.memory_gib, 2),
        fits=True,
        recompute=chosen,
        recompute_needed=chosen != "none",
        micro_batch=mb,
        max_micro_batch=largest,
        micro_batch_full_recompute=mb_full,
        grad_accum_steps=accum,
        tokens_per_step=tokens,
        steps_per_epoch=steps,
        total_steps=total,
        warmup_steps=warmup_steps(total, sp.schedule),
        peak_gib=round(peak.total_bytes / GIB, 2),
        plan_with_gib=round(peak.plan_with_bytes / GIB, 2),
    )


def plan_stage(lengths: pl.Series, stage: StageConfig, cfg: PlanConfig) -> StagePlan:
    """The stage's token statistics, sequence length, batch rule, schedule and GPU fits."""
    if stage.share < 1.0 and lengths.len():
        n = max(1, round(lengths.len() * stage.share))
        lengths = lengths.sample(n=n, seed=cfg.seed)
    lengths = lengths.drop_nulls().cast(pl.Int64)
    model = get_model(stage.model)
    seq = choose_max_seq_len(lengths, stage.quantile, cfg.seq_multiple, model.max_context)
    arr = lengths.to_numpy()
    over = arr > seq
    total = int(arr.sum())
    if stage.packing:
        sequences, efficiency = pack_efficiency(arr, seq)
    else:  # rows padded to max_seq_len
        sequences = int(arr.size)
        efficiency = float(np.minimum(arr, seq).sum()) / (arr.size * seq) if arr.size else 0.0
    sp = StagePlan(
        name=stage.name,
        corpus=stage.corpus,
        model=model.name,
        method=stage.method,
        share=stage.share,
        stats=token_stats(lengths),
        quantile=stage.quantile,
        max_seq_len=seq,
        truncation_rate=float(over.mean()) if arr.size else 0.0,
        truncated_token_rate=float((arr[over] - seq).sum()) / total if total else 0.0,
        packing=stage.packing,
        packing_efficiency=round(efficiency, 4),
        sequences_per_epoch=sequences,
        batch=batch_rule(sequences, seq, stage),
        schedule=schedule(stage),
        gpus=[],
    )
    sp.gpus = [fit_gpu(model, stage, sp, g, cfg.headroom) for g in stage.gpus]
    return sp


def plan_stages(lengths: dict[str, pl.Series], cfg: PlanConfig) -> Plan:
    """One StagePlan per configured stage whose corpus is present in `lengths`."""
    missing = [s.corpus for s in cfg.stages if s.corpus not in lengths]
    if missing:
        raise ValueError(f"no token lengths for corpus {missing}; have {sorted(lengths)}")
    return Plan(
        headroom=cfg.headroom,
        stages=[plan_stage(lengths[s.corpus], s, cfg) for s in cfg.stages],
    )


def write_plan(plan: Plan, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(plan.model_dump_json(indent=2), encoding="utf-8")
    return path


def plan_table_rows(plan: Plan) -> list[dict[str, object]]:
    """One row per (stage, GPU) for a Prefect table artifact."""
    rows: list[dict[str, object]] = []
    for st in plan.stages:
        for g in st.gpus:
            rows.append(
                {
                    "stage": st.name,
                    "corpus": st.corpus,
                    "model": st.model,
                    "method": st.method,
                    "rows": st.stats.rows,
                    "p50": st.stats.p50,
                    "p95": st.stats.p95,
                    "p99": st.stats.p99,
                    "max": st.stats.max,
                    "max_seq_len": st.max_seq_len,
                    "truncated_%": round(100 * st.truncation_rate, 2),
                    "packing_eff_%": round(100 * st.packing_efficiency, 1),
                    "gpu": g.gpu,
                    "fits": g.fits,
                    "micro_batch": g.micro_batch,
                    "recompute": g.recompute,
                    "grad_accum": g.grad_accum_steps,
                    "tokens_per_step": g.tokens_per_step,
                    "steps_per_epoch": g.steps_per_epoch,
                    "epochs": st.schedule.epochs,
                    "learning_rate": st.schedule.learning_rate,
                    "expected_gib": g.peak_gib,
                    "plan_with_gib": g.plan_with_gib,
                }
            )
    return rows


def plan_snapshot(
    sft: pl.DataFrame,
    pretrain: pl.DataFrame | None,
    cfg: PlanConfig,
    tools: pl.DataFrame | None = None,
) -> Plan:
    """The plan for what a snapshot publishes: SFT rows by tier (`tier`, `n_tokens`), the
    pretraining chunks and the tool-use samples (`n_tokens`), absent corpora as empty."""
    empty = pl.Series("n_tokens", [], pl.Int32)
    lengths = {
        f"tier_{tier}": sft.filter(pl.col("tier") == tier)["n_tokens"] for tier in ("A", "B", "C")
    }
    lengths["pretrain"] = pretrain["n_tokens"] if pretrain is not None else empty
    lengths["sft_tools"] = tools["n_tokens"] if tools is not None else empty
    return plan_stages(lengths, cfg)
