"""Bytes of the base weights: 16/32-bit, or quantized linears (QLoRA NF4, GPTQ, LLM.int8).

NF4 storage is 4.127 bit/param with double quantization. On a bitsandbytes base the HF stack
(PEFT `prepare_model_for_kbit_training`) upcasts every non-quantized parameter (embeddings,
lm_head, norms, biases) to fp32; one linear at a time is dequantized to bf16 for its matmuls.
"""

from __future__ import annotations

from schemas.memory import Term, TrainingSetup

from .params import ParamCounts

# Bytes per parameter of quantized linear weights.
NF4_DQ_BYTES = (4 + 8 / 64 + 32 / (64 * 256)) / 8  # 4.127 bit: NF4 + double-quantized absmax
NF4_BYTES = (4 + 32 / 64) / 8  # 4.5 bit: NF4 + fp32 absmax per 64 weights
GPTQ_INT4_BYTES = (4 + (16 + 4) / 128) / 8  # int4 + fp16 scale and 4-bit zero per group of 128
GPTQ_INT8_BYTES = (8 + (16 + 8) / 128) / 8  # int8 + fp16 scale and 8-bit zero per group of 128
INT8_BYTES = 1.0


def quant_bytes(setup: TrainingSetup) -> float | None:
    """Bytes per quantized linear weight; None for an unquantized base."""
    q = setup.quantization
    if q == "auto":
        q = "nf4" if setup.method == "qlora" else "none"
    if q == "none":
        return None
    if q == "nf4":
        return NF4_DQ_BYTES if setup.double_quant else NF4_BYTES
    return {"gptq_int4": GPTQ_INT4_BYTES, "gptq_int8": GPTQ_INT8_BYTES}.get(q, INT8_BYTES)


def is_bnb_base(s: TrainingSetup) -> bool:
    """A bitsandbytes base (NF4 or LLM.int8)."""
    return quant_bytes(s) is not None and not s.quantization.startswith("gptq")


def kbit_upcast(s: TrainingSetup) -> bool:
    """PEFT's stock prepare_model_for_kbit_training ran on a bitsandbytes base: it casts every
    non-quantized parameter (embeddings, norms, lm_head) to fp32. TRL skips it when the 4-bit
    weights are sharded (FSDP/ZeRO-3 over several GPUs); `s.kbit_upcast` overrides."""
    if not is_bnb_base(s):
        return False
    if s.kbit_upcast is not None:
        return s.kbit_upcast
    return s.stack == "hf" and not (s.zero == 3 and s.dp > 1)


def base_weight_bytes(
    s: TrainingSetup, pc: ParamCounts, layers: int, params: float, weight_bytes: float
) -> float:
    """Frozen or trained base weights of `params` parameters holding `layers` decoder layers,
    before sharding. PEFT's kbit preparation upcasts what is not quantized."""
    quant = quant_bytes(s)
    if quant is None:
        return params * weight_bytes
    linear = pc.per_layer_linear * layers / s.tp
    rest_b = 4.0 if kbit_upcast(s) else weight_bytes
    return linear * quant + (params - linear) * rest_b


def weights_term(
    s: TrainingSetup, pc: ParamCounts, layers: int, params: float, weight_bytes: float, shards: int
) -> Term:
    """`base_weight_bytes` over `shards` devices, with its formula."""
    quant = quant_bytes(s)
    if quant is None:
        inputs = {"n_params": params, "bytes_per_param": weight_bytes, "weight_shards": shards}
        return Term(
            "weights",
            "n_params * bytes_per_param / weight_shards",
            inputs,
            params * weight_bytes / shards,
        )
    linear = pc.per_layer_linear * layers / s.tp
    rest_b = 4.0 if kbit_upcast(s) else weight_bytes
    formula = "(quantized_params * quant_bytes + (n_params - quantized_params) * other_bytes)"
    inputs = {
        "quantized_params": linear,
        "quant_bytes": quant,
        "n_params": params,
        "other_bytes": rest_b,
        "weight_shards": shards,
    }
    value = (linear * quant + (params - linear) * rest_b) / shards
    return Term("weights", formula + " / weight_shards", inputs, value)


def dequantized_linear_bytes(pc: ParamCounts, tp: int, dtype_bytes: float = 2.0) -> float:
    """The one quantized linear dequantized for its matmuls at a time (its largest)."""
    return pc.largest_linear / tp * dtype_bytes
