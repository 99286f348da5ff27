"""The allocator's reserve and fragmentation against hand-worked numbers."""

from __future__ import annotations

import pytest

from pipeline.memory.breakdown import peak_breakdown
from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from pipeline.memory.overhead import overhead_terms
from pipeline.memory.params import param_counts
from schemas.memory import GIB, TrainingSetup

QWEN7 = get_model("qwen2.5-7b")


def test_variable_length_fragmentation_and_reserve_by_hand() -> None:
    # reserved = allocated + r x (bytes allocated within the step) + f x (loss buffers): the
    # loss buffers (tokens x vocab) are the step's largest blocks, the ones a longer batch
    # cannot fit into cached blocks; activations are layer-sized and reuse the cache.
    s = TrainingSetup(method="lora", seq_len=2048, allocator_reserve=0.1, fragmentation=0.5)
    fixed = estimate(QWEN7, s)
    dynamic = fixed.allocated_bytes - fixed.weights - fixed.optimizer - fixed.adapters
    dynamic -= fixed.buffers
    assert fixed.allocator_reserve == pytest.approx(0.1 * dynamic, rel=1e-6)
    varied = estimate(QWEN7, s.model_copy(update={"variable_length": True}))
    assert varied.peak_phase == "backward_start" and varied.activations > 0
    loss = varied.logits_and_loss
    assert loss == 2048 * QWEN7.vocab_size * 12  # fp32 log-probs, their grad, the logits' grad
    assert varied.allocator_reserve == pytest.approx(0.1 * dynamic + 0.5 * loss, rel=1e-6)
    assert varied.allocated_bytes == fixed.allocated_bytes  # allocation itself is unchanged
    assert varied.measured("allocated") == fixed.measured("allocated")
    assert varied.measured("reserved") > fixed.measured("reserved")


def test_reserve_carries_the_largest_reserved_moment_with_other_streams_pools() -> None:
    # Hand-worked, GiB: static 10; backward start allocates activations 4 + loss 2 (16 in
    # all, reserve 0.2 x 6 = 1.2) while 4 GiB of gradient shards sit cached in the
    # reduce-scatter stream's pool: 16 + 1.2 + 4 = 21.2 reserved. The optimizer step
    # allocates gradients 4 + scratch 4 (18, reserve 0.2 x 8 = 1.6): 19.6. The peak is the
    # optimizer step (18 + 1.6 > 16 + 1.2) with 18 allocated, and since the cache never
    # shrinks, 21.2 reserved: reserve 1.6 + carried (21.2 - 19.6 = 1.6) = 3.2.
    g = GIB
    s = TrainingSetup(allocator_reserve=0.2, cuda_context_gib=0.0)
    moments = {
        "backward_start": {"activations": 4 * g, "logits_and_loss": 2 * g},
        "optimizer_step": {"gradients": 4 * g, "optimizer_step_temp": 4 * g},
    }
    comps = {"weights": 10 * g, "optimizer": 0.0, "adapters": 0.0, "buffers": 0.0}
    pools = {"backward_start": 4 * g, "optimizer_step": 0.0}
    m = get_model("qwen2.5-0.5b")
    b = peak_breakdown(m, s, param_counts(m), 0, 10 * g, comps, moments, stream_pool=pools)
    assert b.peak_phase == "optimizer_step"
    assert b.allocated_bytes == pytest.approx(18 * g, abs=2)
    assert b.reserved_bytes == pytest.approx(21.2 * g, abs=2)
    assert b.allocator_reserve == pytest.approx(3.2 * g, abs=2)
    reserve, _ = overhead_terms(s, 8 * g, 0.0, 1.6 * g)
    assert reserve.bytes == pytest.approx(3.2 * g, abs=2)
