"""The logits / cross-entropy spike at the start of the backward pass, per device.

tokens x vocab elements: 12 bytes each for an fp32-upcast loss (fp32 log-probs saved + their
gradient + the logits' gradient), half that for a loss kept in 16 bit (no upcast, no autocast),
4 bytes when torch.compile fuses the loss (16-bit logits saved + their gradient), less when
chunked; fused (Liger's linear cross-entropy) keeps one chunk of logits and the hidden states'
gradient instead (fused_linear_ce_bytes).
"""

from __future__ import annotations

import math

from schemas.memory import ModelSpec, Term, TrainingSetup

# Logit-element bytes at the loss spike (start of backward) by loss implementation.
LOGIT_BYTES_STANDARD = 12.0  # fp32 log-probs (saved) + fp32 grad of log-probs + fp32 grad of logits
LOGIT_BYTES_BF16_CHUNK = 2.0  # chunked: bf16 logits chunks stay materialized
LOGIT_BYTES_HELD = 4.0  # fp32 logits of a model output the training loop still holds


def loss_in_fp32(m: ModelSpec, s: TrainingSetup) -> bool:
    """Cross-entropy runs in fp32 when the model upcasts its logits, the run is fp32, or
    torch.autocast is active, which runs cross_entropy and log_softmax in fp32: HF Trainer and
    Lightning train 16-bit runs under autocast (accelerate's native AMP, whatever the weights'
    dtype) except under DeepSpeed, whose engine casts the model to 16 bit and runs none. A model
    that skips the upcast (Qwen1's remote code) there keeps the loss in 16 bit."""
    autocast = s.stack in ("hf", "lightning") and not s.deepspeed
    return m.logits_upcast or s.precision == "fp32" or autocast


def logits_bytes(m: ModelSpec, s: TrainingSetup) -> float:
    """Loss spike at the start of backward, per device."""
    tokens = s.tokens
    v = m.vocab_size / s.tp  # vocab-parallel output layer and cross-entropy
    e = 4.0 if s.precision == "fp32" else 2.0  # the logits' dtype as lm_head writes them
    # The three loss tensors (saved log-probs, their gradient, the logits' gradient) take 4 B
    # each in fp32, e each when the loss stays in the logits' dtype.
    per_chunk = LOGIT_BYTES_STANDARD * (1.0 if loss_in_fp32(m, s) else e / 4.0)
    if s.compile_loss:  # upcast + CE fused: the logits stay saved and get one gradient
        per_chunk = e
    loss = effective_loss(s)
    if loss == "standard":
        if s.compile_loss:
            return tokens * v * 2 * e
        # A loop that keeps the model output through backward (`output = model(...)`, then
        # `output.loss.backward()`) also keeps its logits, which HF's Llama-style forward
        # returned upcast to fp32 (`logits.float()`); HF Trainer drops them in compute_loss.
        return tokens * v * per_chunk + held_output_bytes(m, s)
    if loss == "chunked":
        return tokens * v * (LOGIT_BYTES_BF16_CHUNK + per_chunk / s.loss_chunks)
    return fused_linear_ce_bytes(m, s)


def held_logit_bytes(m: ModelSpec, s: TrainingSetup) -> float:
    """Bytes per logit of a model output the loop holds: fp32 where the forward upcasts, else
    the logits' dtype; none unless `output_held` and the standard, uncompiled loss returns
    the logits tensor."""
    if not s.output_held or effective_loss(s) != "standard" or s.compile_loss:
        return 0.0
    return LOGIT_BYTES_HELD if m.logits_upcast else (4.0 if s.precision == "fp32" else 2.0)


def held_output_bytes(m: ModelSpec, s: TrainingSetup) -> float:
    """The held model output's logits: tokens x vocab_per_device x held_logit_bytes. The loop
    drops the output only after the optimizer step (Answer.AI's train.py: `output = None`
    after `optimizer.step()`), so they are alive at every moment of the step after the
    forward: the loss spike, each layer's backward and the optimizer step."""
    return s.tokens * (m.vocab_size / s.tp) * held_logit_bytes(m, s)


