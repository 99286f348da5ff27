"""The allocator's reserve and fragmentation against hand-worked numbers."""

from __future__ import annotations

import pytest

from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from schemas.memory import TrainingSetup

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
