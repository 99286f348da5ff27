"""Peak GPU memory per device for training or serving a Llama/Qwen-style decoder.

The terms follow the physics in ../shared/reference/gpu-memory.md, one module per family:
params.py (parameter counts), weights.py (base weights, quantized bases), optimizer.py
(gradients, optimizer states, step scratch), adapters.py (LoRA, trainable embeddings),
parallel.py (TP/PP split, ZeRO/FSDP sharding and its buffers), activations.py, logits.py (the
loss spike), overhead.py (allocator reserve, CUDA context, NCCL) and inference.py (serving).
Here they are composed into the moments of a training step (start of backward, a layer's
backward, optimizer step), and breakdown.py picks the peak among them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from schemas.memory import MemoryBreakdown, ModelSpec, Term, TrainingSetup, zero_term

from .activations import StageActivations, stage_activations
from .adapters import lora_states, trainable_embeddings, trained_gradient_bytes
from .breakdown import peak_breakdown
from .explain import state_terms
from .gpus import Gpu
from .inference import inference_breakdown
from .logits import held_output_bytes, held_output_term, logits_bytes, logits_term
from .optimizer import (
    OptimizerStates,
    applied_in_backward,
    full_training_states,
    state_bytes_per_param,
)
from .parallel import (
    StageParams,
    fsdp1_frozen_gradient_shards,
    fsdp1_root_unit_bytes,
    gathered_layer_bytes,
    gradient_stream_pool_bytes,
    gradients_persist,
    micro_batches_in_flight,
    sharding_buffer_bytes,
    stage_params,
    weight_shards,
    zero3_bucket_bytes,
)
from .params import ParamCounts, param_counts
from .weights import base_weight_bytes, dequantized_linear_bytes, quant_bytes


@dataclass(frozen=True)
class _States:
    """What one device keeps of the model and its training, in bytes (`trainable`: params)."""

    trainable: float
    weights: float
    gradients: float
    optimizer: float
    step_temp: float
    adapters: float
    buffers: float = 0.0
    paged: float = 0.0  # paged optimizer states, outside the allocator
    grad_shards: float = 0.0  # sharded gradients of what trains, before any offload


def estimate(m: ModelSpec, s: TrainingSetup) -> MemoryBreakdown:
    """Peak memory per device. With pipeline parallelism, the more loaded of first/last stage."""
    if s.method == "inference":
        return inference_breakdown(m, s)
    stages = ["only"] if s.pp == 1 else ["first", "last"]
    results = [_train_stage(m, s, stage) for stage in stages]
    return max(results, key=lambda r: r.total_bytes)


def _train_stage(m: ModelSpec, s: TrainingSetup, stage: str) -> MemoryBreakdown:
    pc = param_counts(m)
    part = stage_params(m, s, pc, stage)
    states = _model_states(m, s, pc, part)
    in_flight = micro_batches_in_flight(s, stage)
    acts = stage_activations(m, s, part.layers, in_flight, part.has_head)
    logits = logits_bytes(m, s) if part.has_head else 0.0
    held = held_output_bytes(m, s) if part.has_head else 0.0
    terms = state_terms(m, s, pc, part, states.trainable)
    no_head = zero_term("logits_and_loss", "no head here")
    terms["logits_and_loss"] = logits_term(m, s) if part.has_head else no_head
    terms["held_output"] = held_output_term(m, s) if part.has_head else no_head
    explain = _explained(s, terms, acts)
    return _step_moments(m, s, pc, states, acts, (logits, held), explain)


def _explained(
    s: TrainingSetup, terms: dict[str, Term], acts: StageActivations
) -> dict[str, tuple[Term, ...]]:
    """Each moment's terms with their formulas, as `_step_moments` adds them up."""
    static = tuple(terms[k] for k in ("weights", "optimizer", "adapters", "buffers") if k in terms)
    static += (terms["paged_optimizer"],) if "paged_optimizer" in terms else ()
    grads_alive = s.grad_accum_steps > 1 or s.optimizer_in_backward or gradients_persist(s)
    g_fwd = terms["gradients"] if grads_alive else zero_term("gradients", "none before backward")
    held = (terms["held_output"],) if terms["held_output"].bytes else ()
    return {
        "backward_start": static + (g_fwd, acts.stored_term, terms["logits_and_loss"]),
        "layer_backward": static + (g_fwd, acts.layer_backward_term) + held,
        "optimizer_step": static + (terms["gradients"], terms["optimizer_step_temp"]) + held,
    }


