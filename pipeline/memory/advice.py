"""Advice when a setup does not fit its card, in the order a user would try it.

First what keeps the method on the same cards: a shorter sequence (the stage's token
quantiles when a plan is given, else halving), a smaller micro-batch with the gradient
accumulation that keeps the tokens per step, recomputation, an 8-bit or paged optimizer,
optimizer offload to the CPU, a chunked or fused loss, activation offload; where none fits
alone, those that help, together. Then another method (LoRA, QLoRA), then more GPUs (ZeRO-3 /
FSDP). Each family is shown by its first candidate that fits, else its last one tried; each
with its expected, PEAK and plan-with figures and whether it fits (policy.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from schemas.memory import GIB, Measure, MemoryBreakdown, ModelSpec, TrainingSetup

from .estimate import estimate
from .gpus import GPUS
from .policy import budget_bytes

SAME_CARDS = "same method, same cards"
OTHER_METHOD = "another method"
MORE_GPUS = "more GPUs"
_QUANTILES = ("p99", "p95", "p90", "p50")
_MIN_SEQ = 256


@dataclass(frozen=True)
class Candidate:
    """One change of the setup: its flags, the fields it sets, and its group."""

    change: str
    update: dict[str, object]
    group: str = SAME_CARDS


@dataclass(frozen=True)
class Context:
    """What the advice is judged against."""

    model: ModelSpec
    setup: TrainingSetup
    budget: float
    measure: Measure = "reserved"
    quantiles: dict[str, int] = field(default_factory=dict)  # the stage's token quantiles
    seq_multiple: int = 128


def _seq_family(c: Context) -> list[Candidate]:
    """Shorter sequences: the stage's quantiles below the current length, else halvings."""
    s, out, seen = c.setup, [], set()
    if c.quantiles:
        for q in (q for q in _QUANTILES if q in c.quantiles):
            seq = math.ceil(c.quantiles[q] / c.seq_multiple) * c.seq_multiple
            if seq < s.seq_len and seq not in seen:
                seen.add(seq)
                rows = 100 - int(q[1:])
                out.append(Candidate(f"--seq-len {seq} (the stage's {q}: ~{rows} % of rows "
                                     "truncated)", {"seq_len": seq}))  # fmt: skip
        return out
    seq = s.seq_len // 2
    while seq >= _MIN_SEQ and len(out) < 3:
        out.append(Candidate(f"--seq-len {seq} (halved: longer rows cut)", {"seq_len": seq}))
        seq //= 2
    return out


