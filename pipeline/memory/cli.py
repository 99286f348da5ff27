"""`cnc-corpus estimate`: peak GPU memory for one configuration (table, or --json)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import get_args

from schemas.memory import (
    ALL_LINEAR,
    Attention,
    LossImpl,
    Method,
    Offload,
    Optimizer,
    Precision,
    Quantization,
    Recompute,
    RecomputeModule,
    TrainingSetup,
)

from .estimate import estimate, max_micro_batch
from .gpus import GPUS, get_gpu
from .models import PRESETS, get_model, load_config_json

_LORA_ALIASES = {"all": ALL_LINEAR, "all-linear": ALL_LINEAR, "attn": ALL_LINEAR[:4]}


def _targets(text: str) -> tuple[str, ...]:
    if text in _LORA_ALIASES:
        return _LORA_ALIASES[text]
    names = tuple(t.strip() if t.strip().endswith("_proj") else f"{t.strip()}_proj"
                  for t in text.split(",") if t.strip())  # fmt: skip
    bad = [n for n in names if n not in ALL_LINEAR]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown LoRA target(s) {bad}; use {ALL_LINEAR}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = TrainingSetup()
    parser.add_argument("--model", help=f"preset ({', '.join(PRESETS)}) or a config.json path")
    parser.add_argument("--config-json", help="local config.json (instead of --model)")
    parser.add_argument("--method", choices=get_args(Method), default=d.method)
    parser.add_argument("--precision", choices=get_args(Precision), default=d.precision)
    parser.add_argument("--optimizer", choices=get_args(Optimizer), default=d.optimizer)
    parser.add_argument("--optimizer-in-backward", action="store_true")
    parser.add_argument("--fused-optimizer", action="store_true", help="fused Adam: no scratch")
    parser.add_argument("--seq-len", type=int, default=d.seq_len)
    parser.add_argument("--micro-batch", type=int, default=d.micro_batch)
    parser.add_argument("--grad-accum", type=int, default=d.grad_accum_steps)
    parser.add_argument("--packing", action=argparse.BooleanOptionalAction, default=d.packing)
    parser.add_argument("--attention", choices=get_args(Attention), default=d.attention)
    parser.add_argument(
        "--recompute",
        default=d.recompute,
        help=f"{'|'.join(get_args(Recompute))}, or modules to checkpoint: "
        f"{','.join(get_args(RecomputeModule))}",
    )
    parser.add_argument("--activation-offload", action="store_true")
    parser.add_argument("--loss", choices=get_args(LossImpl), default=d.loss)
    parser.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=d.zero)
    parser.add_argument("--fsdp", action="store_true", help="FSDP full shard (same as --zero 3)")
    parser.add_argument("--dp", type=int, default=d.dp)
    parser.add_argument("--tp", type=int, default=d.tp)
    parser.add_argument("--pp", type=int, default=d.pp)
    parser.add_argument("--offload", choices=get_args(Offload), default=d.offload)
    parser.add_argument("--quantization", choices=get_args(Quantization), default=d.quantization)
    parser.add_argument("--no-double-quant", action="store_true")
    parser.add_argument("--lora-rank", type=int, default=d.lora_rank)
    parser.add_argument(
        "--lora-targets",
        type=_targets,
        default=d.lora_targets,
        help="comma list (q,k,v,o,gate,up,down) or all / attn",
    )
    parser.add_argument("--lora-dropout", type=float, default=d.lora_dropout)
    parser.add_argument("--train-embeddings", action="store_true")
    parser.add_argument("--cuda-context-gib", type=float, default=d.cuda_context_gib)
    parser.add_argument("--gpu", help=f"catalog card to check the fit against: {', '.join(GPUS)}")
    parser.add_argument("--headroom", type=float, default=0.15)
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def setup_from_args(args: argparse.Namespace) -> TrainingSetup:
    recompute, modules = args.recompute, ()
    if recompute not in get_args(Recompute):
        modules = tuple(m.strip() for m in recompute.split(",") if m.strip())
        recompute = "full"
    return TrainingSetup(
        method=args.method,
        precision=args.precision,
        optimizer=args.optimizer,
        optimizer_in_backward=args.optimizer_in_backward,
        optimizer_fused=args.fused_optimizer,
        seq_len=args.seq_len,
        micro_batch=args.micro_batch,
        grad_accum_steps=args.grad_accum,
        packing=args.packing,
        attention=args.attention,
        recompute=recompute,
        recompute_modules=modules,
        activation_offload=args.activation_offload,
        loss=args.loss,
        zero=3 if args.fsdp else args.zero,
        dp=args.dp,
        tp=args.tp,
        pp=args.pp,
        offload=args.offload,
        quantization=args.quantization,
        double_quant=not args.no_double_quant,
        lora_rank=args.lora_rank,
        lora_targets=args.lora_targets,
        lora_dropout=args.lora_dropout,
        train_embeddings=args.train_embeddings,
        cuda_context_gib=args.cuda_context_gib,
    )


def run(args: argparse.Namespace) -> int:
    try:
        if args.config_json:
            model = load_config_json(args.config_json)
        elif args.model:
            model = get_model(args.model)
        else:
            raise ValueError("give --model or --config-json")
        setup = setup_from_args(args)
        gpu = get_gpu(args.gpu) if args.gpu else None
        if gpu is not None and gpu.count > setup.world_size:
            setup = setup.model_copy(update={"dp": gpu.count // (setup.tp * setup.pp)})
        b = estimate(model, setup)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        print(f"estimate: {exc}", file=sys.stderr)
        return 2
    out = b.as_json()
    if gpu is not None:
        budget = gpu.memory_bytes * (1 - args.headroom)
        out["gpu"] = {
            "name": gpu.name,
            "memory_gib": round(gpu.memory_gib, 2),
            "headroom": args.headroom,
            "fits": b.total_bytes <= budget,
            "max_micro_batch": max_micro_batch(model, setup, gpu, args.headroom),
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(_table(out, setup))
    return 0


def _table(out: dict, s: TrainingSetup) -> str:
    lines = [
        f"{out['model']}  {s.method}  {s.precision}  {s.optimizer}  seq {s.seq_len} x "
        f"micro-batch {s.micro_batch}  recompute {s.recompute_modules or s.recompute}  "
        f"attention {s.attention}  loss {s.loss}  zero {s.zero}  dp/tp/pp {s.dp}/{s.tp}/{s.pp}",
        f"params {out['params'] / 1e9:.2f} B, trainable {out['trainable_params'] / 1e6:.1f} M",
        "",
        f"{'term':<22}{'GiB':>10}",
    ]
    for name, v in out["breakdown"].items():
        lines.append(f"{name:<22}{v['gib']:>10.2f}")
    lines += [
        f"{'total (per device)':<22}{out['total_gib']:>10.2f}",
        "",
        f"peak at {out['peak_phase']}; "
        + ", ".join(f"{k} {v:.2f}" for k, v in out["phases_gib"].items())
        + " GiB",
        f"allocated {out['allocated_gib']:.2f} GiB, reserved {out['reserved_gib']:.2f} GiB",
    ]
    if "gpu" in out:
        g = out["gpu"]
        verdict = "fits" if g["fits"] else "does NOT fit"
        lines.append(
            f"{g['name']} ({g['memory_gib']:.1f} GiB, {100 * g['headroom']:.0f} % headroom): "
            f"{verdict}; largest micro-batch {g['max_micro_batch']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cnc-corpus estimate", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
