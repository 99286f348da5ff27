"""Activations autograd keeps for backward, per device.

Tensor by tensor for an RMSNorm + RoPE + GQA + SwiGLU block, adapting Korthikanti et al. (2022):
what autograd saves depends on which weights train (a frozen linear does not keep its input), the
attention kernel (FlashAttention keeps no s x s matrix) and recomputation. At the backward of one
layer: its recomputed activations plus the gradients of the MLP's widest intermediates (gate
and up, 2 x intermediate_size per token; up alone in a plain MLP), and the layer-input gradients
FSDP1 holds. The structure enters where it changes what is saved: a plain MLP keeps its up
output (the activation's input) where a gated one keeps gate, up and SiLU(gate); under MoE a
token's MLP width is that of its routed experts and the shared expert; a parallel block with
one norm (Falcon-7B, Phi-2) feeds the same normed input to attention and MLP, saved once;
Gemma-2's post-norms keep their fp32 inputs too. Not modelled: the MoE router's logits and the
per-expert gathered copies of the hidden states of a looped MoE implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from schemas.memory import ModelSpec, Term, TrainingSetup

from .params import linear_shapes
from .weights import kbit_upcast, quant_bytes


def stream_bytes(s: TrainingSetup) -> float:
    """Bytes per element of the residual stream. After the kbit upcast the fp32 embedding feeds
    fp32 hidden states, HF's RMSNorm returns weight(fp32) * x -> fp32, and bnb's Linear4bit casts
    its output back to its input's dtype: layer inputs and MLP intermediates are fp32."""
    if kbit_upcast(s):
        return 4.0
    return 4.0 if s.precision == "fp32" else 2.0


@dataclass(frozen=True)
class SavedTensor:
    """A tensor autograd keeps for one layer: bytes per token, whether TP splits it."""

    name: str
    bytes_per_token: float
    tp_split: bool = True
    core: bool = False  # attention-core internal, dropped by selective recompute
    group: str = "attention"


def layer_saved_tensors(m: ModelSpec, s: TrainingSetup) -> list[SavedTensor]:
    """Tensors one decoder layer saves for backward without recomputation (per token). Liger's
    RoPE rotates q and k in place and saves cos and sin only; HF's saves no q/k-sized tensor
    either (it multiplies by the constants cos, sin): `q_k_v` is the same with `s.liger`."""
    h, d, a, kv = m.hidden_size, m.d_head, m.num_heads, m.num_kv_heads
    e, full = (4.0 if s.precision == "fp32" else 2.0), s.method == "full"
    adapted = set(s.lora_targets) if s.method in ("lora", "qlora") else set()
    # The fused LoRA path runs without dropout (Unsloth takes it only at lora_dropout 0).
    dropout = bool(adapted) and s.lora_dropout > 0 and not s.fused_lora
    quantized = quant_bytes(s) is not None  # bnb/GPTQ matmuls save their input for backward
    r = stream_bytes(s)
    # An fp32 stream: each quantized linear casts its input to the compute dtype and saves that
    # copy (one per linear, not shared); fp32 adapters read (and keep) the fp32 input itself.
    upcast = r > e

    def input_kept(*modules: str) -> bool:
        """A linear input stays alive if its weight trains, its quantized matmul saves it, or a
        dropout-free adapter reads it."""
        return full or quantized or (not dropout and bool(adapted.intersection(modules)))

    def linear_in(width: int, modules: tuple[str, ...]) -> float:
        """Bytes per token kept of the input shared by `modules` (q/k/v or gate/up). A fused
        LoRA kernel over the whole group saves that input once, in the stream dtype."""
        if s.fused_lora and adapted.issuperset(modules):
            return r * width
        if not upcast:
            return e * width if input_kept(*modules) else 0.0
        read_by_adapter = not dropout and bool(adapted.intersection(modules))
        return len(modules) * e * width + (r * width if read_by_adapter else 0.0)

    kv_width = kv * d if s.attention == "flash" else a * d  # sdpa/eager repeat K,V to all heads
    mlp_in: tuple[str, ...] = ("gate_proj", "up_proj")
    shared_norm = m.parallel_block and m.norms_per_layer == 1  # one normed input feeds both
    attn_in = ("q_proj", "k_proj", "v_proj", *(mlp_in if shared_norm else ()))
    t = _norm_tensors(s, "attn", h, "attention", full)
    t += [
        SavedTensor("qkv_in", linear_in(h, attn_in), False),
        SavedTensor("q_k_v", e * (a * d + 2 * kv_width)),
    ]
    if m.qk_norm:  # per-head norms of q and k: rows of head_dim
        qk = 4.0 * (a + kv) if s.liger else 0.0
        t.append(SavedTensor("qk_norm_in", (r if s.liger else 4.0) * (a + kv) * d + qk))
    if s.attention == "eager":
        t.append(SavedTensor("softmax_fp32_and_probs", (4.0 + e) * a * s.seq_len, core=True))
        o_in = e * a * d if input_kept("o_proj") else 0.0
        t.append(SavedTensor("o_proj_in", o_in))
    else:
        t.append(SavedTensor("softmax_lse", 4.0 * a, core=True))
        # The kernel saves its output O, which is also o_proj's input.
        t.append(SavedTensor("attn_out", e * a * d, core=not input_kept("o_proj")))
    fused_mlp = s.fused_lora and adapted.issuperset(("gate_proj", "up_proj", "down_proj"))
    t += _mlp_tensors(m, s, shared_norm, linear_in, fused_mlp)
    if not s.fused_lora:
        t += _adapter_tensors(m, s, sorted(adapted), dropout)
    return [x for x in t if x.bytes_per_token > 0]