def _batch_family(s: TrainingSetup) -> list[Candidate]:
    """Smaller micro-batches, the accumulation raised so each step sees as many tokens."""
    out, b = [], s.micro_batch
    tokens = s.micro_batch * s.grad_accum_steps * s.seq_len
    while b > 1 and s.micro_batch % (b // 2) == 0:
        b //= 2
        accum = s.grad_accum_steps * s.micro_batch // b
        text = f"--micro-batch {b} --grad-accum {accum} ({tokens:,} tokens/step kept)"
        out.append(Candidate(text, {"micro_batch": b, "grad_accum_steps": accum}))
    return out


def _recompute_family(s: TrainingSetup) -> list[Candidate]:
    out = []
    if s.recompute == "none" and not s.recompute_modules:
        out.append(Candidate("--recompute selective", {"recompute": "selective"}))
    if s.recompute != "full" or s.recompute_modules:
        out.append(Candidate("--recompute full", {"recompute": "full", "recompute_modules": ()}))
    return out


def _optimizer_family(s: TrainingSetup) -> list[Candidate]:
    """8-bit states (with pure bf16 weights, torchtune's full-FT setting), paged states."""
    if s.method != "full":
        return []
    out = []
    if not s.optimizer.endswith("8bit"):
        out.append(Candidate("--optimizer adamw_8bit", {"optimizer": "adamw_8bit"}))
        if s.precision == "bf16_mixed":
            out.append(Candidate("--precision bf16 --optimizer adamw_8bit (pure bf16)",
                                 {"precision": "bf16", "optimizer": "adamw_8bit"}))  # fmt: skip
    if not s.optimizer.startswith("paged"):
        out.append(Candidate("--optimizer paged_adamw_8bit", {"optimizer": "paged_adamw_8bit"}))
    return out


def _offload_family(s: TrainingSetup) -> list[Candidate]:
    if s.method != "full" or s.offload != "none":
        return []
    text = "--offload optimizer (ZeRO-Offload / FSDP CPU offload)"
    return [Candidate(text, {"offload": "optimizer"})]


def _shard_family(s: TrainingSetup) -> list[Candidate]:
    """Data-parallel already: shard everything over the same GPUs."""
    if s.dp > 1 and s.zero < 3:
        return [Candidate("--zero 3 (ZeRO-3 / FSDP on the same GPUs)", {"zero": 3})]
    return []


def _loss_family(s: TrainingSetup) -> list[Candidate]:
    out = []
    if s.loss == "standard":
        out.append(Candidate("--loss chunked", {"loss": "chunked"}))
    if s.loss != "fused":
        out.append(Candidate("--loss fused (Liger / CCE: no logits)", {"loss": "fused"}))
    return out


def same_card_families(c: Context) -> list[list[Candidate]]:
    """The changes that keep the method on the same cards, by family, in the user's order."""
    s = c.setup
    if s.method == "inference":
        return [_seq_family(c), _batch_family(s)]
    act = [Candidate("--activation-offload", {"activation_offload": True})]
    return [
        _seq_family(c),
        _batch_family(s),
        _recompute_family(s),
        _optimizer_family(s),
        _offload_family(s),
        _loss_family(s),
        [] if s.activation_offload else act,
        _shard_family(s),
    ]


def other_families(s: TrainingSetup) -> list[list[Candidate]]:
    """Another method, then more GPUs (ZeRO-3 / FSDP)."""
    methods: list[Candidate] = []
    if s.method == "full":
        methods.append(Candidate("--method lora", {"method": "lora"}, OTHER_METHOD))
    if s.method in ("full", "lora") and s.quantization in ("auto", "none"):
        update = {"method": "qlora", "quantization": "auto"}
        methods.append(Candidate("--method qlora", update, OTHER_METHOD))
    gpus: list[Candidate] = []
    if s.method != "inference" and s.world_size == 1:
        gpus = [Candidate(f"--zero 3 --dp {n} ({n} GPUs: ZeRO-3 / FSDP)", {"zero": 3, "dp": n},
                          MORE_GPUS) for n in (2, 4, 8)]  # fmt: skip
    return [[m] for m in methods] + [gpus]


def judged(c: Context, cand: Candidate) -> tuple[dict[str, object], MemoryBreakdown]:
    """A candidate with its expected, PEAK and plan-with figures and whether it fits."""
    e = estimate(c.model, c.setup.model_copy(update=cand.update))
    row = {
        "group": cand.group,
        "change": cand.change,
        "expected_gib": round(e.measured(c.measure) / GIB, 2),
        "peak_gib": round(e.headline(c.measure) / GIB, 2),
        "plan_with_gib": round(e.plan_with_bytes / GIB, 2),
        "fits": e.plan_with_bytes <= c.budget,
    }
    return row, e


def _first_fit(c: Context, family: list[Candidate], now: int) -> dict[str, object] | None:
    """The family's first candidate that fits, else its last one (the furthest it goes); None
    where that lowers the plan-with figure (`now`, bytes) by less than 1 %."""
    for cand in family:
        row, e = judged(c, cand)
        if row["fits"]:
            return row
    return row if family and e.plan_with_bytes < 0.99 * now else None


def _together(c: Context, families: list[list[Candidate]]) -> dict[str, object] | None:
    """Where no same-card change fits alone: greedily, the next change of the family that
    lowers the plan-with figure most (a family's later change replacing its earlier), until
    the setup fits; the fewest changes, the mildest of each family first."""
    setup, best = c.setup, estimate(c.model, c.setup).plan_with_bytes
    depth, flags = [0] * len(families), {}
    while True:
        tried = [
            (judged(replace(c, setup=setup), f[depth[i]]), i)
            for i, f in enumerate(families)
            if depth[i] < len(f)
        ]
        if not tried:
            return None
        (row, e), i = min(tried, key=lambda t: (t[0][1].plan_with_bytes, t[1]))
        if e.plan_with_bytes >= best:
            return None
        cand = families[i][depth[i]]
        flags[i], depth[i] = cand.change.split(" (")[0], depth[i] + 1
        setup, best = setup.model_copy(update=cand.update), e.plan_with_bytes
        if row["fits"]:
            order = " ".join(flags[k] for k in sorted(flags))
            return {**row, "change": order + " (together)"}


def proposals(c: Context) -> list[dict[str, object]]:
    """Every family's proposal in the user's order: same cards, another method, more GPUs."""
    now = estimate(c.model, c.setup).plan_with_bytes
    same = same_card_families(c)
    rows = [r for f in same if (r := _first_fit(c, f, now)) is not None]
    if not any(r["fits"] for r in rows) and (both := _together(c, same)) is not None:
        rows.append(both)
    rows += [r for f in other_families(c.setup) if (r := _first_fit(c, f, now)) is not None]
    return rows


def cards_that_fit(b: MemoryBreakdown, headroom: float, limit: int = 3) -> list[str]:
    """The smallest single catalog cards the setup fits as is, by memory then name: the one
    list the table and --json both show."""
    cards = sorted({g for g in GPUS.values() if g.count == 1}, key=lambda g: (g.memory_mib, g.name))
    fit = [g.name for g in cards if b.plan_with_bytes <= budget_bytes(g.memory_bytes, headroom)]
    return fit[:limit]


def advice(c: Context, b: MemoryBreakdown, headroom: float) -> dict[str, object]:
    """Why it does not fit (the dominant term), the proposals, and the cards that fit."""
    terms = b.terms()
    dominant = max(terms, key=lambda k: terms[k])
    return {
        "dominant_term": dominant,
        "dominant_gib": round(terms[dominant] / GIB, 2),
        "proposals": proposals(c),
        "cards_that_fit": cards_that_fit(b, headroom),
    }
