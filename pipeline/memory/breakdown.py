"""From the terms alive at each moment of a step to the peak per device (a MemoryBreakdown).

Each moment's allocated bytes are the static terms plus that moment's; the allocator's reserve
and the CUDA context and NCCL buffers go on top (overhead.py), and so do bitsandbytes' paged
optimizer states, which live in unified memory the allocator never sees. The peak is the moment
with the most reserved memory; its calibration regime picks the plan margin (policy.py).
"""

from __future__ import annotations

from schemas.memory import MemoryBreakdown, ModelSpec, Term, TrainingSetup

from .overhead import overhead_bytes, overhead_terms
from .params import ParamCounts
from .policy import plan_margin
from .weights import quant_bytes


def peak_breakdown(
    m: ModelSpec,
    s: TrainingSetup,
    pc: ParamCounts,
    trainable: float,
    static: float,
    components: dict[str, float],
    moments: dict[str, dict[str, float]],
    paged: float = 0.0,
    explain: dict[str, tuple[Term, ...]] | None = None,
    stream_pool: dict[str, float] | None = None,
) -> MemoryBreakdown:
    """`static`: bytes alive at every moment; `moments`: each moment's other terms;
    `components`: each term at its largest; `paged`: paged optimizer states; `explain`: each
    moment's terms with their formulas (the overheads are added here); `stream_pool`: per
    moment, what other streams' pools keep cached then (parallel.gradient_stream_pool_bytes).

    The peak is the moment with the most allocated + reserve. The cache never shrinks within
    a run, so what is reserved then is the largest reserved of any moment, counting the other
    streams' pools: reserve at the peak += max(0, max over moments m of (allocated_m +
    reserve_m + stream_pool_m) - (allocated_peak + reserve_peak))."""
    pools = stream_pool or {}
    phases, parts, best, most_reserved = _moments(s, static, moments, paged, pools)
    allocated, phase, terms, reserve, fixed = best
    carried = max(0.0, most_reserved - allocated - reserve)
    reserve += carried
    name = regime(s)
    explained = (explain or {}).get(phase, ())
    if explained:
        reserve_term, context_term = overhead_terms(
            s, sum(terms.values()), shaped_of(terms), carried
        )
        explained += (reserve_term, context_term)
    return MemoryBreakdown(
        model=m.name,
        params=pc.total,
        trainable_params=int(trainable),
        weights=int(components["weights"]),
        gradients=int(terms.get("gradients", 0.0)),
        optimizer=int(components["optimizer"]),
        optimizer_step_temp=int(terms.get("optimizer_step_temp", 0.0)),
        activations=int(terms.get("activations", 0.0)),
        logits_and_loss=int(terms.get("logits_and_loss", 0.0)),
        adapters=int(components["adapters"]),
        buffers=int(components["buffers"]),
        allocator_reserve=int(reserve),
        context=int(fixed - paged),
        paged_optimizer=int(paged),
        peak_phase=phase,  # type: ignore[arg-type]
        phases=phases,
        phase_parts=parts,
        variable_length=s.variable_length,
        components={k: int(v) for k, v in components.items()},
        regime=name,
        plan_margin=plan_margin(name),
        allocated_bytes=int(allocated),
        reserved_bytes=int(allocated + reserve),
        total_bytes=int(allocated + reserve + fixed),
        explain=explained,
    )


_Peak = tuple[float, str, dict[str, float], float, float]


def _moments(
    s: TrainingSetup,
    static: float,
    moments: dict[str, dict[str, float]],
    paged: float,
    pools: dict[str, float],
) -> tuple[dict[str, int], dict[str, tuple[int, int, int, int]], _Peak, float]:
    """Each moment's device total and parts, the peak moment (allocated, name, terms, reserve,
    context + paged) and the most any moment reserves with other streams' pools."""
    phases: dict[str, int] = {}
    parts: dict[str, tuple[int, int, int, int]] = {}
    best: _Peak | None = None
    most_reserved = 0.0
    for name, terms in moments.items():
        allocated = static + sum(terms.values())
        dynamic, shaped, pool = sum(terms.values()), shaped_of(terms), pools.get(name, 0.0)
        parts[name] = (int(allocated), int(dynamic), int(shaped), int(pool))
        reserve, fixed = overhead_bytes(s, dynamic, shaped)
        fixed += paged
        phases[name] = int(allocated + reserve + pool + fixed)
        most_reserved = max(most_reserved, allocated + reserve + pool)
        if best is None or allocated + reserve > best[0] + best[3]:
            best = (allocated, name, terms, reserve, fixed)
    assert best is not None
    return phases, parts, best, most_reserved


def shaped_of(terms: dict[str, float]) -> float:
    """The loss buffers of a moment: the blocks that fragment the cache."""
    return terms.get("logits_and_loss", 0.0)


def regime(s: TrainingSetup) -> str:
    """The calibration regime of a setup: method and base, then how states are placed."""
    if s.method == "inference":
        return "inference"
    if s.method == "qlora" or quant_bytes(s) is not None:
        q = s.quantization if s.quantization != "auto" else "nf4"
        name = {"gptq_int4": "QLoRA (GPTQ int4)", "nf4": "QLoRA (NF4)"}.get(q, "LoRA (int8 base)")
    elif s.method == "lora":
        name = "LoRA + trainable embeddings" if s.train_embeddings else "LoRA"
    else:
        name = "full"
    if s.optimizer.startswith("paged") or s.offload != "none":
        name += ", paged/offloaded states"
    elif s.world_size > 1:
        name += ", sharded/parallel"
    return name
