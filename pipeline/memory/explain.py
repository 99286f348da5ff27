"""The model-state terms of a training step with their formulas and inputs (estimate --explain).

Each Term's bytes are computed here from its own inputs with the term modules' rules (bytes per
parameter, shards), independently of estimate.py's composition; tests/pipeline/memory/
test_explain.py holds that the terms sum to the breakdown's total and each formula evaluates to
its bytes. Activations, logits and the overheads explain themselves in their modules.
"""

from __future__ import annotations

from schemas.memory import ModelSpec, Term, TrainingSetup, zero_term

from .adapters import lora_params_per_layer
from .optimizer import moment_bytes, moment_dtype_bytes, state_bytes_per_param, step_temp_bytes
from .parallel import (
    StageParams,
    data_shards,
    fsdp1_frozen_gradient_shards,
    fsdp1_root_unit_bytes,
    gathered_layer_bytes,
    gradient_shards,
    sharding_buffer_bytes,
    weight_shards,
    zero3_bucket_bytes,
)
from .params import ParamCounts
from .weights import base_weight_bytes, dequantized_linear_bytes, quant_bytes, weights_term


def _per_param(
    name: str, params: float, b: float, shards: int, shard_name: str, pre: str = ""
) -> Term:
    """`params` parameters of `b` bytes each over `shards` devices (input names prefixed)."""
    inputs = {f"{pre}trainable_params": params, f"{pre}bytes_per_param": b, shard_name: shards}
    formula = f"{pre}trainable_params * {pre}bytes_per_param / {shard_name}"
    return Term(name, formula, inputs, params * b / shards)


def full_state_terms(s: TrainingSetup, params: float) -> tuple[Term, Term, Term]:
    """Gradients, optimizer states and step scratch of a full fine-tune of `params`."""
    _, grad_b, opt_b = state_bytes_per_param(s)
    temp_b = step_temp_bytes(s, moment_dtype_bytes(s))
    return (
        _per_param("gradients", params, grad_b, gradient_shards(s), "gradient_shards"),
        _per_param("optimizer", params, opt_b, data_shards(s), "data_shards"),
        _per_param("optimizer_step_temp", params, temp_b, data_shards(s), "data_shards"),
    )


def adapter_terms(m: ModelSpec, s: TrainingSetup, layers: int) -> tuple[Term, Term]:
    """LoRA adapters (weight + gradient + moments per parameter) and their step scratch."""
    per_layer = lora_params_per_layer(m, s.lora_rank, s.lora_targets)
    a_b = 2.0 if s.precision == "bf16" else 4.0
    per_param = a_b + a_b + moment_bytes(s.optimizer, a_b)
    shards = data_shards(s)
    inputs = {
        "lora_params_per_layer": per_layer,
        "layers": layers,
        "tp": s.tp,
        "bytes_per_param": per_param,
        "data_shards": shards,
    }
    lora_p = per_layer * layers / s.tp
    formula = "lora_params_per_layer * layers / tp * bytes_per_param / data_shards"
    adapters = Term("adapters", formula, inputs, lora_p * per_param / shards)
    temp = _per_param("optimizer_step_temp", lora_p, step_temp_bytes(s, a_b), shards, "data_shards")
    return adapters, temp


def embedding_terms(s: TrainingSetup, params: float) -> tuple[Term, Term, Term, Term]:
    """modules_to_save: the trainable embedding copy, its gradients, moments and scratch."""
    e_b = 4.0 if s.precision == "fp32" else 2.0
    d = data_shards(s)
    return (
        _per_param("weights", params, e_b, d if s.zero == 3 else 1, "weight_shards", "emb_"),
        _per_param("gradients", params, e_b, gradient_shards(s), "gradient_shards", "emb_"),
        _per_param("optimizer", params, moment_bytes(s.optimizer, e_b), d, "data_shards", "emb_"),
        _per_param(
            "optimizer_step_temp", params, step_temp_bytes(s, e_b), d, "data_shards", "emb_"
        ),
    )


def trained_terms(m: ModelSpec, s: TrainingSetup, part: StageParams) -> dict[str, Term]:
    """What trains, before placement: gradients, optimizer, step scratch, adapters and the
    weights' trainable embedding copy ("weights_copy")."""
    if s.method == "full":
        g, o, t = full_state_terms(s, part.params)
        return {"gradients": g, "optimizer": o, "optimizer_step_temp": t}
    adapters, temp = adapter_terms(m, s, part.layers)
    out = {
        "adapters": adapters,
        "optimizer_step_temp": temp,
        "gradients": zero_term("gradients", "LoRA: counted in adapters"),
        "optimizer": zero_term("optimizer", "LoRA: counted in adapters"),
    }
    if s.train_embeddings:
        copy, g, o, t = embedding_terms(s, part.embedding_like)
        out |= {"weights_copy": copy, "gradients": g, "optimizer": o}
        out["optimizer_step_temp"] = temp.plus(t.formula, t.bytes, **t.inputs)
    return out


