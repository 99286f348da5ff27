"""`cnc-corpus estimate`: peak GPU memory for one configuration (table, or --json)."""

from __future__ import annotations

import argparse
import json
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, get_args

from pydantic import ValidationError

from schemas.memory import (
    ALL_LINEAR,
    GIB,
    HEADLINE_BIAS,
    Attention,
    LossImpl,
    Measure,
    MemoryBreakdown,
    Method,
    ModelSpec,
    Offload,
    Optimizer,
    Precision,
    Quantization,
    Recompute,
    RecomputeModule,
    Stack,
    Term,
    TrainingSetup,
)

from .advice import Context, advice
from .estimate import estimate, max_micro_batch
from .gpus import FAMILIES, GPUS, Gpu, custom_gpu, resolve_gpu
from .models import PRESETS, load_config_json
from .names import resolve_model, unknown
from .policy import budget_bytes

# TrainingSetup field -> the flag that sets it, for one-line error messages.
_FLAGS = {
    "seq_len": "--seq-len",
    "micro_batch": "--micro-batch",
    "grad_accum_steps": "--grad-accum",
    "recompute_modules": "--recompute",
    "reduce_bucket_elements": "--reduce-bucket-size",
    "prefetch_bucket_elements": "--prefetch-bucket-size",
}

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


def _spelling(choices: tuple[str, ...]) -> Callable[[str], str]:
    """Accept hyphen or underscore spellings in any case (bf16-mixed == bf16_mixed)."""

    def parse(text: str) -> str:
        key = text.strip().lower().replace("-", "_")
        return next((c for c in choices if key == c.replace("-", "_")), text)

    return parse


def _one_line_error(self: argparse.ArgumentParser, message: str) -> NoReturn:
    """argparse's error without the usage block: one line, then exit 2."""
    self.exit(2, f"estimate: {message}\n")


