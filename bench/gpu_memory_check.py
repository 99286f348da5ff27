"""Measure peak GPU memory of real training steps and compare it with the estimator.

Builds Qwen2-shaped models from a preset's shape with random weights (no download), runs a few
optimizer steps for full fine-tuning (pure bf16, AdamW), LoRA (bf16 base, fp32 adapters via
PEFT) and QLoRA (bitsandbytes NF4 with double quantization) at two sequence lengths, records
torch.cuda.max_memory_allocated / max_memory_reserved, and appends rows in the format of
../shared/reference/measured_memory_calibration.csv, each with the command that measured it and
its environment (versions, GPU, CUDA), to data/measured_memory_own.csv, which

    python -m tools.calibration --out docs/calibration.md --write-margins

reads beside the frozen published set (the only way rows are added: docs/calibration.md).
Needs an NVIDIA GPU with torch, transformers, peft, bitsandbytes and accelerate
(`pip install -e '.[probe]'`); without them it says so and exits 0. The model is built and
measured by pipeline/training/probe_gpu.py, as `cnc-corpus probe` does it. `--dry-run` prints
the estimates only.

    python bench/gpu_memory_check.py [--models qwen2.5-0.5b qwen2.5-1.5b] [--seq-lens 1024 4096]
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.memory.estimate import estimate  # noqa: E402
from pipeline.memory.models import get_model  # noqa: E402
from pipeline.memory.params import param_counts  # noqa: E402
from pipeline.training.probe_gpu import (  # noqa: E402
    Build,
    attention,
    build_model,
    free,
    hf_config,
    make_optimizer,
    missing,
    train_peak,
)
from schemas.memory import GIB  # noqa: E402
from tools.calibration import row_to_case  # noqa: E402
from tools.calibration_sources import OWN_CSV  # noqa: E402

COLUMNS = [
    "source", "model", "params_b", "method", "precision", "optimizer", "seq_len", "micro_batch",
    "grad_ckpt", "packing", "zero_or_fsdp", "n_gpus", "gpu", "peak_mem_gb", "unit", "notes",
    "command", "environment",
]  # fmt: skip
SOURCE = "bench/gpu_memory_check.py (torch.cuda.max_memory_allocated)"
PRECISION = {
    "full": "bf16 pure",
    "LoRA": "bf16 base + fp32 adapters (PEFT)",
    "QLoRA": "NF4 base (bitsandbytes, double quant) + fp32 adapters",
}
LORA_RANK = 16
LORA_DROPOUT = 0.05


def row_template(model: str, method: str, seq: int, batch: int, attn: str) -> dict[str, object]:
    spec = get_model(model)
    return {
        "source": SOURCE,
        "model": model,
        "params_b": round(param_counts(spec).total / 1e9, 3),
        "method": method,
        "precision": PRECISION[method],
        "optimizer": "AdamW (torch, foreach)",
        "seq_len": seq,
        "micro_batch": batch,
        "grad_ckpt": "on (HF gradient_checkpointing, non-reentrant)",
        "packing": "no (padded to length)",
        "zero_or_fsdp": "none",
        "n_gpus": 1,
        "gpu": "",
        "peak_mem_gb": None,
        "unit": "GiB",
        "notes": (
            f"random-weight Qwen2 built from the {model} shape; attn_implementation={attn}; "
            f"grad accum 1; HF loss (fp32 upcast)"
            + (
                f"; LoRA r={LORA_RANK} on all linear, dropout {LORA_DROPOUT}"
                if method != "full"
                else ""
            )  # fmt: skip
        ),
    }


def estimate_row(row: dict[str, object]) -> float:
    """Estimated allocated GiB for a row, through the same parsing as the calibration."""
    case = row_to_case(0, row | {"peak_mem_gb": 0.0})  # the measurement plays no part
    if isinstance(case, str):
        raise ValueError(case)
    return estimate(get_model(case.model), case.setup).allocated_bytes / GIB


def environment() -> str:
    """Python, torch/CUDA, transformers, peft, bitsandbytes versions and the GPU, for a row."""
    import platform

    import torch

    mods = ("transformers", "peft", "bitsandbytes", "flash_attn")
    versions = [f"{m} {getattr(sys.modules.get(m) or __import__(m), '__version__', '?')}"
                for m in mods if _importable(m)]  # fmt: skip
    return "; ".join([f"python {platform.python_version()}", f"torch {torch.__version__}",
                      f"CUDA {torch.version.cuda}", *versions,
                      f"GPU {torch.cuda.get_device_name(0)}"])  # fmt: skip


def _importable(mod: str) -> bool:
    try:
        __import__(mod)
    except ImportError:
        return False
    return True


def _have_gpu_stack() -> str | None:
    """None if torch+CUDA and the probe extra (QLoRA's packages too) are there, else why not."""
    return missing("qlora", "adamw")


def measure(model_name: str, method: str, seq: int, batch: int, steps: int, attn: str,
            workdir: Path) -> tuple[float, float]:  # fmt: skip
    """(peak allocated GiB, peak reserved GiB) over `steps` optimizer steps after the build:
    pure bf16, HF gradient checkpointing (non-reentrant), PEFT LoRA without the k-bit upcast."""
    method = method.lower()
    build = Build(
        method=method,
        weights_fp32=False,
        attention=attn,
        recompute=True,
        reentrant=False,
        lora_rank=LORA_RANK,
        lora_dropout=LORA_DROPOUT,
        kbit_upcast=False,
    )
    free()
    model = build_model(hf_config(model_name), build, workdir / model_name)
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad], "adamw")
    peak = train_peak(model, opt, (batch, seq), steps, accum=1, autocast=False)
    del model, opt
    free()
    return peak


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["qwen2.5-0.5b", "qwen2.5-1.5b"])
    ap.add_argument("--methods", nargs="+", default=["full", "LoRA", "QLoRA"])
    ap.add_argument("--seq-lens", nargs="+", type=int, default=[1024, 4096])
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OWN_CSV, help="appended to (header if new)")
    ap.add_argument("--dry-run", action="store_true", help="print estimates only; no GPU needed")
    args = ap.parse_args(argv)

    why_not = None if args.dry_run else _have_gpu_stack()
    if why_not:
        print(f"gpu_memory_check: skipped, {why_not}. Nothing measured.")
        return 0
    attn = "sdpa" if args.dry_run or attention("flash") == "sdpa" else "flash_attention_2"
    gpu_name, env = "", ""
    if not args.dry_run:
        import torch

        gpu_name, env = torch.cuda.get_device_name(0), environment()
    command = " ".join(["python", "bench/gpu_memory_check.py", *(argv or sys.argv[1:])])
    rows: list[dict[str, object]] = []
    print(f"{'model':<14}{'method':<7}{'seq':>6}{'measured':>10}{'reserved':>10}"
          f"{'estimate':>10}{'error':>8}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for model_name in args.models:
            for method in args.methods:
                for seq in args.seq_lens:
                    row = row_template(model_name, method, seq, args.micro_batch, attn)
                    row |= {"gpu": gpu_name, "command": command, "environment": env}
                    est = estimate_row(row)
                    if args.dry_run:
                        print(f"{model_name:<14}{method:<7}{seq:>6}{'-':>10}{'-':>10}{est:>10.2f}")
                        continue
                    t0 = time.perf_counter()
                    alloc, reserved = measure(model_name, method, seq, args.micro_batch,
                                              args.steps, attn, Path(tmp))  # fmt: skip
                    row["peak_mem_gb"] = round(alloc, 3)
                    row["notes"] = f"{row['notes']}; max_memory_reserved {reserved:.2f} GiB"
                    rows.append(row)
                    print(
                        f"{model_name:<14}{method:<7}{seq:>6}{alloc:>10.2f}{reserved:>10.2f}"
                        f"{est:>10.2f}{100 * (est / alloc - 1):>7.1f}%"
                        f"  ({time.perf_counter() - t0:.0f} s)",
                        flush=True,
                    )
    if rows:
        new = not args.out.exists()
        with args.out.open("a", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=COLUMNS)
            if new:
                w.writeheader()
            w.writerows(rows)
        print(f"appended {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
