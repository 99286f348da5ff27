"""Gradients and optimizer states against hand-worked numbers."""

from __future__ import annotations

import pytest

from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from pipeline.memory.optimizer import state_bytes_per_param
from pipeline.memory.params import param_counts
from schemas.memory import TrainingSetup

QWEN7 = get_model("qwen2.5-7b")


def test_mixed_precision_adam_is_16_bytes_per_param() -> None:
    s = TrainingSetup(method="full", precision="bf16_mixed", seq_len=128, recompute="full")
    assert state_bytes_per_param(s) == (2.0, 2.0, 12.0)
    b = estimate(QWEN7, s)
    assert b.peak_phase == "optimizer_step"  # tiny batch: the step is the peak
    states = b.weights + b.gradients + b.optimizer
    assert states == pytest.approx(16 * param_counts(QWEN7).total, rel=1e-6)
    # pure bf16 keeps the Adam moments in bf16: 2 + 2 + 4
    pure = estimate(QWEN7, s.model_copy(update={"precision": "bf16"}))
    assert pure.weights + pure.gradients + pure.optimizer == pytest.approx(
        8 * param_counts(QWEN7).total, rel=1e-6
    )


def test_paged_optimizer_states_live_outside_the_allocator() -> None:
    # Llama-3.1-8B full, pure bf16, bitsandbytes PagedAdamW8bit (torchtune's single-device
    # recipe): 8.03e9 params x 2 B (m and v in 8 bit) = 14.96 GiB of states in unified memory.
    llama = get_model("llama-3.1-8b")
    s = TrainingSetup(method="full", precision="bf16", optimizer="paged_adamw_8bit")
    paged = estimate(llama, s)
    resident = estimate(llama, s.model_copy(update={"optimizer": "adamw_8bit"}))
    states = param_counts(llama).total * 2.0
    assert paged.paged_optimizer == pytest.approx(states, rel=1e-6)
    assert paged.optimizer == 0 and paged.optimizer_step_temp == 0  # fused bnb kernel
    # torch.cuda.max_memory_reserved never sees them; the device total does
    assert resident.reserved_bytes - paged.reserved_bytes >= 0.99 * states
    assert paged.total_bytes == paged.reserved_bytes + paged.context + paged.paged_optimizer
    assert sum(paged.terms().values()) == pytest.approx(paged.total_bytes, abs=16)
    # 32-bit paged AdamW in pure bf16: two bf16 moments, 4 B per parameter
    p32 = estimate(llama, s.model_copy(update={"optimizer": "paged_adamw"}))
    assert p32.paged_optimizer == pytest.approx(param_counts(llama).total * 4.0, rel=1e-6)