def _choice(parser: argparse.ArgumentParser, flag: str, values: tuple[str, ...], **kw) -> None:  # type: ignore[no-untyped-def]
    parser.add_argument(flag, type=_spelling(values), choices=values, **kw)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `estimate` flags, on `parser` (errors in one line)."""
    parser.error = types.MethodType(_one_line_error, parser)  # type: ignore[method-assign]
    d = TrainingSetup()
    parser.add_argument(
        "--model",
        help=f"preset ({', '.join(PRESETS)}), its Hugging Face id in any case "
        "(Qwen/Qwen2.5-7B-Instruct: -Instruct/-Chat/-Base share the base's structure), or a "
        "config.json path",
    )
    parser.add_argument("--config-json", help="local config.json (instead of --model)")
    _add_training_arguments(parser, d)
    _add_activation_arguments(parser, d)
    _add_parallel_arguments(parser, d)
    _add_adapter_arguments(parser, d)
    _add_runtime_arguments(parser, d)
    _add_output_arguments(parser)


def _add_training_arguments(parser: argparse.ArgumentParser, d: TrainingSetup) -> None:
    """Method, precision, optimizer and batch shape."""
    _choice(parser, "--method", get_args(Method), default=d.method)
    _choice(parser, "--precision", get_args(Precision), default=d.precision)
    parser.add_argument(
        "--optimizer",
        type=_optimizer_name,
        choices=get_args(Optimizer),
        default=d.optimizer,
        help="also HF's names: paged_adamw_32bit, adamw_bnb_8bit, adamw_torch",
    )
    parser.add_argument("--optimizer-in-backward", action="store_true")
    parser.add_argument("--fused-optimizer", action="store_true", help="fused Adam: no scratch")
    parser.add_argument("--seq-len", type=int, default=d.seq_len)
    parser.add_argument("--micro-batch", type=int, default=d.micro_batch)
    parser.add_argument("--grad-accum", type=int, default=d.grad_accum_steps)
    parser.add_argument("--packing", action=argparse.BooleanOptionalAction, default=d.packing)


def _add_activation_arguments(parser: argparse.ArgumentParser, d: TrainingSetup) -> None:
    """Attention kernel, recomputation and the loss."""
    _choice(parser, "--attention", get_args(Attention), default=d.attention)
    parser.add_argument(
        "--recompute",
        default=d.recompute,
        help=f"{'|'.join(get_args(Recompute))}, or modules to checkpoint: "
        f"{','.join(get_args(RecomputeModule))}",
    )
    parser.add_argument(
        "--activation-offload",
        "--offload-activations",
        dest="activation_offload",
        action="store_true",
        help="saved activations on the host (torchtune OffloadActivations): two layers resident",
    )
    _choice(parser, "--loss", get_args(LossImpl), default=d.loss)
    parser.add_argument(
        "--loss-chunks", type=int, default=d.loss_chunks, help="chunks of --loss chunked"
    )
    parser.add_argument(
        "--liger",
        action="store_true",
        help="Liger-Kernel: fused linear cross-entropy (no full logits), fused RMSNorm/SwiGLU/RoPE",
    )
    parser.add_argument(
        "--fused-lora",
        action="store_true",
        help="fused LoRA kernels (Unsloth): no saved dropout copies or A outputs",
    )
    parser.add_argument(
        "--compile-loss",
        action="store_true",
        help="the loss runs under torch.compile (torchtitan --training.compile, torchtune "
        "compile=True with chunked CE): 16-bit logits kept, no fp32 loss buffers",
    )


def _add_parallel_arguments(parser: argparse.ArgumentParser, d: TrainingSetup) -> None:
    """DeepSpeed and FSDP settings, ZeRO stage, DP/TP/PP degrees and CPU offload."""
    parser.add_argument(
        "--deepspeed",
        action="store_true",
        help="HF Trainer under DeepSpeed: the model is cast to 16 bit and no autocast runs",
    )
    parser.add_argument(
        "--reduce-bucket-size",
        type=float,
        default=d.reduce_bucket_elements,
        metavar="ELEMENTS",
        help="DeepSpeed reduce_bucket_size of your ds_config (ZeRO-1/2's gradient buckets, "
        "ZeRO-3's contiguous-gradient bucket; HF's auto: hidden^2)",
    )
    parser.add_argument(
        "--prefetch-bucket-size",
        type=float,
        default=d.prefetch_bucket_elements,
        metavar="ELEMENTS",
        help="DeepSpeed ZeRO-3 stage3_prefetch_bucket_size of your ds_config (HF's auto: "
        "0.9 hidden^2)",
    )
    parser.add_argument(
        "--overlap-comm",
        action="store_true",
        help="DeepSpeed ZeRO-1/2 overlap_comm: a second gradient bucket",
    )
    parser.add_argument(
        "--no-reentrant",
        action="store_true",
        help="gradient checkpointing with use_reentrant=False, or checkpoint wrappers inside "
        "the FSDP units: FSDP1 then frees each layer's input and its gradient as it goes",
    )
    parser.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=d.zero)
    parser.add_argument("--fsdp", action="store_true", help="FSDP full shard (same as --zero 3)")
    parser.add_argument("--dp", type=int, default=d.dp)
    parser.add_argument("--tp", type=int, default=d.tp)
    parser.add_argument("--pp", type=int, default=d.pp)
    _choice(parser, "--offload", get_args(Offload), default=d.offload)
    parser.add_argument(
        "--fsdp-offload",
        action="store_true",
        help="FSDP CPUOffload(offload_params=True): --zero 3 --offload all",
    )
    parser.add_argument(
        "--offload-optimizer",
        choices=("none", "cpu"),
        default="none",
        help="DeepSpeed offload_optimizer.device (implies --deepspeed)",
    )
    parser.add_argument(
        "--offload-param",
        choices=("none", "cpu"),
        default="none",
        help="DeepSpeed ZeRO-3 offload_param.device, with --offload-optimizer cpu",
    )


def _add_adapter_arguments(parser: argparse.ArgumentParser, d: TrainingSetup) -> None:
    """Quantized base and LoRA adapters."""
    _choice(parser, "--quantization", get_args(Quantization), default=d.quantization)
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


def _add_runtime_arguments(parser: argparse.ArgumentParser, d: TrainingSetup) -> None:
    """CUDA context, training stack and batch shapes."""
    parser.add_argument("--cuda-context-gib", type=float, default=d.cuda_context_gib)
    _choice(
        parser,
        "--stack",
        get_args(Stack),
        default=d.stack,  # fmt: skip
        help="training stack where it matters (hf: transformers + PEFT)",
    )
    parser.add_argument(
        "--variable-length",
        action="store_true",
        help="batch shapes vary (unpacked rows): the allocator fragments toward the longest",
    )


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """What is reported, and the card to check the fit against."""
    _choice(
        parser,
        "--measure",
        get_args(Measure),
        default="reserved",  # fmt: skip
        help="figure reported as expected: allocated, reserved (what OOMs), device",
    )
    parser.add_argument(
        "--gpu",
        help=f"catalog card to check the fit against: {', '.join(GPUS)}; any spelling (RTX_4090, "
        f"4090); a name without memory size ({', '.join(FAMILIES)}) is its largest SXM board",
    )
    parser.add_argument("--gpu-mem", type=float, metavar="GIB", help="any card: memory in GiB")
    parser.add_argument(
        "--headroom",
        type=float,
        default=0.15,
        help="share of the card kept free for what no estimate covers (other processes); not an "
        "error margin: a setup fits when its plan-with figure (device total + the larger of its "
        f"regime's margin and the {100 * HEADLINE_BIAS:.0f} %% safety bias, never below PEAK) is "
        "at most (1 - headroom) "
        "of the card",
    )
    parser.add_argument(
        "--plan",
        metavar="PLAN.json",
        help="a plan.json: a shorter sequence is advised at the stage's token quantiles",
    )
    parser.add_argument("--stage", help="the stage of --plan (needed where it has several)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--explain", action="store_true", help="each term's formula and inputs, to check by hand"
    )


_OPTIMIZER_ALIASES = {
    "paged_adamw_32bit": "paged_adamw",
    "adamw_bnb_8bit": "adamw_8bit",
    "adamw_torch": "adamw",
    "adamw_torch_fused": "adamw",
}


def _optimizer_name(text: str) -> str:
    """An optimizer choice, or HF TrainingArguments' `optim` name for it."""
    key = _spelling(get_args(Optimizer))(text)
    return _OPTIMIZER_ALIASES.get(key.lower().replace("-", "_"), key)


