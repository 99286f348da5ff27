"""LoRA adapters (QLoRA's too: the quantized base is in weights.py) and PEFT's trainable
copies of the embeddings (modules_to_save)."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.memory import ModelSpec, TrainingSetup

from .optimizer import OptimizerStates, moment_bytes, optimizer_states, step_temp_bytes
from .parallel import data_shards, weight_shards
from .params import layer_linears


def lora_params_per_layer(m: ModelSpec, rank: int, targets: tuple[str, ...]) -> int:
    """rank x (d_in + d_out) per adapted linear: every routed expert's and the shared expert's
    under MoE (PEFT matches them by name); a target the model lacks (gate_proj of a plain MLP)
    adds nothing."""
    return sum(
        lin.copies * rank * (lin.d_in + lin.d_out)
        for lin in layer_linears(m)
        if lin.name in targets
    )


@dataclass(frozen=True)
class LoraStates:
    """Per device: the adapters' parameters, their bytes (weights, gradients and optimizer
    states) and their optimizer step's scratch."""

    params: float
    adapters: float
    step_temp: float


def lora_states(m: ModelSpec, s: TrainingSetup, layers: int) -> LoraStates:
    """The adapters of `layers` decoder layers. PEFT keeps adapters in fp32 unless the whole
    run is pure bf16."""
    lora_p = lora_params_per_layer(m, s.lora_rank, s.lora_targets) * layers / s.tp
    a_b = 2.0 if s.precision == "bf16" else 4.0
    per_param = a_b + a_b + moment_bytes(s.optimizer, a_b)
    shard = data_shards(s)
    return LoraStates(
        params=lora_p,
        adapters=lora_p * per_param / shard,
        step_temp=lora_p * step_temp_bytes(s, a_b) / shard,
    )


def trained_gradient_bytes(s: TrainingSetup, lora_params: float) -> float:
    """The adapters' gradient shards per device: lora_params x adapter_bytes / data_shards
    (adapter_bytes 2 in pure bf16, else 4; the same dtype as the adapters, lora_states)."""
    a_b = 2.0 if s.precision == "bf16" else 4.0
    return lora_params * a_b / data_shards(s)


def trainable_embeddings(s: TrainingSetup, params: float) -> tuple[float, OptimizerStates]:
    """modules_to_save: a trainable copy of the embedding and lm_head (`params`) in the base
    dtype, its moments in that dtype too: (weight bytes, their gradients and states)."""
    e_b = 4.0 if s.precision == "fp32" else 2.0
    states = optimizer_states(
        s, params, e_b, moment_bytes(s.optimizer, e_b), step_temp_bytes(s, e_b)
    )
    return params * e_b / weight_shards(s), states
