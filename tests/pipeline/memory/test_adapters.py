"""LoRA adapters and trainable embeddings against hand-worked numbers."""

from __future__ import annotations

import pytest

from pipeline.memory.adapters import lora_params_per_layer
from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from pipeline.memory.params import param_counts
from schemas.memory import ALL_LINEAR, TrainingSetup

QWEN7 = get_model("qwen2.5-7b")


def test_lora_params_on_all_linears() -> None:
    # Qwen2.5-7B (h 3584, 4 KV heads of 128, f 18944), r=16 on all linears: 16 x (7168 + 4096
    # + 4096 + 7168 + 3 x 22528) per layer, 28 layers
    per_layer = lora_params_per_layer(QWEN7, 16, ALL_LINEAR)
    assert per_layer == 16 * (7168 + 4096 + 4096 + 7168 + 3 * 22528)
    b = estimate(QWEN7, TrainingSetup(method="lora", lora_rank=16, lora_targets=ALL_LINEAR))
    assert b.trainable_params == 28 * per_layer == 40_370_176
    # fp32 adapters with AdamW: weight, gradient, m and v, 4 B each
    assert b.adapters == pytest.approx(16 * b.trainable_params, rel=1e-9)


def test_trainable_embeddings_add_a_base_dtype_copy() -> None:
    # modules_to_save: embedding and lm_head (untied, 2 x 152,064 x 3,584) train in bf16
    s = TrainingSetup(method="lora", seq_len=512)
    plain = estimate(QWEN7, s)
    emb = estimate(QWEN7, s.model_copy(update={"train_embeddings": True}))
    pc = param_counts(QWEN7)
    big = pc.embedding + pc.lm_head
    assert emb.trainable_params - plain.trainable_params == big
    assert emb.weights - plain.weights == pytest.approx(2 * big, rel=1e-9)
    assert emb.optimizer == pytest.approx(4 * big, rel=1e-9)  # bf16 m and v
