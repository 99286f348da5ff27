"""`cnc-corpus probe`: a planned stage's peak measured on this machine's GPU, beside the estimate.

The stage comes from plan.json (model, method, max_seq_len, and per target the micro-batch,
recomputation and gradient accumulation); plan.json does not record precision, optimizer,
attention, loss or LoRA rank and targets, so they come from the stage of that name in the
configuration the plan was made with (`--config`, else the built-in stages, else the defaults
of a stage). The model is built from its configuration with random weights (no download), its
longest batch (micro-batch x max_seq_len random token ids) runs forward, backward and an
optimizer step `--steps` times as the trainer configs would run it, and the measured peak is
printed beside `pipeline.memory.estimate` for the same setup. The row is appended to a local
calibration file the user owns, never to the frozen calibration set.

This module needs no torch: what touches the GPU is in `probe_gpu.py`.
"""

from __future__ import annotations

import argparse
import csv
import shlex
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pipeline.core.errors import UsageError
from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from pipeline.memory.params import param_counts
from pipeline.training import probe_gpu
from pipeline.training.plan import _setup as plan_setup
from pipeline.training.probe_gpu import Measured
from schemas.memory import ALL_LINEAR, GIB, MemoryBreakdown, ModelSpec, TrainingSetup
from schemas.plan import GpuFit, Plan, StageConfig, StagePlan

INSTALL = "pip install -e '.[probe]'"
REPO = Path(__file__).resolve().parents[2]
DEFAULT_CALIBRATION_FILE = Path.home() / ".cache" / "cnc-corpus" / "own_measurements.csv"
# The frozen calibration set: the shared reference and the project's published peaks, by
# location and by name (an installed copy lies elsewhere).
FROZEN_FILES = ("measured_memory_peaks.csv", "measured_memory_calibration.csv")
FROZEN_PLACES = (REPO / "data" / FROZEN_FILES[0], REPO.parent / "shared")
# The columns of data/measured_memory_peaks.csv (tools/calibration.py reads them), then the
# probe's own: how the figure was measured and with what.
COLUMNS = [
    "source", "url", "model", "params_b", "method", "precision", "optimizer", "seq_len",
    "micro_batch", "grad_ckpt", "packing", "zero_or_fsdp", "n_gpus", "gpu", "peak_mem_gb",
    "unit", "measured", "variable_length", "stack", "use", "notes", "caveats",
]  # fmt: skip
PROBE_COLUMNS = [*COLUMNS, "command", "torch_version", "transformers_version", "date"]
CHECKPOINTING = "HF gradient_checkpointing, reentrant"
SOURCE = "cnc-corpus probe (torch.cuda.max_memory_reserved, own GPU)"
LORA_DROPOUT = 0.05  # TRL's ModelConfig default; the estimate counts the dropout copy
MEMORY_TOLERANCE = 0.03  # torch reports a card a little below its catalog (nvidia-smi) size
_METHOD = {"full": "full", "lora": "LoRA", "qlora": "QLoRA"}
_PRECISION = {
    "bf16_mixed": "bf16 mixed (fp32 master weights, torch.autocast bf16)",
    "bf16": "bf16 pure",
    "fp32": "fp32",
}
_OPTIMIZER = {
    "adamw": "AdamW (torch, foreach)",
    "adamw_8bit": "AdamW 8bit (bitsandbytes)",
    "paged_adamw": "paged AdamW 32bit (bitsandbytes)",
    "paged_adamw_8bit": "paged AdamW 8bit (bitsandbytes)",
    "sgd": "SGD (torch, no momentum)",
}


@dataclass(frozen=True)
class ProbeStage:
    """A planned stage as the probe runs it: its plan, settings, model and chosen target."""

    plan: StagePlan
    settings: StageConfig
    spec: ModelSpec
    fit: GpuFit
    setup: TrainingSetup  # what runs, as the estimator reads it


def check_calibration_file(path: str | Path) -> Path:
    """The user's calibration file, refused inside the frozen calibration set."""
    target = Path(path).expanduser().resolve()
    frozen = [p.resolve() for p in FROZEN_PLACES]
    if target.name in FROZEN_FILES or any(target == p or p in target.parents for p in frozen):
        raise UsageError(
            f"--calibration-file {path}: that is the frozen calibration set "
            f"({', '.join(FROZEN_FILES)}, ../shared); the probe appends only to a file you own, "
            f"e.g. {DEFAULT_CALIBRATION_FILE}"
        )
    if target.is_dir():
        raise UsageError(f"--calibration-file {path}: a folder, not a CSV file")
    return target


