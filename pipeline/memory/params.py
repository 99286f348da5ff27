"""Parameter counts of a decoder-only transformer, from its shapes.

Per layer: q/k/v/o (GQA/MQA: k and v are num_kv_heads x head_dim wide), the MLP (gated:
gate, up, down; plain: up, down), each routed expert's MLP under MoE plus the router (hidden x
experts) and any shared expert, the biases the family has, and its norms (RMSNorm: a weight;
LayerNorm: weight and bias; OLMo-1's non-parametric LayerNorm: none). Outside the layers: the
token embedding, a learned position table and an embedding norm where the family has them, the
final norm and lm_head (none when tied, plus its bias for Phi-2). A parallel block (Falcon,
GPT-NeoX, Phi-2) changes no shape, only how many norms a layer has.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.memory import LinearName, ModelSpec

MLP_NAMES: tuple[LinearName, ...] = ("gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class ParamCounts:
    embedding: int  # token embedding (+ position table and embedding norm)
    lm_head: int  # 0 when tied to the embedding
    per_layer: int
    per_layer_linear: int  # the part that quantizes (q/k/v/o and MLP/expert weights)
    largest_linear: int
    final_norm: int
    num_layers: int
    per_layer_active: int = 0  # what one token uses (MoE: its routed experts); 0: per_layer

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.final_norm + self.per_layer * self.num_layers

    @property
    def active(self) -> int:
        """Parameters one token passes through (the total, but for unused experts)."""
        layer = self.per_layer_active or self.per_layer
        return self.embedding + self.lm_head + self.final_norm + layer * self.num_layers


@dataclass(frozen=True)
class Linear:
    """A linear of one decoder layer: its role, shape, copies (routed experts) and bias."""

    name: LinearName
    d_in: int
    d_out: int
    copies: int = 1
    bias: bool = False

    @property
    def params(self) -> int:
        return self.copies * (self.d_in * self.d_out + (self.d_out if self.bias else 0))


def _mlp(m: ModelSpec, width: int, copies: int) -> list[Linear]:
    h, b = m.hidden_size, m.mlp_bias
    up = [Linear("gate_proj", h, width, copies, b)] if m.mlp == "gated" else []
    return [*up, Linear("up_proj", h, width, copies, b), Linear("down_proj", width, h, copies, b)]


def layer_linears(m: ModelSpec) -> list[Linear]:
    """Every linear of one decoder layer (routed experts first, then the shared expert)."""
    h, d = m.hidden_size, m.d_head
    q, kv = m.num_heads * d, m.num_kv_heads * d
    attn = [
        Linear("q_proj", h, q, bias=m.qkv_bias),
        Linear("k_proj", h, kv, bias=m.qkv_bias),
        Linear("v_proj", h, kv, bias=m.qkv_bias),
        Linear("o_proj", q, h, bias=m.attn_out_bias),
    ]
    mlp = _mlp(m, m.intermediate_size, max(m.num_experts, 1))
    shared = _mlp(m, m.shared_expert_size, 1) if m.shared_expert_size else []
    return attn + mlp + shared


def linear_shapes(m: ModelSpec) -> dict[str, tuple[int, int]]:
    """(d_in, d_out) of each role in one decoder layer (one routed expert's under MoE); a plain
    MLP has no gate_proj."""
    shapes: dict[str, tuple[int, int]] = {}
    for lin in layer_linears(m):
        shapes.setdefault(lin.name, (lin.d_in, lin.d_out))
    return shapes


def norm_params(m: ModelSpec) -> int:
    """Parameters of one norm over the hidden size."""
    per = {"rms": 1, "layer": 2, "layer_nobias": 1, "nonparametric": 0}[m.norm]
    return per * m.hidden_size


def _layer_extras(m: ModelSpec) -> int:
    """Norms, qk-norms, router and shared-expert gate of one layer."""
    qk = 0
    if m.qk_norm:
        qk = 2 * m.d_head if m.qk_norm_per_head else (m.num_heads + m.num_kv_heads) * m.d_head
    router = m.hidden_size * m.num_experts + (m.hidden_size if m.shared_expert_gate else 0)
    return m.norms_per_layer * norm_params(m) + qk + router


def param_counts(m: ModelSpec) -> ParamCounts:
    linears = layer_linears(m)
    weights = sum(lin.copies * lin.d_in * lin.d_out for lin in linears)
    per_layer = sum(lin.params for lin in linears) + _layer_extras(m)
    unused = 0
    if m.num_experts:
        expert = sum(lin.params // lin.copies for lin in linears if lin.copies > 1)
        unused = (m.num_experts - m.experts_per_token) * expert
    tokens = m.vocab_size * m.hidden_size
    embedding = tokens + m.position_embeddings * m.hidden_size
    embedding += norm_params(m) if m.embedding_norm else 0
    head = (0 if m.tie_embeddings else tokens) + (m.vocab_size if m.lm_head_bias else 0)
    return ParamCounts(
        embedding=embedding,
        lm_head=head,
        per_layer=per_layer,
        per_layer_linear=weights,
        largest_linear=max(lin.d_in * lin.d_out for lin in linears),
        final_norm=norm_params(m),
        num_layers=m.num_layers,
        per_layer_active=per_layer - unused,
    )
