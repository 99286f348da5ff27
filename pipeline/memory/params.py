"""Parameter counts of a Llama/Qwen-style decoder, from its shapes."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.memory import ModelSpec


@dataclass(frozen=True)
class ParamCounts:
    embedding: int
    lm_head: int  # 0 when tied to the embedding
    per_layer: int
    per_layer_linear: int  # the part that quantizes (q/k/v/o/gate/up/down weights)
    largest_linear: int
    final_norm: int
    num_layers: int

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.final_norm + self.per_layer * self.num_layers


def linear_shapes(m: ModelSpec) -> dict[str, tuple[int, int]]:
    """(d_in, d_out) of each linear in one decoder layer."""
    h, d = m.hidden_size, m.d_head
    q, kv = m.num_heads * d, m.num_kv_heads * d
    f = m.intermediate_size
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, f),
        "up_proj": (h, f),
        "down_proj": (f, h),
    }


def param_counts(m: ModelSpec) -> ParamCounts:
    shapes = linear_shapes(m)
    linear = sum(i * o for i, o in shapes.values())
    bias = (shapes["q_proj"][1] + 2 * shapes["k_proj"][1]) if m.qkv_bias else 0
    norms = 2 * m.hidden_size + (2 * m.d_head if m.qk_norm else 0)
    emb = m.vocab_size * m.hidden_size
    return ParamCounts(
        embedding=emb,
        lm_head=0 if m.tie_embeddings else emb,
        per_layer=linear + bias + norms,
        per_layer_linear=linear,
        largest_linear=max(i * o for i, o in shapes.values()),
        final_norm=m.hidden_size,
        num_layers=m.num_layers,
    )