def _offload_args(args: argparse.Namespace) -> dict[str, object]:
    """--offload, or the FSDP/DeepSpeed spellings of it: TrainingSetup fields."""
    if args.offload_param == "cpu" and args.offload_optimizer != "cpu":
        raise ValueError("--offload-param cpu is modelled with --offload-optimizer cpu only")
    if args.offload_param == "cpu" and not (args.zero == 3 or args.fsdp):
        raise ValueError("--offload-param cpu needs --zero 3 (DeepSpeed offloads params in ZeRO-3)")
    kw: dict[str, object] = {"offload": args.offload, "deepspeed": args.deepspeed}
    if args.offload_optimizer == "cpu":
        kw.update(offload="all" if args.offload_param == "cpu" else "optimizer", deepspeed=True)
    if args.fsdp_offload:
        kw.update(offload="all", zero=3)
    return kw


def setup_from_args(args: argparse.Namespace) -> TrainingSetup:
    recompute, modules = args.recompute, ()
    if recompute not in get_args(Recompute):
        modules = tuple(m.strip() for m in recompute.split(",") if m.strip())
        recompute = "full"
    offload = _offload_args(args)
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
        loss_chunks=args.loss_chunks,
        liger=args.liger,
        fused_lora=args.fused_lora,
        compile_loss=args.compile_loss,
        deepspeed=offload["deepspeed"],
        reduce_bucket_elements=args.reduce_bucket_size,
        prefetch_bucket_elements=args.prefetch_bucket_size,
        overlap_comm=args.overlap_comm,
        hf_reentrant_checkpointing=not args.no_reentrant,
        zero=offload.get("zero", 3 if args.fsdp else args.zero),
        dp=args.dp,
        tp=args.tp,
        pp=args.pp,
        offload=offload["offload"],
        quantization=args.quantization,
        double_quant=not args.no_double_quant,
        lora_rank=args.lora_rank,
        lora_targets=args.lora_targets,
        lora_dropout=args.lora_dropout,
        train_embeddings=args.train_embeddings,
        cuda_context_gib=args.cuda_context_gib,
        stack=args.stack,
        variable_length=args.variable_length,
    )