def placed_terms(terms: dict[str, Term], s: TrainingSetup) -> dict[str, Term]:
    """The terms as estimate._placed moves them: paged states, CPU offload, in-backward."""
    out = dict(terms)
    if s.optimizer.startswith("paged") and s.offload not in ("optimizer", "all"):
        o = out["optimizer"]
        out["paged_optimizer"] = Term("paged_optimizer", o.formula, o.inputs, o.bytes)
        out["optimizer"] = zero_term("optimizer", "paged: in unified memory (paged_optimizer)")
        out["optimizer_step_temp"] = zero_term("optimizer_step_temp", "paged: fused step")
    if s.offload in ("optimizer", "all"):
        out["optimizer"] = zero_term("optimizer", "offloaded to the host")
        out["optimizer_step_temp"] = zero_term("optimizer_step_temp", "steps on the host")
    if (s.offload == "optimizer" and s.deepspeed) or s.offload == "all":
        out["gradients"] = zero_term("gradients", "copied to the host as reduced")
    if s.offload == "all" and "adapters" in out:
        out["adapters"] = zero_term("adapters", "parameter offload: adapter shards on the host")
    return out


def buffers_term(s: TrainingSetup, pc: ParamCounts, part: StageParams, trainable: float) -> Term:
    """Sharding buffers, the dequantized linear of a quantized base and FSDP1's root unit."""
    w_b = state_bytes_per_param(s)[0]
    quant = quant_bytes(s)
    gathered = gathered_layer_bytes(s, pc, quant, w_b)
    sharding = sharding_buffer_bytes(s, gathered, trainable)
    if s.offload == "all":
        sharding = gathered + (zero3_bucket_bytes(s) if s.deepspeed else 0.0)
    dequant = dequantized_linear_bytes(pc, s.tp) if quant is not None and s.offload != "all" else 0
    root = fsdp1_root_unit_bytes(s, pc, part, w_b)
    inputs = {"sharding_buffers": sharding, "dequantized_linear": dequant, "fsdp1_root_unit": root}
    return Term(
        "buffers",
        "sharding_buffers + dequantized_linear + fsdp1_root_unit",
        inputs,
        sharding + dequant + root,
    )


def state_terms(
    m: ModelSpec, s: TrainingSetup, pc: ParamCounts, part: StageParams, trainable: float
) -> dict[str, Term]:
    """Every model-state term of a stage as it sits on the device, with its formula."""
    out = trained_terms(m, s, part)
    copy = out.pop("weights_copy", None)
    w_b = state_bytes_per_param(s)[0]
    weights = weights_term(s, pc, part.layers, part.params, w_b, weight_shards(s))
    if copy is not None:
        weights = weights.plus(copy.formula, copy.bytes, **copy.inputs)
    frozen = fsdp1_frozen_gradient_shards(
        s, base_weight_bytes(s, pc, part.layers, part.params, w_b)
    )
    if frozen:
        out["gradients"] = out["gradients"].plus(
            "frozen_gradient_shards", frozen, frozen_gradient_shards=frozen
        )
    if s.offload == "all":
        weights = zero_term("weights", "base shards on the host")
    out |= {"weights": weights, "buffers": buffers_term(s, pc, part, trainable)}
    if s.optimizer_in_backward:
        out |= in_backward_terms(s, pc, out)
    return placed_terms(out, s)


def in_backward_terms(s: TrainingSetup, pc: ParamCounts, out: dict[str, Term]) -> dict[str, Term]:
    """Optimizer in backward: one layer's gradients and one linear's scratch at most."""
    grad_b = state_bytes_per_param(s)[1]
    temp_b = step_temp_bytes(s, moment_dtype_bytes(s))
    layer = Term(
        "gradients",
        "layer_params / tp * bytes_per_param",
        {"layer_params": pc.per_layer, "tp": s.tp, "bytes_per_param": grad_b},
        pc.per_layer / s.tp * grad_b,
    )
    linear = Term(
        "optimizer_step_temp",
        "largest_linear / tp * bytes_per_param",
        {"largest_linear": pc.largest_linear, "tp": s.tp, "bytes_per_param": temp_b},
        pc.largest_linear / s.tp * temp_b,
    )
    return {t.name: t if t.bytes < out[t.name].bytes else out[t.name] for t in (layer, linear)}