def _mlp_tensors(
    m: ModelSpec,
    s: TrainingSetup,
    shared_norm: bool,
    linear_in: Callable[[int, tuple[str, ...]], float],
    fused_mlp: bool,
) -> list[SavedTensor]:
    """What the MLP half of a layer saves; `linear_in` is the bytes per token an input shared by
    some linears keeps; `fused_mlp`: one fused LoRA kernel over gate, up and down."""
    h, f, r = m.hidden_size, m.mlp_width_per_token, stream_bytes(s)
    t: list[SavedTensor] = []
    if not shared_norm:
        t += _norm_tensors(s, "mlp", h, "mlp", s.method == "full")
        t.append(
            SavedTensor("gate_up_in", linear_in(h, ("gate_proj", "up_proj")), False, group="mlp")
        )
    if m.norms_per_layer == 4:  # Gemma-2: post-attention and post-MLP norms
        t.append(SavedTensor("post_norms_fp32_in", 2 * 4.0 * h, tp_split=False, group="mlp"))
    return t + [
        SavedTensor("gate_up_silu", swiglu_saved_width(m, s, fused_mlp) * r * f, group="mlp"),
        # Unsloth's LoRA_MLP recomputes SiLU(gate) * up, down's input, in its backward
        SavedTensor("down_in", 0.0 if fused_mlp else linear_in(f, ("down_proj",)), group="mlp"),
    ]


def swiglu_saved_width(m: ModelSpec, s: TrainingSetup, fused_mlp: bool) -> int:
    """Intermediate-wide tensors the MLP's activation saves, in the stream dtype. A plain MLP
    saves the activation's input only: 1. Eager HF gated (`act_fn(gate_proj(x)) * up_proj(x)`):
    gate for SiLU's backward, SiLU(gate) and up for the multiply's: 3. Liger's
    LigerSiLUMulFunction saves gate and up and recomputes SiLU in its backward: 2. So does
    Unsloth's fused LoRA_MLP (it keeps e = gate and g = up): 2."""
    if m.mlp_branches == 1:
        return 1
    return 2 if (s.liger or fused_mlp) else 3


def _norm_tensors(
    s: TrainingSetup, prefix: str, width: int, group: str, full: bool
) -> list[SavedTensor]:
    """What a decoder RMSNorm saves for backward, per token. HF's RMSNorm upcasts its input
    (`hidden_states.to(torch.float32)`) and autograd keeps that fp32 copy, 4 B x hidden; the
    weight's multiply keeps the normalized 16-bit output too when the weight trains (e x hidden).
    Liger's LigerRMSNorm is one kernel that saves its input X in the stream dtype and one fp32
    rstd per row (4 B), and recomputes the normalized values for the weight's gradient."""
    e = 4.0 if s.precision == "fp32" else 2.0
    if s.liger:
        kept = [SavedTensor(f"{prefix}_norm_in_rstd", stream_bytes(s) * width + 4.0, False)]
    else:
        kept = [
            SavedTensor(f"{prefix}_norm_fp32_in", 4.0 * width, tp_split=False),
            SavedTensor(f"{prefix}_norm_normed", e * width if full else 0.0, tp_split=False),
        ]
    return [SavedTensor(x.name, x.bytes_per_token, False, group=group) for x in kept]


