"""Gradients, optimizer states and the optimizer step's scratch of what trains.

Model states per parameter by precision regime and optimizer follow the ZeRO paper's accounting
(16 B for bf16 mixed Adam), sharded by ZeRO stage / FSDP over the data-parallel degree.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.memory import TrainingSetup

from .parallel import data_shards, gradient_shards
from .params import ParamCounts


def state_bytes_per_param(setup: TrainingSetup) -> tuple[float, float, float]:
    """(weight, gradient, optimizer) bytes per fully trained parameter.

    bf16_mixed Adam: 2 + 2 + 12 (fp32 master, m, v) = 16; pure bf16 Adam: 2 + 2 + 4 = 8;
    fp32 Adam: 4 + 4 + 8 = 16. fp8 linears keep bf16_mixed states (no saving in model states).
    """
    p = setup.precision
    weight = 4.0 if p == "fp32" else 2.0
    grad = weight + (4.0 if setup.fp32_grad_accum and p != "fp32" else 0.0)
    master = 4.0 if p in ("bf16_mixed", "fp8") else 0.0
    return weight, grad, master + moment_bytes(setup.optimizer, moment_dtype_bytes(setup))


def moment_dtype_bytes(setup: TrainingSetup) -> float:
    """Bytes of the dtype the optimizer moments of a fully trained parameter are kept in."""
    return 2.0 if setup.precision == "bf16" else 4.0


def moment_bytes(optimizer: str, state_dtype_bytes: float) -> float:
    """Optimizer moments per trainable parameter (paged variants have the same footprint)."""
    if optimizer.endswith("8bit"):
        return 2.0  # m and v in 8 bit (block-wise absmax adds ~1 %)
    if optimizer == "sgd":
        return state_dtype_bytes  # momentum buffer
    return 2 * state_dtype_bytes  # Adam m and v


def step_temp_bytes(s: TrainingSetup, state_dtype_bytes: float) -> float:
    """Scratch of torch's foreach AdamW: one state-sized temporary (sqrt of v) per parameter;
    none for a fused kernel, 8-bit optimizers or SGD."""
    if s.optimizer_fused or s.optimizer.endswith("8bit") or s.optimizer == "sgd":
        return 0.0
    return state_dtype_bytes


@dataclass(frozen=True)
class OptimizerStates:
    """Per device, in bytes: gradients, optimizer states and the step's scratch."""

    gradients: float
    optimizer: float
    step_temp: float


def optimizer_states(
    s: TrainingSetup, params: float, grad_bytes: float, state_bytes: float, temp_bytes: float
) -> OptimizerStates:
    """The states of `params` trained parameters: gradients sharded from ZeRO-2, optimizer
    states and their step scratch from ZeRO-1."""
    shard = data_shards(s)
    return OptimizerStates(
        gradients=params * grad_bytes / gradient_shards(s),
        optimizer=params * state_bytes / shard,
        step_temp=params * temp_bytes / shard,
    )


def full_training_states(s: TrainingSetup, params: float) -> OptimizerStates:
    """Every parameter trains, its gradient and states as `state_bytes_per_param` says."""
    _, grad_b, opt_b = state_bytes_per_param(s)
    return optimizer_states(s, params, grad_b, opt_b, step_temp_bytes(s, moment_dtype_bytes(s)))


def applied_in_backward(st: OptimizerStates, s: TrainingSetup, pc: ParamCounts) -> OptimizerStates:
    """Optimizer in backward: each gradient is applied and freed as it arrives, so at most one
    layer's gradients and one linear's step scratch are alive."""
    if not s.optimizer_in_backward:
        return st
    grad_b = state_bytes_per_param(s)[1]
    temp_b = step_temp_bytes(s, moment_dtype_bytes(s))
    return OptimizerStates(
        gradients=min(st.gradients, pc.per_layer / s.tp * grad_b),
        optimizer=st.optimizer,
        step_temp=min(st.step_temp, pc.largest_linear / s.tp * temp_b),
    )