def _validation_line(exc: ValidationError) -> str:
    """The first pydantic error as one line naming the flag."""
    err = exc.errors()[0]
    field = str(err["loc"][0]) if err["loc"] else ""
    flag = _FLAGS.get(field, f"--{field.replace('_', '-')}" if field else "")
    msg = str(err["msg"]).removeprefix("Value error, ").replace("Input should be", "must be")
    return f"{flag} {err.get('input')}: {msg}" if flag else msg


def _stage_quantiles(path: str | None, stage: str | None) -> dict[str, int]:
    """The token quantiles (p50 ... max) of one stage of a plan.json, for the advice."""
    if path is None:
        if stage is not None:
            raise ValueError("--stage needs --plan PLAN.json")
        return {}
    try:
        stages = json.loads(Path(path).read_text(encoding="utf-8"))["stages"]
        names = [str(st["name"]) for st in stages]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--plan {path}: not a plan.json: {exc}") from exc
    if stage is None and len(names) == 1:
        stage = names[0]
    if stage not in names:
        raise unknown("stage", str(stage), names, f"{path} has {', '.join(names)}")
    stats = stages[names.index(stage)].get("stats", {})
    return {q: int(stats[q]) for q in ("p50", "p90", "p95", "p99", "max") if q in stats}


def _resolve(args: argparse.Namespace) -> tuple[ModelSpec, Gpu | None, list[str]]:
    """The model and card the names give, and a note for each name read as another."""
    if args.config_json:
        model, model_note = load_config_json(args.config_json), None
    elif args.model:
        model, model_note = resolve_model(args.model)
    else:
        raise ValueError("give --model or --config-json")
    gpu, gpu_note = (custom_gpu(args.gpu_mem), None) if args.gpu_mem is not None else (None, None)
    if args.gpu:
        gpu, gpu_note = resolve_gpu(args.gpu)
    return model, gpu, [n for n in (model_note, gpu_note) if n]