def _adapter_tensors(
    m: ModelSpec, s: TrainingSetup, adapted: list[str], dropout: bool
) -> list[SavedTensor]:
    """What each LoRA adapter saves: its A output (rank wide) and, with dropout, the dropped-out
    copy of its input (stream dtype, o_proj's is 16-bit) and the dropout mask."""
    e = 4.0 if s.precision == "fp32" else 2.0
    r = stream_bytes(s)
    shapes = linear_shapes(m)
    t: list[SavedTensor] = []
    for name in (x for x in adapted if x in shapes):  # a plain MLP has no gate_proj
        d_in = shapes[name][0]
        group = "mlp" if name in ("gate_proj", "up_proj", "down_proj") else "attention"
        split = name in ("o_proj", "down_proj")
        t.append(SavedTensor(f"lora_{name}_a_out", e * s.lora_rank, False, group=group))
        if dropout:
            x_b = e if name == "o_proj" else r
            t.append(SavedTensor(f"lora_{name}_dropout", (x_b + 1.0) * d_in, split, group=group))
    return t


def _per_token(tensors: list[SavedTensor], tp: int, sp: bool) -> float:
    return sum(x.bytes_per_token / (tp if (x.tp_split or sp) else 1) for x in tensors)


@dataclass(frozen=True)
class LayerActivations:
    stored: float  # alive from forward through the start of backward
    transient: float  # extra while the last layer is recomputed (logits gone by then)
    stored_per_token: float = 0.0  # of one layer
    stored_layers: int = 0  # layers x micro-batches whose activations are held
    transient_per_token: float = 0.0
    pieces: tuple[tuple[str, float], ...] = ()  # each saved tensor's bytes per token (per device)
    rule: str = ""  # what one layer stores per token, by recomputation


def activation_bytes(
    m: ModelSpec, s: TrainingSetup, layers: int, in_flight: int
) -> LayerActivations:
    """Activation bytes of `layers` decoder layers holding `in_flight` micro-batches."""
    tokens = s.tokens
    tp, sp = s.tp, s.sequence_parallel and s.tp > 1
    e = 4.0 if s.precision == "fp32" else 2.0
    saved = layer_saved_tensors(m, s)
    full_layer = _per_token(saved, tp, sp)
    layer_in = stream_bytes(s) * m.hidden_size / (tp if sp else 1)
    rule = {
        "none": "every saved tensor",
        "selective": "saved tensors but the attention core",
        "selective_op": "the inputs of selected ops",
        "full": "the layer input only",
    }.get(s.recompute, "")
    if s.recompute_modules:
        rule = "all but the recomputed groups, plus one layer input per group"
        groups = set(s.recompute_modules)
        kept = [x for x in saved if x.group not in groups]
        stored = _per_token(kept, tp, sp) + layer_in * len(groups)
        transient = max(_per_token([x for x in saved if x.group == g], tp, sp) for g in groups)
    elif s.recompute == "none":
        stored, transient = full_layer, 0.0
    elif s.recompute == "selective":
        core = _per_token([x for x in saved if x.core], tp, sp)
        stored, transient = full_layer - core, core
    elif s.recompute == "selective_op":
        h, d, a, kv, f = (m.hidden_size, m.d_head, m.num_heads, m.num_kv_heads,
                          m.mlp_width_per_token)  # fmt: skip
        # layer input, q and v (1st and 3rd matmul), attention output + lse, gate (5th), down (7th)
        stored = layer_in + e * (a * d + kv * d + a * d + f + h) / tp + 4.0 * a / tp
        transient = max(full_layer - stored, 0.0)
    else:  # full
        stored, transient = layer_in, full_layer
    per_layer_stored = stored * tokens
    n_stored_layers = layers * in_flight
    if s.activation_offload:  # saved tensors stream to the CPU; about two layers stay resident
        n_stored_layers = min(n_stored_layers, 2)
    pieces = tuple((x.name, x.bytes_per_token / (tp if (x.tp_split or sp) else 1)) for x in saved)
    return LayerActivations(
        stored=per_layer_stored * n_stored_layers,
        transient=transient * tokens,
        stored_per_token=stored,
        stored_layers=n_stored_layers,
        transient_per_token=transient,
        pieces=pieces,
        rule=rule,
    )


