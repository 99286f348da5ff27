"""The loss spike against hand-worked numbers."""

from __future__ import annotations

import pytest

from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from schemas.memory import GIB, ModelSpec, TrainingSetup

QWEN7 = get_model("qwen2.5-7b")


def test_logits_term_at_152k_vocabulary() -> None:
    # 2048 tokens x 152,064 vocab x 12 B (fp32 log-probs + their grad + the logits' grad)
    s = TrainingSetup(method="lora", seq_len=2048, micro_batch=1)
    b = estimate(QWEN7, s)
    assert b.peak_phase == "backward_start"
    assert b.logits_and_loss == 2048 * 152064 * 12
    assert b.logits_and_loss / GIB == pytest.approx(3.48, abs=0.01)
    chunked = estimate(QWEN7, s.model_copy(update={"loss": "chunked"}))
    fused = estimate(QWEN7, s.model_copy(update={"loss": "fused"}))
    assert fused.logits_and_loss < chunked.logits_and_loss < b.logits_and_loss
    tp2 = estimate(QWEN7, s.model_copy(update={"tp": 2}))
    assert tp2.logits_and_loss == b.logits_and_loss // 2  # vocab-parallel


def test_a_loop_holding_the_output_keeps_fp32_logits() -> None:
    # `output = model(...)`; `output.loss.backward()`: the returned fp32 logits (4 B per logit)
    # stay alive next to the loss's 12 B (2,048 tokens x 152,064 vocabulary)
    s = TrainingSetup(method="lora", seq_len=2048)
    held = estimate(QWEN7, s.model_copy(update={"output_held": True}))
    assert held.logits_and_loss - estimate(QWEN7, s).logits_and_loss == 2048 * 152064 * 4
    chunked = s.model_copy(update={"loss": "chunked"})
    assert estimate(QWEN7, chunked.model_copy(update={"output_held": True})).logits_and_loss == (
        estimate(QWEN7, chunked).logits_and_loss
    )


def _loss(m: ModelSpec, s: TrainingSetup) -> int:
    """The loss term's full size, whichever moment of the step peaks."""
    return estimate(m, s).components["logits_and_loss"]


def test_a_compiled_loss_keeps_the_16bit_logits_and_one_gradient() -> None:
    # torchtitan --training.compile, Llama-3.1-8B, 2 x 8,192 tokens x 128,256 vocabulary:
    # eager: fp32 log-probs + their gradient + the logits' gradient, 12 B per logit;
    # compiled: the bf16 logits saved for backward + their bf16 gradient, 2 + 2 = 4 B per logit
    llama = get_model("llama-3.1-8b")
    s = TrainingSetup(method="full", seq_len=8192, micro_batch=2, stack="torchtitan")
    logits = 2 * 8192 * 128256
    assert _loss(llama, s) == logits * 12
    compiled = s.model_copy(update={"compile_loss": True})
    assert _loss(llama, compiled) == logits * 4
    assert logits * 8 / GIB == pytest.approx(15.66, abs=0.01)  # what compiling saves
    # torchtune's compiled chunked CE (8 chunks): the bf16 chunks stay (2 B), each chunk's
    # gradient comes out in bf16 (2 B / 8) instead of the eager 12 B / 8
    chunked = s.model_copy(update={"loss": "chunked"})
    assert _loss(llama, chunked) == logits * (2 + 12 / 8)
    both = chunked.model_copy(update={"compile_loss": True})
    assert _loss(llama, both) == logits * (2 + 2 / 8)


def test_qwen1_loss_stays_16bit_under_deepspeed() -> None:
    # Qwen1's remote code hands lm_head's bf16 output to CrossEntropyLoss (no `.float()`).
    # Under DeepSpeed (model cast to bf16, no autocast) the saved log-probs, their gradient and
    # the logits' gradient are bf16: 3 x 2 B per logit, 4,096 tokens x 151,936 vocabulary.
    qwen1 = get_model("qwen-7b")
    assert not qwen1.logits_upcast and QWEN7.logits_upcast
    s = TrainingSetup(method="lora", seq_len=4096, deepspeed=True)
    assert estimate(qwen1, s).logits_and_loss == 4096 * 151936 * 6
    # HF Trainer without DeepSpeed runs autocast, which computes cross_entropy in fp32
    eager = s.model_copy(update={"deepspeed": False})
    assert estimate(qwen1, eager).logits_and_loss == 4096 * 151936 * 12
    # a model that upcasts its logits keeps the fp32 loss under DeepSpeed too
    assert estimate(QWEN7, s).logits_and_loss == 4096 * 152064 * 12


def test_a_held_output_keeps_its_logits_through_backward_and_the_step() -> None:
    # Answer.AI's train.py drops the output only after optimizer.step(): Llama-2-7B (its forward
    # upcasts the logits to fp32), 512 tokens x 32,000 vocabulary x 4 B = 65,536,000 B alive
    # at the loss spike, at each layer's backward and at the optimizer step.
    llama = get_model("llama-2-7b")
    s = TrainingSetup(method="lora", seq_len=512)
    plain = estimate(llama, s).phase_parts
    held = estimate(llama, s.model_copy(update={"output_held": True})).phase_parts
    for moment in ("backward_start", "layer_backward", "optimizer_step"):
        assert held[moment][0] - plain[moment][0] == pytest.approx(65_536_000, abs=2), moment