def run(args: argparse.Namespace) -> int:
    try:
        model, gpu, notes = _resolve(args)
        if not 0.0 <= args.headroom < 1.0:
            raise ValueError(f"--headroom must be in [0, 1), got {args.headroom}")
        quantiles = _stage_quantiles(args.plan, args.stage)
        setup = setup_from_args(args)
        if gpu is not None and gpu.count > setup.world_size:
            setup = setup.model_copy(update={"dp": gpu.count // (setup.tp * setup.pp)})
        b = estimate(model, setup)
    except ValidationError as exc:
        print(f"estimate: {_validation_line(exc)}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"estimate: {exc}", file=sys.stderr)
        return 2
    out = b.as_json(args.measure)
    if notes:
        out["names"] = notes
    if gpu is not None:
        budget = budget_bytes(gpu.memory_bytes, args.headroom)
        out["gpu"] = {
            "name": gpu.name,
            "memory_gib": round(gpu.memory_gib, 2),
            "headroom": args.headroom,
            "budget_gib": round(budget / GIB, 3),
            "fits": b.plan_with_bytes <= budget,
            "fits_expected": b.total_bytes <= budget,
            "max_micro_batch": max_micro_batch(model, setup, gpu, args.headroom),
        }
        if not out["gpu"]["fits"]:
            ctx = Context(model, setup, budget, args.measure, quantiles)
            out["advice"] = advice(ctx, b, args.headroom)
    _print(out, b, setup, args)
    return 0


def _print(out: dict, b: MemoryBreakdown, setup: TrainingSetup, args: argparse.Namespace) -> None:
    """The table (with --explain, each term's formula after it) or the JSON."""
    if args.json:
        if args.explain:
            out["explain"] = [term.as_json() for term in b.explain]
        print(json.dumps(out, indent=2))
        return
    print(_table(out, setup))
    if args.explain:
        print(explain_text(b.explain))


def _value(v: float | int | str) -> str:
    if isinstance(v, str):
        return v
    return str(int(v)) if float(v).is_integer() else f"{v:.6g}"


def explain_text(terms: tuple[Term, ...]) -> str:
    """`name = formula = GiB`, then `where input value, ...`, one term after another."""
    lines = ["", "how each term at the peak is computed (bytes; GIB = 2**30):"]
    for t in terms:
        lines.append(f"{t.name} = {t.formula} = {t.bytes / GIB:.2f} GiB")
        if t.inputs:
            lines.append("    where " + ", ".join(f"{k} {_value(v)}" for k, v in t.inputs.items()))
    return "\n".join(lines)


def _table(out: dict, s: TrainingSetup) -> str:
    lines = [
        f"{out['model']}  {s.method}  {s.precision}  {s.optimizer}  seq {s.seq_len} x "
        f"micro-batch {s.micro_batch}  recompute {s.recompute_modules or s.recompute}  "
        f"attention {s.attention}  loss {s.loss}  zero {s.zero}  dp/tp/pp {s.dp}/{s.tp}/{s.pp}  "
        f"stack {s.stack}" + ("  variable-length" if s.variable_length else ""),
        f"params {out['params'] / 1e9:.2f} B, trainable {out['trainable_params'] / 1e6:.1f} M",
        "",
        f"at the peak ({out['peak_phase']}):",
        f"{'term':<22}{'GiB':>10}",
    ]
    for name, v in out["breakdown"].items():
        note = "  (not alive at this phase)" if v["bytes"] == 0 and name == "gradients" else ""
        lines.append(f"{name:<22}{v['gib']:>10.2f}{note}")
    lines += [
        f"{'device total':<22}{out['device_gib']:>10.2f}",
        "",
        f"PEAK ({out['measure']}, per device): {out['total_gib']:.2f} GiB "
        f"(expected {out['expected_gib']:.2f} GiB + {100 * out['safety_bias']:.0f} % safety bias, "
        "docs/calibration.md)",
        "phases: " + ", ".join(f"{k} {v:.2f}" for k, v in out["phases_gib"].items()) + " GiB",
        f"allocated {out['allocated_gib']:.2f} GiB, reserved {out['reserved_gib']:.2f} GiB, "
        f"device {out['device_gib']:.2f} GiB",
        "plan with "
        f"{out['plan_with_gib']:.2f} GiB (device total + {100 * out['plan_margin']:.0f} % margin: "
        f"regime '{out['regime']}''s, at least the safety bias, so never below PEAK)",
    ]
    lines[:0] = out.get("names", [])
    if "gpu" in out:
        g = out["gpu"]
        head = (
            f"{g['name']} ({g['memory_gib']:.1f} GiB, {100 * g['headroom']:.0f} % headroom: "
            f"budget {g['budget_gib']:.2f} GiB): "
        )
        if g["fits"]:
            lines.append(head + f"fits; largest micro-batch {g['max_micro_batch']}")
        else:
            a = out["advice"]
            lines.append(
                head + f"does NOT fit: plan with {out['plan_with_gib']:.2f} GiB > budget. "
                f"Largest term: {a['dominant_term']} ({a['dominant_gib']:.2f} GiB)."
            )
            if g["max_micro_batch"] == 0:
                lines.append("Not even micro-batch 1 fits.")
            lines += _advice_lines(a)
    return "\n".join(lines)


_NO_CARD = "none of the catalog's single cards"


def _advice_lines(a: dict) -> list[str]:
    """The proposals by group, in order, each with its figures and whether it fits."""
    lines = ["Changes, in this order (each alone unless marked together):"]
    group = None
    for p in a["proposals"]:
        if p["group"] != group:
            group = p["group"]
            lines.append(f"  {group}:")
        lines.append(
            f"    {p['change']:<54} expected {p['expected_gib']:>7.2f}, PEAK "
            f"{p['peak_gib']:>7.2f}, plan with {p['plan_with_gib']:>7.2f} GiB: "
            + ("fits" if p["fits"] else "does not fit")
        )
    cards = ", ".join(a["cards_that_fit"]) or _NO_CARD
    return [*lines, f"Cards that fit it as is: {cards}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cnc-corpus estimate", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
