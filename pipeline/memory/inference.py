"""Serving: weights, KV cache, the prefill working set of one layer and last-token logits."""

from __future__ import annotations

from schemas.memory import MemoryBreakdown, ModelSpec, TrainingSetup

from .breakdown import peak_breakdown
from .parallel import stage_layers
from .params import param_counts
from .weights import dequantized_linear_bytes, quant_bytes


def inference_breakdown(m: ModelSpec, s: TrainingSetup) -> MemoryBreakdown:
    """Weights + KV cache + the prefill working set of one layer + last-token logits."""
    pc = param_counts(m)
    tp = s.tp
    e = 4.0 if s.precision == "fp32" else 2.0
    quant = quant_bytes(s)
    n_layers = stage_layers(m, s)
    layer_params = pc.per_layer * n_layers / tp
    other = (pc.embedding + pc.lm_head + pc.final_norm) / tp
    buffers = 0.0
    if quant is not None:
        linear = pc.per_layer_linear * n_layers / tp
        weights = linear * quant + (layer_params - linear + other) * e
        buffers = dequantized_linear_bytes(pc, tp, e)  # one dequantized tile
    else:
        weights = (layer_params + other) * e
    tokens = s.tokens
    kv_cache = 2.0 * n_layers * tokens * m.num_kv_heads * m.d_head * e / tp
    h, f = m.hidden_size, m.mlp_width_per_token
    a_width = (m.num_heads + 2 * m.num_kv_heads) * m.d_head
    mlp = (m.mlp_branches + 1) * f  # gate, up and the product (plain: up and its activation)
    prefill = tokens * e * (2 * h + a_width + mlp) / tp  # one layer's live tensors at prefill
    logits = s.micro_batch * m.vocab_size * 4.0 * 2  # last-token logits in fp32 + softmax
    moments = {"inference": dict(activations=kv_cache + prefill, logits_and_loss=logits)}
    components = dict(weights=weights, activations=kv_cache + prefill, logits_and_loss=logits)
    components |= dict(gradients=0.0, optimizer=0.0, optimizer_step_temp=0.0, adapters=0.0)
    components["buffers"] = buffers
    return peak_breakdown(m, s, pc, 0.0, weights + buffers, components, moments)
