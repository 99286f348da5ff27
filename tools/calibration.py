"""Compare the estimator with published measured peaks; a development tool (reads ../shared).

Rows come from ../shared/reference/measured_memory_calibration.csv and the project's
data/measured_memory_peaks.csv (with citation URL, measured quantity, stack and caveats per row).
Each row becomes estimator inputs by fixed rules (below); nothing is fitted per row. The
estimate is compared with what the source measured: `torch.cuda.max_memory_allocated`,
`max_memory_reserved`, or the device total (nvidia-smi style, or unstated). The two allocator
constants are fitted here, and every repository group (tools/calibration_sources.py: a
document's repository joined with the harness it names) is also estimated with constants
fitted without it (leave-one-repository-out). Regenerate the report and the plan margins with

    python -m tools.calibration --out docs/calibration.md --write-margins
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.memory.breakdown import regime
from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from schemas.memory import ALL_LINEAR, GIB, HEADLINE_BIAS, TrainingSetup
from tools.calibration_sources import (
    OWN_CSV,
    check_frozen,
    check_own_rows,
    repository_groups,
    source_key,
)

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CSV = REPO.parent / "shared" / "reference" / "measured_memory_calibration.csv"
ASSUMED_UNPACKED_LEN = 1024  # longest batch of unpacked alpaca rows when the source gives none
MEDIAN_APE_LIMIT = 0.15


@dataclass
class CalibrationCase:
    row: int  # 0-based data row of the CSV
    source: str
    label: str  # model / method / seq / batch, for the table
    regime: str
    model: str
    setup: TrainingSetup
    measured_bytes: float  # per device
    measured_kind: str  # allocated | reserved | device
    assumptions: list[str] = field(default_factory=list)
    file: str = "shared"  # which CSV: the shared reference, the project's data/ file, or own
    document: str = ""  # the row's source column as written
    group: str = ""  # its repository group (tools.calibration_sources), set by `run`


def _model_name(raw: str) -> str:
    name = raw.lower()
    for suffix in ("-chat-int4", "-instruct", "-chat", "-int4"):
        name = name.removesuffix(suffix)
    return name.replace("-v0.2", "")


def _lora_targets(text: str) -> tuple[str, ...] | None:
    t = text.lower()
    if "all linear" in t or "all-linear" in t or "target all" in t or "c_attn" in t:
        return ALL_LINEAR
    if "all layers" in t:
        return ALL_LINEAR
    mlp = ("gate_proj", "up_proj", "down_proj") if "mlp" in t else ()
    for pattern, attn in (
        ("q,k,v,o", ("q_proj", "k_proj", "v_proj", "o_proj")),
        ("q,v,output_proj", ("q_proj", "v_proj", "o_proj")),
        ("q,k,v", ("q_proj", "k_proj", "v_proj")),
        ("q,v", ("q_proj", "v_proj")),
    ):
        if pattern in t:
            return attn + mlp
    return None


def _unit_bytes(value: float, unit: str, n_gpus: int) -> float:
    if unit == "GiB":
        return value * GIB
    if unit == "GB":
        return value * 1e9
    if unit == "GB_sum_all_gpus":
        return value * 1e9 / n_gpus
    raise ValueError(f"unknown unit {unit!r}")


def _measured_kind(source: str) -> str:
    if "Active" in source or "max_memory_allocated" in source:
        return "allocated"
    if "torchtitan" in source or "torchtune" in source:
        return "reserved"
    return "device"


# Rows of the shared CSV (read-only, so no `use` column) whose published figure its own stated
# settings rule out: the reason is printed under "Rows not used" in the report.
SHARED_EXCLUDED: dict[int, str] = {
    20: (
        "torchtune 2024-05 Llama-2-7B LoRA, 16.2 GB/GPU with 4 x 2048 tokens and no activation "
        "checkpointing: the q/k/v and gate/up/SiLU outputs alone that every layer keeps "
        "(at least 90 kB per token per layer) come to 32 x 8192 x 90 kB = 23.6 GB"
    ),
    23: (
        "torchtune 2024-05 Llama-2-70B LoRA, 26.4 GB/GPU: the bf16 weight shard (69B x 2 B / 8 "
        "= 17.2 GB) plus the checkpointed layer inputs (80 x 16384 tokens x 8192 x 2 B = 21.5 GB)"
        " already exceed it"
    ),
}


def row_to_case(i: int, r: dict[str, object], file: str = "shared") -> CalibrationCase | str:
    """Estimator inputs for one CSV row, or the reason it cannot be used."""
    if file == "shared" and i in SHARED_EXCLUDED:
        return SHARED_EXCLUDED[i]
    if r["n_gpus"] is None:
        return "number of GPUs and ZeRO stage not stated"
    n_gpus = int(r["n_gpus"])  # type: ignore[call-overload]
    use = str(r.get("use") or "yes")
    if not use.startswith("yes"):
        return use.removeprefix("no: ")
    assumptions: list[str] = []
    kw = _setup_kwargs(r, n_gpus, assumptions)
    if isinstance(kw, str):
        return kw
    setup = TrainingSetup(**kw)  # type: ignore[arg-type]
    source, method_raw = str(r["source"]), str(r["method"])
    label = f"{r['model']} {method_raw.split(' (')[0]} s={r['seq_len']} b={r['micro_batch']}"
    return CalibrationCase(
        row=i,
        source=source_key(source),
        label=label,
        regime=regime(setup),
        model=_model_name(str(r["model"])),
        setup=setup,
        measured_bytes=_unit_bytes(float(r["peak_mem_gb"]), str(r["unit"]), n_gpus),  # type: ignore[arg-type]
        measured_kind=str(r.get("measured") or _measured_kind(source)),
        assumptions=assumptions,
        file=file,
        document=source,
        group=source_key(source),
    )


def _setup_kwargs(
    r: dict[str, object], n_gpus: int, assumptions: list[str]
) -> dict[str, object] | str:
    """TrainingSetup fields of a row, column family by column family (each parser appends
    what it had to assume), or why the row cannot be used."""
    source, notes = str(r["source"]), str(r["notes"] or "")
    method_raw, opt = str(r["method"]), str(r["optimizer"]).lower()
    torchtune = "torchtune" in source
    kw = _method_kwargs(method_raw, str(r["precision"]))
    kw["precision"] = _precision(str(r["precision"]), torchtune)
    kw |= _optimizer_kwargs(opt, source, str(r["zero_or_fsdp"]))
    kw |= _batch_kwargs(r, notes, assumptions)
    if kw["method"] != "inference":
        kw |= _recompute_kwargs(str(r["grad_ckpt"]).lower(), source, assumptions)
    kw["attention"] = _attention(notes, torchtune, r.get("stack"))
    kw |= _loss_kwargs(notes, source, torchtune, kw.get("recompute"))
    hidden = get_model(_model_name(str(r["model"]))).hidden_size
    sharding = _sharding_kwargs(str(r["zero_or_fsdp"]), opt, n_gpus, notes, source, hidden)
    if isinstance(sharding, str):
        return sharding
    kw |= sharding
    if kw["deepspeed"] and kw["method"] == "full":
        kw["fp32_grad_accum"] = True  # DeepSpeed keeps fp32 gradient partitions
    kw |= _pipeline_micro_batches(kw, notes, assumptions)
    if kw["method"] in ("lora", "qlora"):
        kw |= _lora_kwargs(r, method_raw, torchtune, assumptions)
    kw |= _stack_kwargs(r, source, assumptions)
    return kw


def _method_kwargs(method_raw: str, prec: str) -> dict[str, object]:
    """Method and quantized base, from the method and precision columns."""
    kw: dict[str, object] = {}
    if method_raw == "inference":
        kw["method"] = "inference"
        if "int4" in prec.lower():
            kw["quantization"] = "gptq_int4"
        elif "nf4" in prec.lower():
            kw["quantization"] = "nf4"
            kw["double_quant"] = "double quant" in prec.lower()
    elif method_raw.startswith("QLoRA"):
        kw["method"] = "qlora"
        if "GPTQ" in method_raw:
            kw["quantization"] = "gptq_int4"
        kw["double_quant"] = "no double quant" not in method_raw
    elif method_raw.startswith("LoRA"):
        kw["method"] = "lora"
        kw["train_embeddings"] = "embedding" in method_raw
        if "int8" in method_raw:
            kw["quantization"] = "gptq_int8" if "GPTQ" in method_raw else "int8"
    else:
        kw["method"] = "full"
    return kw


def _precision(prec: str, torchtune: bool) -> str:
    """torchtune's recipes train in pure bf16."""
    p = prec.lower()
    if "float8" in p or "fp8" in p:
        return "fp8"
    if "pure" in p or torchtune:
        return "bf16"
    return "bf16_mixed"


