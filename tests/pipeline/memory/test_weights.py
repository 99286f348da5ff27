"""Base weights: quantized storage bytes and PEFT's kbit upcast."""

from __future__ import annotations

import pytest

from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from pipeline.memory.params import param_counts
from pipeline.memory.weights import NF4_DQ_BYTES
from schemas.memory import TrainingSetup

QWEN7 = get_model("qwen2.5-7b")


def test_qlora_base_is_about_half_a_byte_per_param() -> None:
    assert pytest.approx(0.516, abs=1e-3) == NF4_DQ_BYTES
    s = TrainingSetup(method="qlora", seq_len=128, stack="torchtune")
    b = estimate(QWEN7, s)
    pc = param_counts(QWEN7)
    linear = pc.per_layer_linear * pc.num_layers
    rest = pc.total - linear  # embeddings, lm_head, norms, biases stay bf16
    assert b.weights == pytest.approx(linear * NF4_DQ_BYTES + 2 * rest, rel=1e-6)
    assert b.buffers == 2 * pc.largest_linear  # one linear dequantized to bf16
    assert b.weights / pc.total < 1.0  # versus 2 B/param for the bf16 LoRA base
    # PEFT's prepare_model_for_kbit_training upcasts every non-quantized parameter to fp32
    hf = estimate(QWEN7, s.model_copy(update={"stack": "hf"}))
    assert hf.weights - b.weights == pytest.approx(2 * rest, rel=1e-6)
    gptq = estimate(QWEN7, s.model_copy(update={"stack": "hf", "quantization": "gptq_int4"}))
    assert gptq.weights == pytest.approx(linear * (4 + 20 / 128) / 8 + 2 * rest, rel=1e-6)
    lora = estimate(QWEN7, s.model_copy(update={"method": "lora"}))
    assert lora.weights == pytest.approx(2 * pc.total, rel=1e-6)
    nodq = estimate(QWEN7, s.model_copy(update={"double_quant": False}))
    # 0.373 bit per quantized parameter saved by double quantization
    assert (nodq.weights - b.weights) / linear == pytest.approx(0.373 / 8, rel=1e-2)