def read_stage(plan_path: str | Path, name: str) -> StagePlan:
    """The stage `name` of a plan.json."""
    path = Path(plan_path)
    try:
        plan = Plan.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise UsageError(f"--plan {path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        first = str(exc).splitlines()[0]
        raise UsageError(f"--plan {path}: not a cnc-corpus plan.json ({first})") from None
    stages = {s.name: s for s in plan.stages}
    if name not in stages:
        raise UsageError(f"--stage {name}: plan.json has stages {', '.join(stages) or 'none'}")
    return stages[name]


def stage_settings(stage: StagePlan, configured: list[StageConfig]) -> StageConfig:
    """The stage's configuration: the configured stage of its name, else a stage's defaults;
    it must plan the model and method plan.json has."""
    named = {s.name: s for s in configured}
    settings = named.get(stage.name) or StageConfig(
        name=stage.name, corpus=stage.corpus, model=stage.model, method=stage.method
    )
    try:
        model = get_model(settings.model).name
    except ValueError:
        raise UsageError(
            f"stage {stage.name}: model {settings.model!r} is neither a preset nor a local "
            "config.json; pass --config with the file the plan was made with"
        ) from None
    if model != stage.model or settings.method != stage.method:
        raise UsageError(
            f"stage {stage.name}: the configuration plans {model} {settings.method}, plan.json "
            f"{stage.model} {stage.method}; pass --config with the file the plan was made with"
        )
    return settings


def unsupported(settings: StageConfig) -> str | None:
    """Why the probe cannot run a stage's settings as planned, or None."""
    if settings.method == "inference":
        return "an inference stage has no training step to probe"
    if settings.precision == "fp8":
        return "fp8 linears need TransformerEngine or torchao; the probe runs bf16/fp32 only"
    if settings.loss != "standard":
        return f"loss {settings.loss!r}: the probe runs transformers' standard loss only"
    return None


def choose_fit(stage: StagePlan, gpu: str | None, local_gib: float) -> GpuFit:
    """The planned one-device target to run: `gpu` when given, else the largest fitting target
    this card holds, else the smallest fitting one."""
    fits = [g for g in stage.gpus if g.fits and g.devices == 1]
    if gpu is not None:
        named = [g for g in stage.gpus if g.gpu == gpu]
        if not named:
            planned = ", ".join(g.gpu for g in stage.gpus)
            raise UsageError(f"--gpu {gpu}: stage {stage.name} is planned for {planned}")
        if named[0] not in fits:
            why = "does not fit" if not named[0].fits else f"has {named[0].devices} devices"
            raise UsageError(f"--gpu {gpu}: stage {stage.name} {why} there; nothing to probe")
        return named[0]
    if not fits:
        raise UsageError(f"stage {stage.name}: no one-device target of the plan fits it")
    held = [g for g in fits if g.memory_gib <= local_gib * (1 + MEMORY_TOLERANCE)]
    return max(held, key=lambda g: g.memory_gib) if held else min(fits, key=lambda g: g.memory_gib)


def probe_setup(
    stage: StagePlan, settings: StageConfig, fit: GpuFit, attention: str
) -> TrainingSetup:
    """The estimator's setup of what the probe runs: the plan's micro-batch at max_seq_len on
    one device, two accumulated micro-batches when the plan accumulates (the gradients are
    alive in the second forward, as in every later one), HF's whole-layer reentrant
    recomputation whenever the plan recomputes (the trainers have no selective mode)."""
    recompute = "full" if fit.recompute_needed else "none"
    setup = plan_setup(settings, stage.max_seq_len, 1, recompute)
    accum = 2 if (fit.grad_accum_steps or 1) > 1 else 1
    return setup.model_copy(
        update={
            "micro_batch": fit.micro_batch,
            "grad_accum_steps": accum,
            "attention": attention,
            "lora_dropout": LORA_DROPOUT,
        }
    )


def _lora_note(s: TrainingSetup) -> str:
    if s.method == "full":
        return ""
    targets = "all linear" if set(s.lora_targets) == set(ALL_LINEAR) else ",".join(s.lora_targets)
    return f"; LoRA r={s.lora_rank} on {targets}, dropout {s.lora_dropout}"


def calibration_row(
    probe: ProbeStage, measured: Measured, command: str, date: str
) -> dict[str, object]:
    """One row of the user's calibration file, in data/measured_memory_peaks.csv's columns
    (which tools/calibration.py parses back into `probe.setup`) plus the probe's own."""
    s = probe.setup
    attention = {"sdpa": "attn_implementation=sdpa", "eager": "attention: eager"}
    notes = (
        f"cnc-corpus probe of stage {probe.plan.name} (planned for {probe.fit.gpu}); "
        f"grad accum {s.grad_accum_steps}{_lora_note(s)}; "
        f"{attention.get(s.attention, 'attn_implementation=flash_attention_2')}; "
        f"max_memory_allocated {measured.allocated_gib:.3f} GiB"
    )
    row: dict[str, object] = {
        "source": SOURCE,
        "url": "",
        "model": probe.settings.model,
        "params_b": round(param_counts(probe.spec).total / 1e9, 3),
        "method": _METHOD[s.method],
        "precision": _PRECISION[s.precision],
        "optimizer": _OPTIMIZER[s.optimizer],
        "seq_len": s.seq_len,
        "micro_batch": s.micro_batch,
        "grad_ckpt": "off" if s.recompute == "none" else f"on ({CHECKPOINTING})",
        "packing": "yes (full-length random token ids)" if s.packing else "no (padded to length)",
        "zero_or_fsdp": "none",
        "n_gpus": 1,
        "gpu": measured.gpu,
        "peak_mem_gb": round(measured.reserved_gib, 3),
        "unit": "GiB",
        "measured": "reserved",
        "variable_length": "no",
        "stack": "hf",
        "use": "yes",
        "notes": notes,
        "caveats": "random weights and token ids; peak over the optimizer steps after building",
        "command": command,
        "torch_version": measured.torch_version,
        "transformers_version": measured.transformers_version,
        "date": date,
    }
    return row


def append_row(path: Path, row: dict[str, object]) -> None:
    """Append a row to the user's calibration file (its header first when the file is new)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=PROBE_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(row)


def _error(estimated: float, measured: float) -> str:
    return f"{100 * (estimated / measured - 1):+.1f} %" if measured else "-"


def report(probe: ProbeStage, est: MemoryBreakdown, measured: Measured) -> list[str]:
    """The lines the probe prints: what ran, then measured beside estimated."""
    s, fit = probe.setup, probe.fit
    alloc, reserved = est.allocated_bytes / GIB, est.reserved_bytes / GIB
    return [
        f"probe {probe.plan.name}: {probe.spec.name} {s.method}, {s.micro_batch} x {s.seq_len} "
        f"tokens, recompute {s.recompute}, grad accum {s.grad_accum_steps}, {s.optimizer}, "
        f"{s.precision}, attention {s.attention} on {measured.gpu} (planned for {fit.gpu})",
        f"{'':<10}{'measured':>10}{'estimate':>10}{'error':>10}",
        f"{'allocated':<10}{measured.allocated_gib:>10.2f}{alloc:>10.2f}"
        f"{_error(alloc, measured.allocated_gib):>10}",
        f"{'reserved':<10}{measured.reserved_gib:>10.2f}{reserved:>10.2f}"
        f"{_error(reserved, measured.reserved_gib):>10}",
        "GiB; error = estimate / measured - 1 (positive: the estimate is above the measurement)",
    ]


def _settings(args: argparse.Namespace, stage: StagePlan) -> StageConfig:
    from schemas.config import load_config

    settings = stage_settings(stage, load_config(args.config).plan.stages)
    why = unsupported(settings)
    if why:
        raise UsageError(f"stage {stage.name}: {why}")
    return settings


def run(args: argparse.Namespace) -> int:
    """`cnc-corpus probe`: everything checked without torch first, then the GPU."""
    out = check_calibration_file(args.calibration_file or DEFAULT_CALIBRATION_FILE)
    if args.steps < 1:
        raise UsageError(f"--steps {args.steps}: at least one optimizer step")
    stage = read_stage(args.plan, args.stage)
    settings = _settings(args, stage)
    missing = probe_gpu.missing(settings.method, settings.optimizer)
    if missing:
        raise UsageError(f"probe: {missing}: {INSTALL} on a machine with an NVIDIA GPU")
    fit = choose_fit(stage, args.gpu, probe_gpu.card_gib())
    kernel = probe_gpu.attention(settings.attention, settings.precision)
    setup = probe_setup(stage, settings, fit, kernel)
    probe = ProbeStage(stage, settings, get_model(settings.model), fit, setup)
    measured = probe_gpu.measure(probe.settings.model, setup, args.steps)
    print("\n".join(report(probe, estimate(probe.spec, setup), measured)))
    command = shlex.join(["cnc-corpus", *sys.argv[1:]])
    append_row(out, calibration_row(probe, measured, command, datetime.now(UTC).isoformat()))
    print(f"appended to {out} (python -m tools.calibration --csv {out} compares it)")
    return 0