def held_output_term(m: ModelSpec, s: TrainingSetup) -> Term:
    """`held_output_bytes` with its formula (the logits alive after the loss spike)."""
    inputs = {
        "tokens": s.tokens,
        "vocab_per_device": m.vocab_size / s.tp,
        "held_bytes_per_logit": held_logit_bytes(m, s),
    }
    formula = "tokens * vocab_per_device * held_bytes_per_logit"
    return Term("logits_and_loss", formula, inputs, held_output_bytes(m, s))


def effective_loss(s: TrainingSetup) -> str:
    """The loss implementation that runs: Liger's patch replaces the loss by its fused linear
    cross-entropy whatever `s.loss` says."""
    return "fused" if s.liger else s.loss


def fused_chunk_rows(m: ModelSpec, tokens: int) -> int:
    """Rows of one logits chunk of Liger's fused linear cross-entropy
    (fused_linear_cross_entropy_forward: inc_factor = cdiv(V, H),
    chunk_size = next_power_of_2(cdiv(BT, inc_factor))): about tokens x H logits a chunk."""
    rows = math.ceil(tokens / math.ceil(m.vocab_size / m.hidden_size))
    return 1 << (rows - 1).bit_length()


def fused_linear_ce_bytes(m: ModelSpec, s: TrainingSetup) -> float:
    """Fused linear + cross-entropy (Liger's LigerFusedLinearCrossEntropyFunction; Apple's CCE
    keeps less): the [tokens x vocab] logits never exist. The forward computes, chunk by chunk,
    a chunk's logits in the compute dtype (chunk_rows x V x e; the Triton kernel upcasts in
    registers and writes the logits' gradient in place), and from it the hidden states' gradient
    grad_input (tokens x hidden x e, kept for backward) and, when lm_head trains, its gradient
    grad_weight (V x hidden x e, accumulated in the forward), plus one fp32 loss per row."""
    e = 4.0 if s.precision == "fp32" else 2.0
    v = m.vocab_size / s.tp
    chunk = fused_chunk_rows(m, s.tokens) * v * e
    grad_input = s.tokens * m.hidden_size * e
    head_trains = s.method == "full" or s.train_embeddings
    grad_weight = v * m.hidden_size * e if head_trains else 0.0
    return chunk + grad_input + grad_weight + 4.0 * s.tokens


def logits_term(m: ModelSpec, s: TrainingSetup) -> Term:
    """`logits_bytes` with its formula: tokens x vocab x bytes per logit element, or the fused
    loss's chunk and gradients."""
    v, e = m.vocab_size / s.tp, 4.0 if s.precision == "fp32" else 2.0
    base = {"tokens": s.tokens, "vocab_per_device": v, "loss": effective_loss(s)}
    if effective_loss(s) == "fused":
        head_trains = s.method == "full" or s.train_embeddings
        inputs = base | {
            "chunk_rows": fused_chunk_rows(m, s.tokens),
            "dtype_bytes": e,
            "hidden": m.hidden_size,
            "head_trains": int(head_trains),
        }
        formula = (
            "chunk_rows * vocab_per_device * dtype_bytes + tokens * hidden * dtype_bytes"
            " + head_trains * vocab_per_device * hidden * dtype_bytes + 4 * tokens"
        )
        return Term("logits_and_loss", formula, inputs, logits_bytes(m, s))
    if effective_loss(s) == "chunked":
        per = logits_bytes(m, s) / (s.tokens * v) - LOGIT_BYTES_BF16_CHUNK
        inputs = base | {
            "chunk_bytes": LOGIT_BYTES_BF16_CHUNK,
            "loss_chunks": s.loss_chunks,
            "loss_bytes": per * s.loss_chunks,
        }
        formula = "tokens * vocab_per_device * (chunk_bytes + loss_bytes / loss_chunks)"
        return Term("logits_and_loss", formula, inputs, logits_bytes(m, s))
    per_logit = logits_bytes(m, s) / (s.tokens * v)
    inputs = base | {
        "bytes_per_logit": per_logit,
        "loss_in_fp32": int(loss_in_fp32(m, s)),
        "output_held": int(s.output_held),
        "compile_loss": int(s.compile_loss),
    }
    return Term(
        "logits_and_loss", "tokens * vocab_per_device * bytes_per_logit", inputs, logits_bytes(m, s)
    )