def _optimizer_kwargs(opt: str, source: str, zero_raw: str) -> dict[str, object]:
    kw: dict[str, object] = {}
    if "8bit" in opt or "8-bit" in opt:
        kw["optimizer"] = "paged_adamw_8bit" if "paged" in opt else "adamw_8bit"
    elif "paged" in opt:
        kw["optimizer"] = "paged_adamw"
    kw["optimizer_in_backward"] = "in_bwd" in opt or "into backward" in opt
    # torchtitan and DeepSpeed step with fused Adam kernels; torch's default is foreach
    kw["optimizer_fused"] = (
        "fused" in opt or "torchtitan" in source or "deepspeed" in zero_raw.lower()
    )
    return kw


def _batch_kwargs(r: dict[str, object], notes: str, assumptions: list[str]) -> dict[str, object]:
    """Sequence length, micro-batch, gradient accumulation and packing."""
    seq = r["seq_len"]
    if seq is None or "unpacked" in f"{r['packing']} {notes}".lower():
        seq = min(int(seq or ASSUMED_UNPACKED_LEN), ASSUMED_UNPACKED_LEN)  # type: ignore[call-overload]
        assumptions.append(f"unpacked variable-length rows: longest batch taken as {seq} tokens")
    ga = re.search(r"grad accum (\d+)", notes)
    return {
        "seq_len": int(seq),  # type: ignore[call-overload]
        "micro_batch": int(r["micro_batch"]),  # type: ignore[call-overload]
        "grad_accum_steps": int(ga.group(1)) if ga else 1,
        "packing": str(r["packing"]).lower().startswith("yes"),
    }


def _recompute_kwargs(ckpt: str, source: str, assumptions: list[str]) -> dict[str, object]:
    """Activation checkpointing, from the grad_ckpt column."""
    kw: dict[str, object] = {}
    if ckpt.startswith("off"):
        kw["recompute"] = "none"
    elif ckpt.startswith("selective"):
        kw["recompute"] = "selective_op"
    else:
        kw["recompute"] = "full"
        if ckpt.startswith("not stated"):
            assumptions.append("activation checkpointing not stated: taken as on")
    kw["activation_offload"] = "offload" in ckpt
    # Answer.AI's train.py applies torch's checkpoint_wrapper inside the FSDP units
    # (apply_activation_checkpointing), whatever its --reentrant_checkpointing says
    kw["hf_reentrant_checkpointing"] = not (
        "use_reentrant false" in ckpt or "fsdp_qlora" in source.lower()
    )
    return kw


def _attention(notes: str, torchtune: bool, stack: object) -> str:
    if "attention: eager" in notes:
        return "eager"
    if stack == "lightning":  # LitGPT calls sdpa with K/V expanded to every head
        return "sdpa"
    return "sdpa" if torchtune or "attn_implementation=sdpa" in notes else "flash"


def _loss_kwargs(notes: str, source: str, torchtune: bool, recompute: object) -> dict[str, object]:
    """Loss implementation and whether it runs compiled."""
    flags_table = "Optimization flags" in source
    chunked = (
        "chunked" in notes.lower()
        or "30b8519e8" in source  # 2024-09 README table: llama3_1 configs use chunked CE
        or (flags_table and recompute == "full")  # cumulative flags after chunked CE
    )
    # torch.compile as stated (in the flags table it precedes chunked CE, cumulatively; the
    # trainy-whitefiber document runs every row with --training.compile). It compiles the loss
    # too only where the framework did at the source's date (LOSS_COMPILED_SINCE).
    compiled = (
        bool(re.search(r"(?<!no )\bcompile\b", notes))
        or (flags_table and chunked)
        or "trainy-whitefiber" in source
    )
    since = next((v for k, v in LOSS_COMPILED_SINCE.items() if k in source), None)
    dated = _source_month(source)
    # torchtune's training.compile_loss compiles CEWithChunkedOutputLoss in place but returns a
    # compiled copy of any other loss, which its recipes discard: only chunked CE runs compiled.
    compiled_loss = compiled and (chunked or not torchtune)
    return {
        "loss": "chunked" if chunked else "standard",
        "compile_loss": compiled_loss and since is not None and (dated is None or dated >= since),
    }


