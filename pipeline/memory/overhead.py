"""What the device holds beyond the allocated tensors: the caching allocator's reserve, the
CUDA context and NCCL buffers.

The caching allocator: reserved = allocated + reserve x what is allocated within a step, plus,
when batch shapes vary, a fragmentation share of the loss buffers (the step's largest blocks);
then CUDA context and NCCL buffers on top, outside the allocator. Only the two allocator
constants (schemas.memory.ALLOCATOR_RESERVE, FRAGMENTATION) are fitted; docs/calibration.md
gives the in-sample and leave-one-source-out errors against published peaks.
"""

from __future__ import annotations

from schemas.memory import GIB, Term, TrainingSetup


def overhead_bytes(
    s: TrainingSetup, dynamic: float, shaped: float, stream_pool: float = 0.0
) -> tuple[float, float]:
    """(allocator reserve, context + NCCL) in bytes. `dynamic`: bytes allocated and freed within
    a step, whose blocks the cache keeps; `shaped`: the loss buffers (tokens x vocab), the largest
    blocks of a step, which fragment the cache when shapes vary: a longer batch needs bigger
    blocks than the cached ones, so new segments are reserved and the old ones stay cached.
    Activations are many layer-sized tensors that reuse cached blocks and are not counted.
    `stream_pool`: blocks another stream's pool keeps cached at this moment (freed there, not
    allocated now), which this moment's allocations on the compute stream cannot reuse."""
    reserve, fixed = overhead_terms(s, dynamic, shaped, stream_pool)
    return reserve.bytes, fixed.bytes


def overhead_terms(
    s: TrainingSetup, dynamic: float, shaped: float, stream_pool: float = 0.0
) -> tuple[Term, Term]:
    """The reserve and the context + NCCL of `overhead_bytes`, with their formulas.

    The caching allocator keeps free blocks per stream (CUDACachingAllocator: a cached block
    serves only allocations on the stream it was allocated on), so a pool another stream
    filled earlier in the step stays reserved while the compute stream peaks:
    reserve += stream_pool_bytes (parallel.gradient_stream_pool_bytes). At the step's
    allocation peak, stream_pool_bytes is what the moment that reserves the most (its own
    reserve and the other streams' pools counted) holds above this moment's allocated +
    reserve (breakdown.peak_breakdown): the cache never shrinks within a run."""
    nccl = s.nccl_gib if s.nccl_gib is not None else (0.5 if s.world_size > 1 else 0.0)
    reserve = Term(
        "allocator_reserve",
        "dynamic_bytes * allocator_reserve",
        {"dynamic_bytes": dynamic, "allocator_reserve": s.allocator_reserve},
        dynamic * s.allocator_reserve,
    )
    if s.variable_length:
        reserve = reserve.plus(
            "loss_buffer_bytes * fragmentation",
            shaped * s.fragmentation,
            loss_buffer_bytes=shaped,
            fragmentation=s.fragmentation,
        )
    if stream_pool > 0:
        reserve = reserve.plus("stream_pool_bytes", stream_pool, stream_pool_bytes=stream_pool)
    fixed = Term(
        "context",
        "(cuda_context_gib + nccl_gib) * GIB",
        {"cuda_context_gib": s.cuda_context_gib, "nccl_gib": nccl, "GIB": GIB},
        (s.cuda_context_gib + nccl) * GIB,
    )
    return reserve, fixed