def fsdp1_held_input_grads(m: ModelSpec, s: TrainingSetup, layers: int) -> float:
    """Layer-input gradients FSDP1 keeps to the end of backward for frozen decoder units under
    HF's reentrant checkpointing (accelerate FSDP1 with PEFT: transformers' Trainer and
    fms-hf-tuning set PEFT's fsdp_auto_wrap_policy, so adapters are their own units and each
    decoder unit's flat parameter is frozen).

    torch.distributed.fsdp._runtime_utils._register_post_backward_reshard_only_hook runs in the
    grad-enabled (recomputed) forward of a frozen unit and calls
    torch.autograd.graph.register_multi_grad_hook on the unit's inputs; its closure keeps
    `grad_fns = list(map(_get_grad_fn_or_grad_acc, tensors))`, here the AccumulateGrad node of
    the checkpoint's detached input leaf, which holds that leaf (the checkpointed input's
    storage) and the gradient accumulated into its `.grad`. The handle is stored as
    `flat_param._post_backward_hook_state` and removed only by `_finalize_params` in the
    post-backward final callback. So every layer's checkpointed input stays alive through the
    backward pass (the estimate already holds all of them at a layer's backward) and gains its
    gradient, stream dtype x hidden per token: at the first layer's backward, one per layer.
    Not when the checkpoint runs inside the unit or without reentry: the hook then holds the
    previous layer's output node, whose saved tensors autograd releases as usual.
    """
    fsdp1 = s.zero == 3 and s.dp > 1 and not s.deepspeed and s.stack == "hf"
    frozen_units = s.method != "full"
    reentrant = s.recompute == "full" and not s.recompute_modules and s.hf_reentrant_checkpointing
    if not (fsdp1 and frozen_units and reentrant):
        return 0.0
    sp = s.sequence_parallel and s.tp > 1
    return layers * s.tokens * stream_bytes(s) * m.hidden_size / (s.tp if sp else 1)


def mask_bytes(s: TrainingSetup) -> float:
    """Attention masks materialized for the whole forward: HF builds a 4D float mask for eager."""
    if s.attention == "eager":
        return s.micro_batch * s.seq_len**2 * (4.0 if s.precision == "fp32" else 2.0)
    if s.attention == "sdpa" and s.packing:  # block-causal boolean mask for packed rows
        return float(s.micro_batch * s.seq_len**2)
    return 0.0


def head_input_bytes(m: ModelSpec, s: TrainingSetup, has_head: bool) -> float:
    """What the final norm and lm_head save. The norm as a decoder norm (_norm_tensors: its fp32
    input under HF, its input and an fp32 rstd per row under Liger; its normalized output too
    when the head trains); lm_head its input when its weight trains, unless a fused linear
    cross-entropy computes that input's gradient in the forward pass and saves nothing."""
    if not has_head:
        return 0.0
    e = 4.0 if s.precision == "fp32" else 2.0
    h = m.hidden_size
    head_trains = s.method == "full" or s.train_embeddings
    norm = sum(x.bytes_per_token for x in _norm_tensors(s, "final", h, "head", head_trains))
    fused_loss = s.liger or s.loss == "fused"
    lm_head_in = e * h if head_trains and not fused_loss else 0.0
    return s.tokens * (norm + lm_head_in)


def layer_backward_working_bytes(m: ModelSpec, s: TrainingSetup) -> float:
    """Backward of one layer: besides its (recomputed) activations, the gradients of gate and
    up (of up alone in a plain MLP). Liger's SwiGLU backward writes them in place into the
    saved gate and up tensors: no extra bytes."""
    if s.liger and m.mlp_branches == 2:
        return 0.0
    return s.tokens * m.mlp_branches * stream_bytes(s) * m.mlp_width_per_token / s.tp


@dataclass(frozen=True)
class StageActivations:
    stored: float  # alive from forward through the start of backward
    layer_backward: float  # alive at the backward of a layer (the first one's: FSDP1's held)
    stored_term: Term = Term("activations", "0")
    layer_backward_term: Term = Term("activations", "0")


def stage_activations(
    m: ModelSpec, s: TrainingSetup, layers: int, in_flight: int, has_head: bool
) -> StageActivations:
    """Activations of a pipeline stage of `layers` decoder layers holding `in_flight`
    micro-batches, with the head's and the masks."""
    acts = activation_bytes(m, s, layers, in_flight)
    stored = acts.stored + head_input_bytes(m, s, has_head) + mask_bytes(s)
    working = layer_backward_working_bytes(m, s)
    held = fsdp1_held_input_grads(m, s, layers)
    head, masks = head_input_bytes(m, s, has_head), mask_bytes(s)
    stored_term = Term(
        "activations",
        "tokens * stored_per_token * stored_layers + head_inputs + masks",
        {
            "tokens": s.tokens,
            "stored_per_token": acts.stored_per_token,
            "stored_layers": acts.stored_layers,
            "head_inputs": head,
            "masks": masks,
            "stored_per_token_is": acts.rule,
        }
        | {f"saved_{name}_per_token": b for name, b in acts.pieces},
        s.tokens * acts.stored_per_token * acts.stored_layers + head + masks,
    )
    backward_term = stored_term.plus(
        "tokens * recomputed_per_token + backward_working + fsdp1_held_input_grads",
        s.tokens * acts.transient_per_token + working + held,
        recomputed_per_token=acts.transient_per_token,
        backward_working=working,
        fsdp1_held_input_grads=held,
    )
    return StageActivations(
        stored, stored + acts.transient + working + held, stored_term, backward_term
    )