def _sharding_kwargs(
    zero_raw: str, opt: str, n_gpus: int, notes: str, source: str, hidden: int
) -> dict[str, object] | str:
    """ZeRO stage, DP/TP/PP degrees, CPU offload and DeepSpeed, from the zero_or_fsdp column."""
    z = zero_raw.lower()
    tp = int(m.group(1)) if (m := re.search(r"tp (\d+)", z)) else 1
    pp = int(m.group(1)) if (m := re.search(r"pp (\d+)", z)) else 1
    kw: dict[str, object] = {}
    if "zero-3" in z or "fsdp" in z or "full shard" in z:
        kw["zero"] = 3
    elif "zero-2" in z:
        kw["zero"] = 2
    elif z != "none":
        return f"sharding not understood: {zero_raw}"
    kw.update(tp=tp, pp=pp, dp=max(n_gpus // (tp * pp), 1))
    if "cpu offload" in z or "on cpu" in opt:
        kw["offload"] = "all"
    kw["deepspeed"] = "deepspeed" in z
    if kw["deepspeed"]:
        kw |= _deepspeed_buckets(notes, source, kw.get("zero"), hidden)
    return kw


def _deepspeed_buckets(notes: str, source: str, zero: object, hidden: int) -> dict[str, object]:
    """DeepSpeed bucket settings: as stated, else the framework's shipped config for the stage
    (HF's "auto": reduce hidden^2, ZeRO-3 prefetch 0.9 hidden^2), else DeepSpeed's defaults."""
    reduce, overlap_on, prefetch = DEEPSPEED_CONFIGS.get((source_key(source), zero), DS_DEFAULTS)
    if reduce == "auto":
        reduce, prefetch = hidden * hidden, int(0.9 * hidden * hidden)
    bucket = re.search(r"reduce_bucket_size[ =:]*(\d+(?:\.\d+)?e\d+)", notes)
    overlap = re.search(r"overlap_comm[ =:]*(true|false)", notes, re.IGNORECASE)
    return {
        "reduce_bucket_elements": float(bucket.group(1)) if bucket else float(reduce),
        "overlap_comm": overlap.group(1).lower() == "true" if overlap else overlap_on,
        "prefetch_bucket_elements": float(prefetch),
    }


def _pipeline_micro_batches(
    kw: dict[str, object], notes: str, assumptions: list[str]
) -> dict[str, object]:
    """A local batch the source splits into pp pipeline micro-batches."""
    pp = int(kw["pp"])  # type: ignore[call-overload]
    if not (pp > 1 and "split into pp microbatches" in notes.lower()):
        return {}
    assumptions.append(f"local batch split into {pp} pipeline micro-batches")
    return {"micro_batch": max(int(kw["micro_batch"]) // pp, 1), "grad_accum_steps": pp}  # type: ignore[call-overload]


def _lora_kwargs(
    r: dict[str, object], method_raw: str, torchtune: bool, assumptions: list[str]
) -> dict[str, object]:
    """Adapter targets, rank and dropout, from the notes (else the method column)."""
    notes, source = str(r["notes"] or ""), str(r["source"])
    targets = _lora_targets(notes) or _lora_targets(method_raw)
    if targets is None:
        targets = ("q_proj", "v_proj")
        assumptions.append("LoRA targets not stated: q,v")
    rank = re.search(r"\br=(\d+)", notes)
    # as stated; else torchtune and LLaMA-Factory default to 0, Qwen's finetune.py and swift
    # to 0.05
    drop = re.search(r"dropout[ =:]*(0(?:\.\d+)?)\b", notes)
    default = 0.0 if torchtune or "llama-factory" in source.lower() else 0.05
    kw: dict[str, object] = {
        "lora_targets": targets,
        "lora_rank": int(rank.group(1)) if rank else 8,
        "lora_dropout": float(drop.group(1)) if drop else default,
    }
    if "no fp32 upcast" in f"{notes} {r.get('caveats') or ''}":
        kw["kbit_upcast"] = False  # the trainer prepares the 4-bit base without the upcast
    return kw


def _stack_kwargs(r: dict[str, object], source: str, assumptions: list[str]) -> dict[str, object]:
    """Training stack, whether the loop holds the model output, and varying batch shapes."""
    caveats = str(r.get("caveats") or "")
    variable = r.get("variable_length")
    return {
        "output_held": "holds the model output through backward" in caveats,
        "stack": r.get("stack")
        or next((k for k in ("torchtune", "torchtitan") if k in source), "hf"),
        "variable_length": (
            str(variable).startswith("yes")
            if variable
            else any("unpacked" in a for a in assumptions)
        ),
    }


# DeepSpeed (reduce_bucket_size, overlap_comm, stage3_prefetch_bucket_size) of the config a
# framework's scripts pass, by ZeRO stage, when a row does not state them: Qwen1's
# finetune/ds_config_zero2.json (2e8, true) and ds_config_zero3.json ("auto", true, "auto":
# HF fills hidden^2 and 0.9 hidden^2); else DeepSpeed's defaults (5e8, false, 5e7).
DEEPSPEED_CONFIGS: dict[tuple[str, object], tuple[float | str, bool, float | str]] = {
    ("qwenlm/qwen", 2): (2e8, True, 5e7),
    ("qwenlm/qwen", 3): ("auto", True, "auto"),
}
DS_DEFAULTS: tuple[float | str, bool, float | str] = (5e8, False, 5e7)


# Since when a framework's compile option also compiles the loss (year, month the change merged):
# torchtune's chunked-CE PR #1390 (2024-08) compiles the upcast with the chunked loss
# (training.compile_loss); torchtitan's PR #1033 (2025-04) builds the loss with torch.compile
# under --training.compile, where its 2024 train.py had it commented out ("compiling loss
# function causes CUDA errors").
LOSS_COMPILED_SINCE: dict[str, tuple[int, int]] = {"torchtune": (2024, 9), "torchtitan": (2025, 4)}


def _source_month(source: str) -> tuple[int, int] | None:
    """(year, month) a source was published, from a date (2024-09-24) or a file name (_202506_)."""
    m = re.search(r"\b(20\d\d)-(\d\d)-\d\d\b", source) or re.search(r"_(20\d\d)(\d\d)_", source)
    return (int(m.group(1)), int(m.group(2))) if m else None


PROJECT_CSV = REPO / "data" / "measured_memory_peaks.csv"
MARGINS_PY = REPO / "pipeline" / "memory" / "margins.py"
LORO_MEDIAN_LIMIT = 0.15
RESERVE_GRID = np.round(np.arange(0.0, 0.2001, 0.01), 3)
FRAGMENTATION_GRID = np.round(np.arange(0.0, 2.0001, 0.05), 3)
MIN_REGIME_ROWS = 5  # fewer rows than this: the regime plans with the overall margin
UNDER_WEIGHT = 3.0  # an under-estimate (an OOM) costs this many over-estimates of the same size
BIAS_GRID = np.round(np.arange(0.0, 0.2001, 0.01), 3)
UNDER_SHARE = 0.05  # the headline bias leaves at most this share under-estimated by >10 %
BIAS_MEDIAN_CAP = 0.09  # ... unless that lifts the median error of the fitted rows above this


def load_cases(
    csv_path: Path = DEFAULT_CSV,
) -> tuple[list[CalibrationCase], list[tuple[str, int, str]]]:
    """Cases of one CSV, and (file, row, reason) for the rows that cannot be used."""
    df = pl.read_csv(csv_path, infer_schema_length=None)
    file = _file_kind(csv_path)
    if file == "own":
        check_own_rows(df)
    else:
        check_frozen(df, file)
    cases: list[CalibrationCase] = []
    skipped: list[tuple[str, int, str]] = []
    for i, r in enumerate(df.iter_rows(named=True)):
        out = row_to_case(i, r, file)
        if isinstance(out, str):
            skipped.append((file, i, out))
        else:
            cases.append(out)
    return cases, skipped


def _file_kind(csv_path: Path) -> str:
    """shared / project (the frozen published set) or own (the project's GPU measurements)."""
    frozen = {DEFAULT_CSV.resolve(): "shared", PROJECT_CSV.resolve(): "project"}
    return frozen.get(csv_path.resolve(), "own")


def _with(c: CalibrationCase, reserve: float, frag: float) -> TrainingSetup:
    return c.setup.model_copy(update={"allocator_reserve": reserve, "fragmentation": frag})


Constants = tuple[float, float, float]  # allocator reserve, fragmentation, headline bias


def evaluate(
    cases: list[CalibrationCase], constants: dict[str, Constants] | None = None
) -> pl.DataFrame:
    """One row per case: measured GiB, the headline GiB (`cnc-corpus estimate --measure KIND`,
    JSON `total_gib`), the expected (unbiased) GiB, and their signed and absolute errors.

    `constants` maps a repository group to the (reserve, fragmentation, bias) to estimate its
    rows with; the shipped defaults otherwise."""
    recs = []
    for c in cases:
        setup, bias = c.setup, HEADLINE_BIAS
        if constants is not None:
            reserve, frag, bias = constants[c.group]
            setup = _with(c, reserve, frag)
        b = estimate(get_model(c.model), setup)
        kind = c.measured_kind
        recs.append(
            {
                "file": c.file,
                "row": c.row,
                "source": c.source,
                "group": c.group,
                "case": c.label,
                "regime": c.regime,
                "kind": kind,
                "measured_gib": c.measured_bytes / GIB,
                "estimated_gib": b.headline(kind, bias) / GIB,  # type: ignore[arg-type]
                "expected_gib": b.measured(kind) / GIB,  # type: ignore[arg-type]
                "default_gib": b.headline("reserved", bias) / GIB,
                "peak_phase": b.peak_phase,
                "assumptions": "; ".join(c.assumptions),
            }
        )
    df = pl.DataFrame(recs)
    m = pl.col("measured_gib")
    return df.with_columns(
        err=pl.col("estimated_gib") / m - 1.0,
        err_expected=pl.col("expected_gib") / m - 1.0,
        err_default=pl.col("default_gib") / m - 1.0,
    ).with_columns(ape=pl.col("err").abs())


@dataclass
class _Parts:
    """Per case, what the estimate is made of with both allocator constants at zero."""

    allocated: np.ndarray  # (cases, phases): allocated at each moment of the step
    dynamic: np.ndarray  # (cases, phases): allocated and freed within the step
    shaped: np.ndarray  # (cases, phases): loss buffers, when batch shapes vary; else 0
    pool: np.ndarray  # (cases, phases): other streams' cached pools (reserved, not allocated)
    fixed: np.ndarray  # (cases,): context, NCCL, paged optimizer states
    measured: np.ndarray
    kind: np.ndarray  # 0 allocated, 1 reserved, 2 device


def _parts(cases: list[CalibrationCase]) -> _Parts:
    n, width = len(cases), 3
    alloc = np.full((n, width), -np.inf)
    dyn, shaped, pool = np.zeros((n, width)), np.zeros((n, width)), np.zeros((n, width))
    fixed, meas, kind = np.zeros(n), np.zeros(n), np.zeros(n, dtype=int)
    for i, c in enumerate(cases):
        b = estimate(get_model(c.model), _with(c, 0.0, 0.0))
        for j, (a, d, sh, po) in enumerate(b.phase_parts.values()):
            alloc[i, j], dyn[i, j], shaped[i, j] = a, d, sh * b.variable_length
            pool[i, j] = po
        fixed[i] = b.context + b.paged_optimizer
        meas[i] = c.measured_bytes
        kind[i] = ("allocated", "reserved", "device").index(c.measured_kind)
    return _Parts(alloc, dyn, shaped, pool, fixed, meas, kind)


def _estimates(p: _Parts, reserve: np.ndarray, frag: np.ndarray) -> np.ndarray:
    """The estimator's figure for each case's measured kind, for every (reserve, frag) pair
    (broadcast leading axes): the peak moment is the one with the most allocated + reserve;
    what is reserved then is the most any moment reserves, other streams' pools counted."""
    res = p.dynamic * reserve[..., None, None] + p.shaped * frag[..., None, None]
    reserved = p.allocated + res
    peak = np.argmax(reserved, axis=-1)[..., None]
    a = np.take_along_axis(np.broadcast_to(p.allocated, reserved.shape), peak, -1)[..., 0]
    r = np.max(reserved + p.pool, axis=-1)  # the cache never shrinks (breakdown.py)
    return np.select([p.kind == 0, p.kind == 1], [a, r], r + p.fixed)


def _loss(est: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Asymmetric log error, capped: under-estimates (what OOMs) weigh UNDER_WEIGHT times more."""
    r = np.log(est / measured)
    return np.minimum(np.where(r < 0, -UNDER_WEIGHT * r, r), 1.0).mean(axis=-1)


def fit_constants(cases: list[CalibrationCase]) -> Constants:
    """The (allocator reserve, fragmentation) on the grids that minimize `_loss` over `cases`,
    then the headline bias on BIAS_GRID: the smallest that leaves at most UNDER_SHARE of them
    under-estimated by more than 10 %, but no larger than keeps their median error within
    BIAS_MEDIAN_CAP (the bias may not buy safety with the typical case's accuracy)."""
    p = _parts(cases)
    est = _estimates(p, RESERVE_GRID[:, None], FRAGMENTATION_GRID[None, :])
    loss = _loss(est, p.measured)
    i, j = np.unravel_index(np.argmin(loss), loss.shape)
    ratio = est[i, j] / p.measured
    lifted = ratio[None, :] * (1.0 + BIAS_GRID[:, None])
    under_ok = (lifted < 0.9).mean(axis=1) <= UNDER_SHARE
    median_ok = np.median(np.abs(lifted - 1.0), axis=1) <= BIAS_MEDIAN_CAP
    safe = BIAS_GRID[np.argmax(under_ok)] if under_ok.any() else BIAS_GRID[-1]
    bias = min(safe, BIAS_GRID[median_ok].max(initial=0.0))
    return float(RESERVE_GRID[i]), float(FRAGMENTATION_GRID[j]), float(bias)


def leave_one_repository_out(
    cases: list[CalibrationCase],
) -> tuple[pl.DataFrame, dict[str, Constants]]:
    """Each repository group's rows estimated with constants fitted on the other groups only."""
    constants: dict[str, Constants] = {}
    for g in sorted({c.group for c in cases}):
        constants[g] = fit_constants([c for c in cases if c.group != g])
    return evaluate(cases, constants), constants


def held_out_plan(cases: list[CalibrationCase], loro: pl.DataFrame) -> pl.DataFrame:
    """`loro` with each group's plan figure: its expected figure times (1 + the margin of its
    regime), the margins derived as shipped (`plan_margins` of a leave-one-repository-out run)
    from the other groups alone, so nothing the plan uses has seen the held-out repository."""
    parts = []
    for g in sorted({c.group for c in cases}):
        inner, _ = leave_one_repository_out([c for c in cases if c.group != g])
        by_reg, overall = plan_margins(inner)
        rows = loro.filter(pl.col("group") == g)
        margin = rows["regime"].replace_strict(by_reg, default=overall, return_dtype=pl.Float64)
        parts.append(rows.with_columns(plan_gib=pl.col("expected_gib") * (1.0 + margin)))
    return pl.concat(parts).with_columns(plan_below=pl.col("plan_gib") < pl.col("measured_gib"))


def summarize(df: pl.DataFrame, col: str = "err") -> dict[str, float]:
    """`err`: the headline; `err_expected`: without the bias; `err_default`: the headline a
    user who does not say what the source measured gets (`--measure reserved`)."""
    e = df[col]
    return {
        "n": float(df.height),
        "median_ape": float(e.abs().median()),  # type: ignore[arg-type]
        "p90_ape": float(e.abs().quantile(0.9, interpolation="linear")),  # type: ignore[arg-type]
        "median_signed": float(e.median()),  # type: ignore[arg-type]
        "under_10": float((e < -0.10).mean()),  # type: ignore[arg-type]
    }


def by_group(df: pl.DataFrame, key: str, col: str = "err") -> pl.DataFrame:
    """Median and p90 absolute error, median signed error and share under by >10 % per `key`."""
    e = pl.col(col)
    return (
        df.group_by(key)
        .agg(
            n=pl.len(),
            median_ape=e.abs().median(),
            p90_ape=e.abs().quantile(0.9, interpolation="linear"),
            median_signed=e.median(),
            under_10=(e < -0.10).mean(),
        )
        .sort(key)
    )


def by_regime(df: pl.DataFrame, col: str = "err") -> pl.DataFrame:
    return by_group(df, "regime", col)


def _need(err: pl.Series) -> float:
    """Margin that lifts 90 % of these estimates to at least their measured peak."""
    shortfall = (1.0 / (1.0 + err) - 1.0).clip(lower_bound=0.0)
    return math.ceil(100 * float(shortfall.quantile(0.9, interpolation="linear"))) / 100  # type: ignore[arg-type]


def plan_margins(loro: pl.DataFrame) -> tuple[dict[str, float], float]:
    """Per regime with enough rows, and overall: the leave-one-repository-out plan margin."""
    overall = _need(loro["err_expected"])
    margins = {
        str(g["regime"][0]): _need(g["err_expected"])
        for g in loro.partition_by("regime")
        if g.height >= MIN_REGIME_ROWS
    }
    return dict(sorted(margins.items())), overall


def margins_module(margins: dict[str, float], overall: float) -> str:
    lines = [
        '"""Plan margins per regime, generated by `python -m tools.calibration --write-margins`.',
        "",
        "For each regime with at least "
        f"{MIN_REGIME_ROWS} published measurements: the margin that lifts 90 % of its",
        "leave-one-repository-out estimates to at least the measured peak (docs/calibration.md).",
        '"""',
        "",
        f"DEFAULT_PLAN_MARGIN = {overall}",
        "PLAN_MARGINS: dict[str, float] = {",
    ]
    lines += [f'    "{k}": {v},' for k, v in margins.items()]
    return "\n".join(lines + ["}", ""])


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %" if x < 0 else f"{100 * x:.1f} %"


def _table(rows: pl.DataFrame, key: str) -> list[str]:
    out = [
        f"| {key} | rows | median APE | p90 APE | median signed | under by >10 % |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows.iter_rows(named=True):
        out.append(
            f"| {r[key]} | {r['n']} | {100 * r['median_ape']:.1f} % | {100 * r['p90_ape']:.1f} % "
            f"| {_pct(r['median_signed'])} | {100 * r['under_10']:.0f} % |"
        )
    return out


def _headline(name: str, s: dict[str, float]) -> str:
    return (
        f"| {name} | {int(s['n'])} | {100 * s['median_ape']:.1f} % | {100 * s['p90_ape']:.1f} % "
        f"| {_pct(s['median_signed'])} | {100 * s['under_10']:.0f} % |"
    )


def render_markdown(res: dict[str, object], notes: str) -> str:
    """docs/calibration.md from a `run`: method and headline errors, errors by repository and
    regime, the plan margins, `notes`, then every row and the rows not used."""
    df, loro, plan = res["in_sample"], res["loro"], res["plan"]
    lines = _method_lines(res["constants"]) + _headline_lines(df, loro, plan)  # type: ignore[arg-type]
    lines += _breakdown_lines(df, loro, res["loro_constants"], plan)  # type: ignore[arg-type]
    lines += _margin_lines(res["margins"])  # type: ignore[arg-type]
    lines += ["", notes.strip()]
    lines += _row_lines(loro, res["skipped"])  # type: ignore[arg-type]
    return "\n".join(lines) + "\n"


def _method_lines(constants: Constants) -> list[str]:
    """How rows are compared and what is fitted, with the in-sample constants."""
    return [
        "# Calibration of the GPU-memory estimator",
        "",
        "Generated by `python -m tools.calibration --out docs/calibration.md --write-margins` from",
        "`../shared/reference/measured_memory_calibration.csv` and the project's",
        "`data/measured_memory_peaks.csv` (published measured peaks, each with its citation,",
        "settings and caveats; frozen, below), and `data/measured_memory_own.csv` where the",
        "project has measured its own. Each row is turned into estimator inputs by fixed parsing",
        "rules and compared with the quantity its source measured (allocated, reserved, or device",
        "total). The physics has no per-row or per-source factor; the only fitted numbers are",
        "the allocator's reserve and its fragmentation share of the loss buffers when batch",
        f"shapes vary, on the grids {RESERVE_GRID[0]}..{RESERVE_GRID[-1]} and "
        f"{FRAGMENTATION_GRID[0]}..{FRAGMENTATION_GRID[-1]} (physical bounds) to minimize an",
        f"asymmetric error (under-estimates weigh {UNDER_WEIGHT:g}x), and the headline's safety",
        f"bias: the smallest on {BIAS_GRID[0]}..{BIAS_GRID[-1]} that leaves at most "
        f"{100 * UNDER_SHARE:.0f} % of the fitted rows",
        "under-estimated by more than 10 %, capped where their median error would pass "
        f"{100 * BIAS_MEDIAN_CAP:.0f} %.",
        f"In-sample: reserve {constants[0]}, fragmentation {constants[1]}, bias {constants[2]}.",
        "",
        "**The headline** is what `cnc-corpus estimate` prints as PEAK and its JSON `total_gib`:",
        "the figure of `--measure` (default `reserved`, what runs out first) times (1 + bias);",
        "`expected_gib` is the same figure without the bias, `device_gib` the device total.",
        "Each row is evaluated with `--measure` set to what its source measured.",
        "**Leave-one-repository-out** is the figure to quote: every row of one repository",
        "group is estimated with all three constants fitted on the other groups only. A row's",
        "group, from its `source` column (tools/calibration_sources.py): the repository the",
        "document lives in (its first word), joined with the training harness the document",
        "names (QwenLM/Qwen2.5's ms_swift.md and llama-factory examples were measured with",
        "ms-swift and LLaMA-Factory) and a paper's `code: owner/name`; rows sharing any of",
        "these are one group, so all documents of one repository or harness are held out",
        "together. The plan row checks the margins the same way: each group's plan figure uses",
        "margins derived from the other groups alone. The test suite fails if the",
        f"leave-one-repository-out median rises above {100 * LORO_MEDIAN_LIMIT:.0f} %.",
    ]


def _plan_line(name: str, plan: pl.DataFrame) -> str:
    below = plan["plan_below"]
    return (
        f"| {name} | {plan.height} | {100 * float(below.mean()):.0f} % ({int(below.sum())} rows) |"  # type: ignore[arg-type]
    )


def _headline_lines(df: pl.DataFrame, loro: pl.DataFrame, plan: pl.DataFrame) -> list[str]:
    """The overall errors: in-sample and leave-one-repository-out, with and without the bias;
    the share of held-out rows whose plan figure falls below the measured peak."""
    return [
        "",
        "| evaluation | rows | median APE | p90 APE | median signed | under by >10 % |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        _headline("in-sample, headline", summarize(df)),
        _headline("leave-one-repository-out, headline", summarize(loro)),
        _headline("leave-one-repository-out, expected (no bias)", summarize(loro, "err_expected")),
        _headline(
            "leave-one-repository-out, headline at the default --measure reserved",
            summarize(loro, "err_default"),
        ),
        "",
        "| plan figure, margins fitted without the held-out repository | rows | below measured |",
        "| --- | ---: | ---: |",
        _plan_line("leave-one-repository-out, all rows", plan),
    ]


def _breakdown_lines(
    df: pl.DataFrame, loro: pl.DataFrame, loro_constants: dict[str, Constants], plan: pl.DataFrame
) -> list[str]:
    """Errors by repository group (with the constants fitted without it) and by regime."""
    lines = ["", "## Leave-one-repository-out, by repository group", ""]
    lines += _table(by_group(loro, "group"), "group")
    lines += ["", "Constants fitted without each group (reserve, fragmentation, bias):", ""]
    lines += [f"- {k}: {v[0]}, {v[1]}, {v[2]}" for k, v in loro_constants.items()]
    lines += ["", "## Leave-one-repository-out, by regime", ""]
    lines += _table(by_regime(loro), "regime")
    lines += ["", "## Leave-one-repository-out, by regime, expected (no bias)", ""]
    lines += _table(by_regime(loro, "err_expected"), "regime")
    lines += ["", "## Leave-one-repository-out plan figure below measured, by regime", ""]
    lines += ["| regime | rows | below measured |", "| --- | ---: | ---: |"]
    lines += [
        _plan_line(str(g["regime"][0]), g)
        for g in plan.sort("regime").partition_by("regime", maintain_order=True)
    ]
    lines += ["", "## In-sample, by regime", ""]
    lines += _table(by_regime(df), "regime")
    return lines


def _margin_lines(margins: tuple[dict[str, float], float]) -> list[str]:
    by_reg, overall = margins
    lines = [
        "",
        "## Plan margins",
        "",
        "`estimate` and the stage plans decide fits with a conservative *plan with* figure:",
        "the expected device total times (1 + margin), the margin being what lifts 90 % of",
        "the regime's leave-one-repository-out estimates to at least the measured peak (regimes",
        f"with fewer than {MIN_REGIME_ROWS} rows, or none, use the overall {overall:.2f}).",
        "",
        "| regime | margin |",
        "| --- | ---: |",
    ]
    return lines + [f"| {k} | {v:.2f} |" for k, v in by_reg.items()]


def _row_lines(loro: pl.DataFrame, skipped: list[tuple[str, int, str]]) -> list[str]:
    """Every row's leave-one-repository-out estimate, then the rows not used and why."""
    lines = [
        "",
        "## Every row (leave-one-repository-out estimate)",
        "",
        "| file | row | group | case | regime | measured | measured GiB | headline GiB "
        "| error | expected error | notes |",
        "| --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in loro.sort("file", "row", descending=[True, False]).iter_rows(named=True):
        lines.append(
            f"| {r['file']} | {r['row']} | {r['group']} | {r['case']} | {r['regime']} | "
            f"{r['kind']} | {r['measured_gib']:.2f} | {r['estimated_gib']:.2f} | "
            f"{_pct(r['err'])} | {_pct(r['err_expected'])} | {r['assumptions']} |"
        )
    if skipped:
        lines += ["", "## Rows not used", ""]
        lines += [f"- {f} row {i}: {why}" for f, i, why in skipped]
    return lines


NOTES = """
## The frozen set, and adding the project's own measurements

The published measurements are frozen at their current sources:
`data/calibration_sources.csv` lists each source of the two files with its row count and a
digest of its rows, and the tool (and tests/tools/test_calibration_sources.py) refuses a
source, a row or an edit that is not on it. Improve the physics, not the set. New rows come
only from the project's own GPU measurements:

1. On the GPU machine, with torch, transformers, peft and bitsandbytes installed, run
   `python bench/gpu_memory_check.py --models qwen2.5-0.5b --methods LoRA --seq-lens 2048`
   (any preset, method, length; `--dry-run` first prints the estimates without a GPU).
2. It appends one row per setting to `data/measured_memory_own.csv` (created with its header
   when new): the settings in the shared reference's columns, `peak_mem_gb` =
   torch.cuda.max_memory_allocated, reserved in the notes, `command` = the command line that
   measured it and `environment` = Python, torch, CUDA, transformers, peft, bitsandbytes
   (flash-attn where present) versions and the GPU. A row without `command` or
   `environment`, or whose source is not `bench/gpu_memory_check.py`, is refused.
3. Commit the file with the output of the run, and regenerate this report and the margins
   with `python -m tools.calibration --out docs/calibration.md --write-margins`: own rows
   form their own repository group `bench/gpu_memory_check.py`, held out like any other.

## Before and after

Leave-one-repository-out (this report) against what it replaced, both at 0eab189's physics:
the earlier headline held out by the first word of `source` (the document's repository), so
torchtune's seven documents were already held out together, but Qwen2.5's two documents
measured with ms-swift and LLaMA-Factory stayed apart from ms-swift's own 39 rows. Held out by
document (every source string alone) it would be 8.3 %, 23.2 %, 18 rows. The fitted constants
hardly depend on which group is held out (reserve and fragmentation at 0.2 and 2.0 in every
fold, the bias 0.11 or 0.12), so the figures are the same to 0.1 %: median 8.26 %, p90
23.25 %, 18 rows (6.8 %) under-estimated by more than 10 %, before and after. The plan
figure with margins fitted without the held-out group falls below the measured peak for 29
of 265 rows (11 %; the margins aim at 10 % per regime).

| held out by first word of source, unless said | rows | median APE | p90 APE | under by >10 % |
| --- | ---: | ---: | ---: | ---: |
| main at 600d2cd, headline | 195 | 8.3 % | 33.0 % | 8 % |
| 4e2290b (issue 11's 74 new rows added), headline | 265 | 8.7 % | 28.3 % | 20 % |
| 4e2290b, expected (no bias) | 265 | 9.1 % | 27.1 % | 32 % |
| 159f66f, headline | 265 | 8.6 % | 28.9 % | 12 % |
| 159f66f, expected (no bias) | 265 | 7.6 % | 26.8 % | 27 % |
| c1ebd4c, headline | 265 | 8.2 % | 23.9 % | 12 % |
| c1ebd4c, expected (no bias) | 265 | 8.1 % | 24.7 % | 31 % |
| 1735e4a, headline | 265 | 8.2 % | 23.7 % | 12 % (31 rows, was 32) |
| 1735e4a, expected (no bias) | 265 | 8.1 % | 23.5 % | 31 % |
| 0eab189, headline | 265 | 8.3 % | 23.2 % | 7 % (18 rows) |
| 0eab189, held out by document, headline | 265 | 8.3 % | 23.2 % | 7 % (18 rows) |
| b150f14, leave-one-repository-out, headline | 265 | 8.3 % | 23.2 % | 7 % (18 rows) |
| b150f14, leave-one-repository-out, expected (no bias) | 265 | 6.9 % | 19.4 % | 26 % (68 rows) |
| now, leave-one-repository-out, headline | 265 | 8.3 % | 23.3 % | 7 % (19 rows) |
| now, leave-one-repository-out, expected (no bias) | 265 | 7.1 % | 19.5 % | 26 % (70 rows) |
| 4e2290b, the 72 used new rows only, headline | 72 | 9.8 % | 24.3 % | 39 % |
| 159f66f, the 72 used new rows only, headline | 72 | 8.2 % | 21.4 % | 26 % |
| c1ebd4c, the 72 used new rows only, headline | 72 | 8.2 % | 20.0 % | 22 % |
| 1735e4a, the 72 used new rows only, headline | 72 | 8.2 % | 20.0 % | 22 % |

Changed since b150f14, from FSDP's and the caching allocator's code, none fitted: (1) **FSDP's
gradient shards live in the reduce-scatter stream's pool.** FSDP1 (`_post_backward_hook`:
`new_sharded_grad = torch.empty_like(chunks[0])` under the post-backward stream) and FSDP2
(`foreach_reduce`: `reduce_output` under the reduce-scatter stream) allocate the sharded
gradients on their own stream, and the caching allocator serves a stream's free blocks to that
stream only; after the first step the shards' blocks stay reserved there while the compute
stream peaks at the start of backward with no gradient alive. The reserved peak is now the most
any moment of the step reserves, other streams' pools counted (the allocated peak and its moment
are unchanged; `estimate --explain` shows it as `stream_pool_bytes` in the reserve). fms's
Mistral-7B FSDP full fine-tune (device, batch 4) went from -17.8 % to -11.7 %, torchtune's
Llama-2-7B FSDP full row (reserved) from -9.3 % to -0.7 %; the over-estimated torchtitan FSDP2
rows rose by 0-5 points and torchtune's 70B paged full row from -4 % to +23 %. (2) **FSDP
parameter offload** (CPUOffload(offload_params=True)): LoRA adapters are flat parameters of
their own units, so their shards, gradients and AdamW states live on the host (they had been
left on the device); FSDP1 still writes each unit's gradient shard on the device and keeps it
(`_saved_grad_shard`) until `prepare_gradient_for_optim` at the end of backward, in the
reduce-scatter stream's pool (FSDP2 copies each reduce output to the host as reduced). (3) **A
held model output** (Answer.AI's train.py drops it after `optimizer.step()`) keeps its fp32
logits at every layer's backward and at the optimizer step, not only at the loss spike. Answer.AI's
Llama-2-70B QLoRA CPU-offload row: +4.2 % with the adapters on the device, -16.6 % with (2)'s
adapters alone moved, -7.9 % with (2) and (3). (4) **DeepSpeed ZeRO-3's buffers**
(stage3.py `_setup_for_real_optimizer`): the contiguous-gradient bucket it allocates once
(`__ipg_bucket_flat_buffer`, `reduce_bucket_size` 16-bit elements, `contiguous_gradients` on by
default; DeepSpeed's default 5e8) next to the prefetch bucket (`stage3_prefetch_bucket_size`,
default 5e7), and the gradient partitions, one zeroed flat buffer on the device from init unless
the optimizer is offloaded, so alive at every moment. Rows take Qwen1's ds_config_zero3.json
"auto" as HF's Trainer fills it (reduce hidden^2, prefetch 0.9 hidden^2); the PEFT docs' 70B
ZeRO-3 rows (no bucket settings: DeepSpeed's defaults) rose by 0.93 GiB. FSDP had been charged
DeepSpeed's 5e7-element prefetch bucket as well (its own prefetch is the second gathered unit,
already counted); removing it puts Answer.AI's Llama-2-7B LoRA at 512 tokens at -10.5 %
(was -9.5 %). The share under-estimated by more than 10 % is 19 rows (was 18): the rows these
terms lift were not the ones below -10 % except fms's full fine-tune, which stays at -11.7 %
(see "Where the estimator is still off").

Changed from 0eab189 to b150f14, from DeepSpeed's code, none fitted: **DeepSpeed ZeRO-1/2 gradient
buckets.** Its stage-1/2 optimizer allocates the contiguous-gradient (ipg) buffer in every
backward (stage_1_and_2.py `backward()`): `reduce_bucket_size` 16-bit elements whatever trains,
and a second one with `overlap_comm` ("double buffers to avoid data access conflict"); the
post-step all-gather writes into the 16-bit partitions. The estimator had counted two buckets of
min(5e8, what trains), i.e. 4 B per LoRA parameter. Rows take the settings as stated, else the
config the framework's scripts pass (Qwen1's finetune/ds_config_zero2.json: 2e8, overlap_comm
true: 0.75 GiB), else DeepSpeed's defaults (5e8, off: 0.93 GiB); `TrainingSetup`
`reduce_bucket_elements` / `overlap_comm`. Qwen-1.8B Q-LoRA (GPTQ) went from -26..-14 % to
-15..-6 % (headline, 256-2048 tokens); Qwen-72B's Q-LoRA rows (800 M trainable, two 5e8 buckets
before) drop by 1.1 GiB and stay within +1..+13 %.

Changed from 159f66f to c1ebd4c (over-estimated tail), each from the frameworks' code, none fitted:
(1) **The loss's dtype.** Qwen1's remote code (modeling_qwen.py) hands lm_head's 16-bit output to
CrossEntropyLoss without `.float()` (`ModelSpec.logits_upcast`, off for the Qwen1 presets and
any config.json of model_type "qwen"). Where no autocast runs - HF Trainer under DeepSpeed, whose
engine casts the model to 16 bit (Qwen's finetune.py runs even single-GPU Q-LoRA through
DeepSpeed) - the saved log-probs, their gradient and the logits' gradient are 16-bit: 6 B per
logit, not 12. Without DeepSpeed, autocast computes cross_entropy in fp32 (unchanged). Qwen's
GPTQ Q-LoRA rows at 4-8k went from +25..+56 % to -8..+15 % (headline), its ZeRO-3 full row at
8k from +32 % to +12 %. (2) **A compiled loss** (`TrainingSetup.compile_loss`, `--compile-loss`):
inductor fuses the fp32 upcast, log-softmax and NLL, saves only the 16-bit logits (plus a
logsumexp per row) and writes their gradient in one kernel: 2 + 2 B per logit, or 2 + 2/chunks
B for a compiled chunked CE. The parser sets it only where the framework compiled the loss at
the source's date: torchtitan since PR #1033 (2025-04; its 2024 train.py had it commented out,
"compiling loss function causes CUDA errors"); torchtune's chunked CE since PR #1390 (2024-08) -
its training.compile_loss returns a compiled copy of any other loss, which the recipes discard.
torchtitan's 2025-06 FSDP 32/64 rows went from +60 % to +19..+20 %; its 2024-12 compiled rows,
whose loss ran eagerly, stay at +22 %, as the 14 GiB gap between the two benchmarks at the same
model, batch and sequence says they should. The fitted headline bias is 0.11 (was 0.09): with
the long-sequence over-estimates gone, more lift fits under the median cap.

Changed from 4e2290b to 159f66f, each from the frameworks' code, none fitted: (1) PEFT's stock
`prepare_model_for_kbit_training` casts embeddings, norms and lm_head to fp32, so on a
bitsandbytes base the residual stream is fp32: checkpointed layer inputs, the MLP
intermediates (bnb's Linear4bit casts its output back to its input's dtype) and the gate/up
gradients take 4 B, and each quantized linear keeps its own 16-bit cast of its input
(`TrainingSetup.kbit_upcast`; derived on the hf stack unless the 4-bit base is sharded, where
TRL skips the preparation; rows whose caveats say "no fp32 upcast" - fms-acceleration's bnb
plugin, which prepares without the cast, Answer.AI's train.py, TRL's sharded QLoRA - set it off).
fms's baseline NF4 rows on one GPU went from -31..-36 % to -9 % (expected). (2) FSDP1 does not
reshard its root unit after forward: embeddings, final norm and lm_head stay unsharded through
backward (hf and lightning stacks). (3) A training loop that holds the model output through
backward keeps its fp32 logits, 4 B per logit more (`TrainingSetup.output_held`; Answer.AI's
train.py, stated in its rows' caveats). (4) The parser reads a stated LoRA dropout (fms rows
state 0.0, they were taken as 0.05). The fitted headline bias is 0.09 (was 0.08).

Changed from 2b9d050, from FSDP1's and autograd's code, none fitted: **FSDP1 keeps every layer's
input gradient to the end of backward** for frozen decoder units under HF's reentrant
checkpointing (`fsdp1_held_input_grads`). transformers' Trainer and fms-hf-tuning set PEFT's
fsdp_auto_wrap_policy, so adapters are their own units and each decoder unit's flat parameter is
frozen; in the recomputed (grad-enabled) forward FSDP1 registers its reshard-only hook with
register_multi_grad_hook on the unit's input, whose closure keeps the AccumulateGrad node of the
checkpoint's detached input leaf - and with it that leaf and the gradient accumulated into its
`.grad` - until `_finalize_params` removes the handle after backward. At the first layer's
backward all layer inputs and their gradients are alive (logits long gone): the peak moves from
the start of backward to its end. This explains the per-token excess the previous notes could
not fit with one term (Mistral-7B +1 GiB, Llama-2-70B +9.6 GiB per 8192 tokens: L x h x 2 B of
gradients plus the layer's working set, minus the logits freed by then). fms's 2-GPU LoRA, NF4
and GPTQ allocated rows went from -20..+3 % to +3..+14 % (headline; expected from -28..-8 % to
-7..+2 %); full
fine-tuning (trained units use AccumulateGrad hooks, not input hooks) is unchanged; so are
runs whose checkpoint sits inside the FSDP unit or runs without reentry
(`TrainingSetup.hf_reentrant_checkpointing`; the parser sets it off for "use_reentrant False"
and for Answer.AI's train.py, which applies torch's checkpoint_wrapper inside the units with
apply_activation_checkpointing): there the hook holds the previous layer's output node, whose
saved tensors autograd releases as usual. The PEFT docs' 70B QLoRA FSDP rows (use_reentrant
True) went from -29 % and -10 % to +4 % and +9 % (expected). Held out by source: median 8.2 ->
8.3 %, p90 23.7 -> 23.2 %, under-estimated by >10 % 31 -> 18 rows (12 -> 7 %); the fitted
headline bias is 0.12 (was 0.11).

## Where the estimator is still off, and why

- **The three judge targets are not all met.** Leave-one-repository-out, the headline reaches
  median 8.3 % and p90 23.3 %, but 7.2 % of rows (19; target at most 5 %, 13 rows) stay
  under-estimated by more than 10 %; the expected figure's median is -4 % signed. The 19, by
  cause: sources that contradict their own settings (torchtitan 405B pipeline -47 %, torchtune's
  A6000 8B full and LoRA -46 % and -35 %); LitGPT's TinyLlama rows at micro-batch 8 (QLoRA -29 %,
  LoRA -18 %, full -12 %, allocated; the rows take LoRA on q and v like the other configs, but
  config_hub/finetune/tiny-llama/lora.yaml at 089fc5c adapts every linear and the head, and the
  full row's grad accumulation is not stated) and its 7-8B NF4 rows at 512 tokens (-10.7 %,
  -10.0 %); fms-acceleration's nvidia-smi totals under FSDP (GPTQ Mistral-7B -28 % and -17 %, full
  fine-tune batch 4 -11.7 %); Answer.AI's 7B QLoRA and LoRA at 512 tokens (-26 %, -10.5 %,
  reserved); Qwen's
  Qwen-1.8B Q-LoRA at 256 and 512 tokens (-14 %, -11 %, device) and Qwen-7B multinode LoRA at 4k
  and 8k (-13 %, -15 %); ms-swift's Qwen-1.8B full at 2048 (-18 %, reserved, above its own 4096
  row); torchtune's Llama-2-7B QLoRA of unknown length (-12 %). Each is discussed below; none has
  a term derived from the frameworks' code that closes it.
- **Qwen's own rows that the 16-bit loss does not fit.** Qwen-1.8B Q-LoRA (GPTQ) still sits
  about 1 GiB above the expected figure at every length after DeepSpeed's buckets (above):
  the same ~1 GiB that Qwen's single-GPU LoRA rows without DeepSpeed show at 256-2048 tokens
  (device totals), so a device-total constant of Qwen's stack (CUDA context with the
  flash-attn kernels loaded; modelled 0.5 GiB) rather than an auto-gptq buffer: auto-gptq's
  exllama temp_dq is the largest linear in fp16 (22 MB here) and its temp_state exists only
  with act-order; not modelled. Qwen-7B's multinode
  LoRA rows (ZeRO-2 assumed, totals over 4 GPUs assumed) keep the fp32 slope of the single-GPU
  autocast rows (2.5 MB per token), against the 16-bit loss that the single-GPU DeepSpeed
  Q-LoRA rows and Qwen-72B's ZeRO-3 LoRA rows bear out: -15 % and -17 % at 4k and 8k.
- **HF Trainer + FSDP (fms-acceleration, 2 GPUs), nvidia-smi totals**: the allocated rows fit
  since FSDP1's held input gradients (above), but the device totals sit a further 4-18 GiB above
  allocated (full fine-tuning: 9 GiB at batch 2, 18 GiB at batch 4 with the same allocated peak;
  GPTQ Mistral-7B -17..-28 % headline): the modelled reserve (0.2 of what a step allocates) is too
  small there. The caching allocator keeps free blocks per stream (CUDACachingAllocator's
  BlockComparatorSize orders pools by stream first; a free block serves only its own stream):
  the gradient shards FSDP writes on its reduce-scatter stream are now counted that way (above),
  which lifts the full fine-tune at batch 4 from -17.8 % to -11.7 %; the all-gather outputs on
  the unshard stream are already counted at every moment. Neither is per-token: they do not
  explain a total that grows with the batch at a constant allocated peak (9 GiB from batch 2 to
  4), nor the 3.5 GiB by which the GPTQ (AutoGPTQ triton v2) totals exceed the NF4 ones at the
  same allocated peak. Not modelled. Finding 2 of the
  issue (GPTQ/NF4 weights replicated under FSDP) is not borne out: the GPTQ FSDP rows have the
  allocated peak of the NF4 plugin rows (9.27 vs 9.29 GiB), whose 4-bit weights FSDP can shard
  (the plugin sets bnb_4bit_quant_storage to the float dtype under FSDP), and replicating
  Llama-2-70B's 4-bit weights would over-estimate those rows by ~20 %.
- **Answer.AI at 512 tokens** (-26 % QLoRA, -10.5 % LoRA, reserved): reserved is 2 GiB above
  allocated at 512 tokens and 1 GiB at 2048 for the same model, and the source reports 3.72 GiB
  reserved right after FSDP wrapping (`reserved_after_model_wrap`, QLoRA 7B) against about
  1.8 GiB of weight shards: blocks cached while the model was loaded, quantized and flattened
  on the compute stream, which the all-gathers (unshard stream) cannot reuse. The estimator
  models the training step, not model loading; not modelled.
- **QLoRA (NF4)**: LitGPT's NF4 rows carry 1-3 GiB (allocated) that no modelled term explains;
  torchtune's 3B/8B QLoRA rows are over-estimated by 34-56 %.
- **ms-swift (Qwen1) at 8k**: reserved minus modelled allocated is about 2.5 GiB at 512 tokens
  and 18 GiB at 8k whatever the model size (1.8B to 14B); its runs use HF Trainer's autocast, so
  the loss is fp32 and (1) above does not apply; the fitted fragmentation (2.0 x the loss
  buffers, at the top of its grid) over-estimates the 8k LoRA rows by 37-47 % (71 % for the
  1.8B full fine-tune).
- **Sources that contradict their own settings.** torchtune's 2024-05 Llama-2-7B and 70B LoRA
  rows are not used (see "Rows not used"). torchtune's A6000 rows (twice the 4090 rows
  with the same recipe) stay under-estimated by a third to a half; torchtitan's 405B pipeline
  row by half. LitGPT's FSDP LoRA rows exceed the unsharded weights per GPU and are not used.
- **torch.compile of the decoder layers** is not modelled: torchtune's flag table drops 9 GiB
  (60 -> 51) when compile is added with activation checkpointing off, its loss still eager
  (row 10, +17 % expected); inductor's partitioner recomputes element-wise ops (SiLU, RMSNorm's
  fp32 intermediates) instead of saving them. With checkpointing on the effect is small.
- **Unknown sequence lengths.** Unpacked alpaca rows without a stated length take their
  longest batch as 1024 tokens (marked in the table).
- **Measurements added (issue 11)**: 74 rows from three new sources, none used to build the
  physics before this round: fms-acceleration's A100 benchmark (HF Trainer + PEFT LoRA, NF4
  and GPTQ bases, FSDP, allocated and nvidia-smi figures), Answer.AI's fsdp_qlora benchmarks
  (FSDP LoRA/QLoRA, CPU offload, 24k context) and the PEFT docs (70B LoRA/QLoRA with ZeRO-3
  and FSDP). The terms above were derived from framework code and checked against them, so
  they are no longer held out.
"""


def run(csvs: list[Path]) -> dict[str, object]:
    """Everything the report shows, from these CSVs."""
    cases: list[CalibrationCase] = []
    skipped: list[tuple[str, int, str]] = []
    for path in csvs:
        c, sk = load_cases(path)
        cases += c
        skipped += sk
    groups = repository_groups(c.document for c in cases)
    for c in cases:
        c.group = groups[c.document]
    constants = fit_constants(cases)
    df = evaluate(cases, {c.group: constants for c in cases})
    loro, loro_constants = leave_one_repository_out(cases)
    return dict(
        cases=cases,
        skipped=skipped,
        constants=constants,
        in_sample=df,
        loro=loro,
        loro_constants=loro_constants,
        margins=plan_margins(loro),
        plan=held_out_plan(cases, loro),
    )


def default_csvs() -> list[Path]:
    """The frozen published set, and the project's own measurements where there are any."""
    return [DEFAULT_CSV, PROJECT_CSV] + ([OWN_CSV] if OWN_CSV.exists() else [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", type=Path, action="append", help="measured peaks (repeatable)")
    ap.add_argument("--out", type=Path, help="write the Markdown report here")
    ap.add_argument("--write-margins", action="store_true", help=f"regenerate {MARGINS_PY.name}")
    args = ap.parse_args(argv)
    res = run(args.csv or default_csvs())
    text = render_markdown(res, NOTES)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if args.write_margins:
        MARGINS_PY.write_text(margins_module(*res["margins"]), encoding="utf-8")  # type: ignore[misc]
    for name in ("in_sample", "loro"):
        s = summarize(res[name])  # type: ignore[arg-type]
        print(
            f"{name}: {int(s['n'])} rows: median APE {100 * s['median_ape']:.1f} %, "
            f"p90 APE {100 * s['p90_ape']:.1f} %, under by >10 % {100 * s['under_10']:.0f} %"
        )
    print(f"constants (reserve, fragmentation, bias): {res['constants']}")
    if not args.out:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
