"""What parallelism gives one device: its TP/PP share of the model, the ZeRO/FSDP sharding of
its states over the data-parallel degree, and the buffers that sharding needs.

Buffers: ZeRO-3/FSDP gather the current and the prefetched layer (plus DeepSpeed ZeRO-3's
prefetch and contiguous-gradient buckets, and its gradient partitions alive throughout),
DeepSpeed ZeRO-1/2's gradient buckets (reduce_bucket_size, two with overlap_comm, whatever
trains), other ZeRO-1/2 reduce and all-gather buckets; FSDP1 under Lightning keeps a gradient
shard for frozen base weights in a flat parameter that also holds adapters, and FSDP1 keeps its
root unit unsharded through backward. FSDP's gradient shards sit in the reduce-scatter stream's
pool of the caching allocator (gradient_stream_pool_bytes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from schemas.memory import ModelSpec, TrainingSetup

from .params import ParamCounts
from .weights import kbit_upcast, quant_bytes

# ZeRO-1/2 reduce and all-gather buckets outside DeepSpeed, in 16-bit elements (DeepSpeed's
# own buckets and ZeRO-3 prefetch bucket are TrainingSetup fields, DeepSpeed's defaults).
ZERO_BUCKET_ELEMENTS = 5e8


@dataclass(frozen=True)
class StageParams:
    """The parameters one device holds of a pipeline stage, after the TP split."""

    layers: int  # decoder layers of the stage
    has_head: bool  # the last stage: final norm, lm_head and the loss
    params: float  # decoder layers, embedding, lm_head and final norm held
    embedding_like: float  # embedding and lm_head: never quantized


def stage_layers(m: ModelSpec, s: TrainingSetup) -> int:
    return math.ceil(m.num_layers / s.pp)


def stage_params(m: ModelSpec, s: TrainingSetup, pc: ParamCounts, stage: str) -> StageParams:
    """`stage`: "only" without pipeline parallelism, else "first" or "last"."""
    n_layers = stage_layers(m, s)
    has_embed = stage in ("only", "first")
    has_head = stage in ("only", "last")
    tp = s.tp
    layer_params = pc.per_layer * n_layers / tp
    embed_params = pc.embedding / tp if has_embed else 0.0
    head_params = 0.0  # a tied head needs its own copy when it sits on a later stage
    if has_head:
        head_params = (pc.lm_head if stage == "only" else pc.lm_head or pc.embedding) / tp
    params = layer_params + embed_params + head_params + (pc.final_norm if has_head else 0)
    return StageParams(n_layers, has_head, params, embed_params + head_params)


def micro_batches_in_flight(s: TrainingSetup, stage: str) -> int:
    """Micro-batches whose activations a stage holds: the first stage of a pipeline holds up to
    pp of them (1F1B), every other stage one."""
    return min(s.pp, s.grad_accum_steps) if stage == "first" else 1


def data_shards(s: TrainingSetup) -> int:
    """Devices ZeRO/FSDP shard the optimizer states over (1 without ZeRO)."""
    return s.dp if s.zero >= 1 else 1


def gradient_shards(s: TrainingSetup) -> int:
    """Devices the gradients are sharded over: from ZeRO-2."""
    return data_shards(s) if s.zero >= 2 else 1


def weight_shards(s: TrainingSetup) -> int:
    """Devices the weights are sharded over: ZeRO-3 / FSDP full shard."""
    return data_shards(s) if s.zero == 3 else 1


def ipg_buffer_bytes(s: TrainingSetup) -> float:
    """DeepSpeed ZeRO-1/2 gradient buckets: one or (overlap_comm) two of reduce_bucket_size."""
    return s.reduce_bucket_elements * (2 if s.overlap_comm else 1) * 2.0


def gathered_layer_bytes(
    s: TrainingSetup, pc: ParamCounts, quant: float | None, weight_bytes: float
) -> float:
    """ZeRO-3 / FSDP: the current and the prefetched layer unsharded, plus the unsharded
    gradient of the current layer before its reduce-scatter (when the weights train)."""
    layer_w = pc.per_layer / s.tp * (quant if quant is not None else weight_bytes)
    full = s.method == "full"
    return 2 * layer_w + (pc.per_layer / s.tp * weight_bytes if full else 0.0)


def zero3_bucket_bytes(s: TrainingSetup) -> float:
    """DeepSpeed ZeRO-3's device buffers beyond the gathered layers, 16-bit elements x 2 B:
    the prefetch bucket (`stage3_prefetch_bucket_size`, default 5e7) and the contiguous-gradient
    bucket that stage3.py's `_setup_for_real_optimizer` allocates once when
    `contiguous_gradients` (default true): `__ipg_bucket_flat_buffer =
    torch.empty(reduce_bucket_size)` (default 5e8). (prefetch + reduce) x 2 B; HF's "auto"
    makes them 0.9 hidden^2 and hidden^2."""
    return (s.prefetch_bucket_elements + s.reduce_bucket_elements) * 2.0


def gradients_persist(s: TrainingSetup) -> bool:
    """DeepSpeed ZeRO-3 keeps its gradient partitions in one flat buffer allocated at init
    (stage3.py `_setup_for_real_optimizer`: `grad_partitions_flat_buffer =
    torch.zeros(sum(p.partition_numel()))` on the device unless the optimizer is offloaded),
    so they are alive at every moment of the step, not only from backward to the step."""
    return s.deepspeed and s.zero == 3 and data_shards(s) > 1


def sharding_buffer_bytes(s: TrainingSetup, gathered: float, trainable: float) -> float:
    """ZeRO-3 / FSDP: the gathered layers (plus DeepSpeed's prefetch and contiguous-gradient
    buckets). ZeRO-1/2: reduce and all-gather buckets of what trains."""
    shard = data_shards(s)
    if s.zero == 3 and shard > 1:
        return gathered + (zero3_bucket_bytes(s) if s.deepspeed else 0.0)
    if s.zero in (1, 2) and s.deepspeed:
        # DeepSpeed's ZeRO-1/2 optimizer allocates its contiguous-gradient (ipg) buffer at every
        # backward, `reduce_bucket_size` 16-bit elements whatever trains (one GPU too), and a
        # second one with `overlap_comm` (stage_1_and_2.py backward(): "double buffers to avoid
        # data access conflict"); the post-step all-gather writes into the 16-bit partitions.
        return ipg_buffer_bytes(s)
    if s.zero in (1, 2) and shard > 1:  # reduce and all-gather buckets of what trains
        return 2 * min(ZERO_BUCKET_ELEMENTS, trainable) * 2.0
    return 0.0


def fsdp1_frozen_gradient_shards(s: TrainingSetup, base_weights: float) -> float:
    """Lightning's FSDP1 flat parameter holds the adapters and the frozen base weights of a
    unit: the frozen weights get gradient shards too (unquantized base)."""
    lightning_fsdp = s.zero == 3 and data_shards(s) > 1 and s.stack == "lightning"
    if lightning_fsdp and s.method != "full" and quant_bytes(s) is None:
        return base_weights / data_shards(s)
    return 0.0


def fsdp1_root_unit_bytes(
    s: TrainingSetup, pc: ParamCounts, part: StageParams, weight_bytes: float
) -> float:
    """FSDP1 (accelerate, Lightning, hand-written loops) does not reshard the root unit after
    forward, "with the intention that they are immediately used for backward": what is outside
    the wrapped decoder layers (embeddings, final norm, lm_head) stays unsharded through the
    backward pass, the whole of it when the parameters are offloaded. The PyTorch-native recipes
    (FSDP2) can shard embeddings and output as their own units (torchtune's
    custom_sharded_layers), so not counted."""
    shard = data_shards(s)
    if not (s.zero == 3 and shard > 1 and not s.deepspeed and s.stack in ("hf", "lightning")):
        return 0.0
    root_b = 4.0 if kbit_upcast(s) else weight_bytes
    root = (part.embedding_like + (pc.final_norm if part.has_head else 0)) * root_b
    return root * (1.0 if s.offload == "all" else 1.0 - 1.0 / shard)


def gradient_stream_pool_bytes(s: TrainingSetup, gradients: float) -> float:
    """FSDP's sharded gradients are allocated on its reduce-scatter stream, so their blocks
    stay in that stream's pool of the caching allocator, which serves no compute-stream
    allocation. FSDP1 (torch/distributed/fsdp/_runtime_utils.py, `_post_backward_hook`):
    `new_sharded_grad = torch.empty_like(chunks[0])` under
    `torch.cuda.stream(state._streams["post_backward"])`, kept as the flat parameter's
    `.grad`; FSDP2 (`_fsdp_collectives.foreach_reduce`): `reduce_output =
    reduce_scatter_input.new_empty(...)` under `reduce_scatter_stream`, the sharded grads
    being views of it. After the first step that pool (the gradient shards, `gradients` =
    trainable_params x grad_bytes / dp) stays reserved while the compute stream holds the
    activations and the loss with no gradient alive (zero_grad(set_to_none) frees them to
    the pool, not to the device): reserved at a moment = its allocated + its reserve +
    (gradients - gradients alive then). With CPUOffload(offload_params=True) the shards are
    still written on the device and kept (`_saved_grad_shard`) until the end of backward after
    their non-blocking copy to `_cpu_grad` (FlatParamHandle.prepare_gradient_for_optim then
    deletes them): `gradients` is then the shards of what trains. That is FSDP1's (hf and
    lightning stacks); FSDP2 (torchtune, torchtitan) copies each group's reduce-scatter output
    to the host as it is reduced (`foreach_reduce`: `.to("cpu", non_blocking=True)`) and keeps
    none (0). DeepSpeed ZeRO-3 reduces into its own preallocated partitions (not modelled
    here)."""
    fsdp = s.zero == 3 and data_shards(s) > 1 and not s.deepspeed
    fsdp2_offload = s.offload == "all" and s.stack not in ("hf", "lightning")
    return gradients if fsdp and not fsdp2_offload else 0.0