def _model_states(m: ModelSpec, s: TrainingSetup, pc: ParamCounts, part: StageParams) -> _States:
    """Weights, gradients, optimizer states, adapters and buffers of a stage, where they live."""
    w_b = state_bytes_per_param(s)[0]
    base_w = base_weight_bytes(s, pc, part.layers, part.params, w_b)
    states = _trained_states(m, s, pc, part, base_w / weight_shards(s))
    quant = quant_bytes(s)
    gathered = gathered_layer_bytes(s, pc, quant, w_b)
    buffers = sharding_buffer_bytes(s, gathered, states.trainable)
    if quant is not None:  # one linear dequantized
        buffers += dequantized_linear_bytes(pc, s.tp)
    gradients = states.gradients + fsdp1_frozen_gradient_shards(s, base_w)
    shards = gradients + trained_gradient_bytes(s, states.trainable if s.method != "full" else 0)
    states = replace(states, gradients=gradients, buffers=buffers, grad_shards=shards)
    states = _placed(states, s, gathered)
    return replace(states, buffers=states.buffers + fsdp1_root_unit_bytes(s, pc, part, w_b))


def _trained_states(
    m: ModelSpec, s: TrainingSetup, pc: ParamCounts, part: StageParams, weights: float
) -> _States:
    """What trains: every weight (full), or the adapters and any trainable embeddings."""
    if s.method == "full":
        trainable, adapters = part.params, 0.0
        opt = full_training_states(s, part.params)
    else:
        lora = lora_states(m, s, part.layers)
        trainable, adapters = lora.params, lora.adapters
        opt = OptimizerStates(0.0, 0.0, lora.step_temp)
        if s.train_embeddings:
            trainable += part.embedding_like
            copy, emb = trainable_embeddings(s, part.embedding_like)
            weights += copy
            opt = OptimizerStates(emb.gradients, emb.optimizer, opt.step_temp + emb.step_temp)
    opt = applied_in_backward(opt, s, pc)
    return _States(trainable, weights, opt.gradients, opt.optimizer, opt.step_temp, adapters)


def _placed(st: _States, s: TrainingSetup, gathered: float) -> _States:
    """States moved off the allocator: paged optimizer states, CPU offload.

    Paged optimizers (bitsandbytes PagedAdamW / PagedAdamW8bit; HF's paged_adamw_32bit and
    paged_adamw_8bit) allocate their states in CUDA unified memory (cudaMallocManaged), outside
    torch's caching allocator: torch.cuda.max_memory_allocated/reserved never see them, and the
    driver evicts their pages to the host under memory pressure. They count in the device total
    only, as fully resident pages (an upper bound: under pressure the device holds less), and
    their step is a fused kernel (no scratch).

    offload="optimizer": the optimizer states and their step on the host. DeepSpeed's
    offload_optimizer (ZeRO-1/2/3) also copies each gradient partition to a pinned host buffer
    as it is reduced, so the device keeps its 16-bit weights and the reduce buckets (buffers)
    but no gradients; torchao's CPUOffloadOptimizer (offload_gradients=False, its default) keeps
    the gradients on the device.

    offload="all" (FSDP CPUOffload(offload_params=True); DeepSpeed ZeRO-3 offload_param with
    offload_optimizer): the parameter shards (LoRA adapters' too: they are flat parameters of
    their own units), their gradients and optimizer states live on the host and the optimizer
    steps there. The device holds the gathered units in flight (the current and the prefetched
    layer, and the current one's unsharded gradient before its reduce-scatter and copy to the
    host: gathered_layer_bytes), FSDP1's root unit (fsdp1_root_unit_bytes), the activations and
    the loss, and under FSDP the sharded gradients the reduce-scatter wrote on the device
    (`_saved_grad_shard`, kept until the end of backward after their copy to `_cpu_grad`), in
    the reduce-scatter stream's pool (parallel.gradient_stream_pool_bytes).
    """
    if s.optimizer.startswith("paged"):
        st = replace(st, paged=st.optimizer, optimizer=0.0, step_temp=0.0)
    if s.offload in ("optimizer", "all"):
        st = replace(st, optimizer=0.0, step_temp=0.0, paged=0.0)
    if s.offload == "optimizer" and s.deepspeed:
        st = replace(st, gradients=0.0)
    if s.offload == "all":
        buffers = gathered + (zero3_bucket_bytes(s) if s.deepspeed else 0.0)
        st = replace(st, weights=0.0, buffers=buffers, gradients=0.0, adapters=0.0)
    return st


def _step_moments(
    m: ModelSpec,
    s: TrainingSetup,
    pc: ParamCounts,
    st: _States,
    acts: StageActivations,
    loss: tuple[float, float],
    explain: dict[str, tuple[Term, ...]],
) -> MemoryBreakdown:
    """The moments of a training step that can peak: the start of backward (the loss spike), a
    layer's backward, and the optimizer step (unless it runs in backward). `loss`: the loss
    spike and the held output's logits (alive after it too)."""
    logits, held = loss
    grads_alive = s.grad_accum_steps > 1 or s.optimizer_in_backward or gradients_persist(s)
    g_fwd = st.gradients if grads_alive else 0.0
    static = st.weights + st.optimizer + st.adapters + st.buffers
    moments = {
        "backward_start": dict(gradients=g_fwd, activations=acts.stored, logits_and_loss=logits),
        "layer_backward": dict(
            gradients=g_fwd, activations=acts.layer_backward, logits_and_loss=held
        ),
    }
    if not s.optimizer_in_backward:
        moments["optimizer_step"] = dict(
            gradients=st.gradients, optimizer_step_temp=st.step_temp, logits_and_loss=held
        )
    pool = gradient_stream_pool_bytes(s, st.grad_shards if s.offload == "all" else st.gradients)
    pools = {k: max(0.0, pool - v.get("gradients", 0.0)) for k, v in moments.items()}
    components = dict(
        weights=st.weights,
        gradients=st.gradients,
        optimizer=st.optimizer,
        optimizer_step_temp=st.step_temp,
        activations=acts.layer_backward,
        logits_and_loss=logits,
        adapters=st.adapters,
        buffers=st.buffers,
    )
    return peak_breakdown(
        m, s, pc, st.trainable, static, components, moments, st.paged, explain, pools
    )


def fits(
    m: ModelSpec, s: TrainingSetup, gpu: Gpu, headroom: float = 0.15, conservative: bool = True
) -> bool:
    """True if the device total stays below (1 - headroom) of the card's memory; with
    `conservative`, the plan-with figure (total plus its regime's margin) is what must fit."""
    b = estimate(m, s)
    need = b.plan_with_bytes if conservative else b.total_bytes
    return need <= gpu.memory_bytes * (1.0 - headroom)


def max_micro_batch(
    m: ModelSpec,
    s: TrainingSetup,
    gpu: Gpu,
    headroom: float = 0.15,
    limit: int = 1024,
    conservative: bool = True,
) -> int:
    """Largest micro-batch (rows of `s.seq_len`) that fits with `headroom`; 0 if none does.

    A `gpu` with several devices trains data-parallel over them: the setup's `dp` is raised to
    the device count (sharding follows `s.zero`).
    """
    if not 0.0 <= headroom < 1.0:
        raise ValueError(f"headroom must be in [0, 1), got {headroom}")
    if gpu.count > s.world_size:
        s = s.model_copy(update={"dp": gpu.count // (s.tp * s.pp)})

    def ok(b: int) -> bool:
        return fits(m, s.model_copy(update={"micro_batch": b}), gpu, headroom, conservative)

    if not ok(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and ok(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:  # memory is monotone in the micro-batch
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo
