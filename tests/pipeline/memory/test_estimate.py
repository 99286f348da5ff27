"""Each estimator term against hand-worked numbers."""

from __future__ import annotations

import pytest

from pipeline.memory.estimate import (
    NF4_DQ_BYTES,
    estimate,
    max_micro_batch,
    param_counts,
    state_bytes_per_param,
)
from pipeline.memory.gpus import get_gpu
from pipeline.memory.models import get_model
from schemas.memory import GIB, TrainingSetup

QWEN7 = get_model("qwen2.5-7b")


def test_param_counts_match_published_sizes() -> None:
    # Published totals: Qwen2.5-7B 7.62 B, Llama-3.1-8B 8.03 B, Llama-2-7B 6.74 B.
    assert param_counts(QWEN7).total == pytest.approx(7.6156e9, rel=1e-3)
    assert param_counts(get_model("llama-3.1-8b")).total == pytest.approx(8.0303e9, rel=1e-3)
    assert param_counts(get_model("llama-2-7b")).total == pytest.approx(6.7384e9, rel=1e-3)


def test_mixed_precision_adam_is_16_bytes_per_param() -> None:
    s = TrainingSetup(method="full", precision="bf16_mixed", seq_len=128, recompute="full")
    assert state_bytes_per_param(s) == (2.0, 2.0, 12.0)
    b = estimate(QWEN7, s)
    assert b.peak_phase == "optimizer_step"  # tiny batch: the step is the peak
    states = b.weights + b.gradients + b.optimizer
    assert states == pytest.approx(16 * param_counts(QWEN7).total, rel=1e-6)
    # pure bf16 keeps the Adam moments in bf16: 2 + 2 + 4
    pure = estimate(QWEN7, s.model_copy(update={"precision": "bf16"}))
    assert pure.weights + pure.gradients + pure.optimizer == pytest.approx(
        8 * param_counts(QWEN7).total, rel=1e-6
    )


def test_zero3_divides_model_states_by_dp() -> None:
    s = TrainingSetup(method="full", seq_len=128, recompute="full", cuda_context_gib=0)
    one = estimate(QWEN7, s)
    eight = estimate(QWEN7, s.model_copy(update={"zero": 3, "dp": 8}))
    psi = param_counts(QWEN7).total
    assert eight.optimizer == pytest.approx(12 * psi / 8, rel=1e-6)
    assert eight.gradients == pytest.approx(2 * psi / 8, rel=1e-6)
    # weights: 2 psi / 8 plus two unsharded layers and one layer's unsharded gradient
    layer = param_counts(QWEN7).per_layer
    assert eight.weights == pytest.approx(2 * psi / 8 + 6 * layer, rel=1e-6)
    assert one.optimizer == pytest.approx(8 * eight.optimizer, rel=1e-6)
    # ZeRO-1 shards only the optimizer state
    z1 = estimate(QWEN7, s.model_copy(update={"zero": 1, "dp": 8}))
    assert (z1.weights, z1.gradients) == (one.weights, one.gradients)
    assert z1.optimizer == eight.optimizer


def test_qlora_base_is_about_half_a_byte_per_param() -> None:
    assert pytest.approx(0.516, abs=1e-3) == NF4_DQ_BYTES
    s = TrainingSetup(method="qlora", seq_len=128)
    b = estimate(QWEN7, s)
    pc = param_counts(QWEN7)
    linear = pc.per_layer_linear * pc.num_layers
    rest = pc.total - linear  # embeddings, lm_head, norms, biases stay bf16
    dequant_tile = 2 * pc.largest_linear
    assert b.weights == pytest.approx(linear * NF4_DQ_BYTES + 2 * rest + dequant_tile, rel=1e-6)
    assert b.weights / pc.total < 1.0  # versus 2 B/param for the bf16 LoRA base
    lora = estimate(QWEN7, s.model_copy(update={"method": "lora"}))
    assert lora.weights == pytest.approx(2 * pc.total, rel=1e-6)
    nodq = estimate(QWEN7, s.model_copy(update={"double_quant": False}))
    # 0.373 bit per quantized parameter saved by double quantization
    assert (nodq.weights - b.weights) / linear == pytest.approx(0.373 / 8, rel=1e-2)


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


def test_selective_sits_between_none_and_full_recompute() -> None:
    s = TrainingSetup(method="full", seq_len=4096, micro_batch=2, attention="eager")
    acts = {
        mode: estimate(QWEN7, s.model_copy(update={"recompute": mode})).phases["layer_backward"]
        for mode in ("none", "selective", "full")
    }
    assert acts["full"] < acts["selective"] < acts["none"]
    # With eager attention, selective removes exactly the s^2 softmax tensors of every layer:
    # (4 B fp32 softmax + 2 B bf16 probs) x heads x s^2 x b per layer, minus one layer rebuilt.
    heads, layers = QWEN7.num_heads, QWEN7.num_layers
    s2 = (4 + 2) * heads * 4096 * 4096 * 2
    saved = acts["none"] - acts["selective"]
    assert saved == pytest.approx(s2 * (layers - 1) * 1.05, rel=1e-3)  # x allocator reserve
    # Full recompute keeps 2*s*b*h bytes per layer (the layer input)
    full = estimate(QWEN7, s.model_copy(update={"recompute": "full", "attention": "flash"}))
    stored = full.phases["backward_start"]
    none = estimate(QWEN7, s.model_copy(update={"recompute": "none", "attention": "flash"}))
    assert none.components["activations"] > 10 * full.components["activations"]
    assert stored < none.phases["backward_start"]


def test_per_module_recompute_between_none_and_full() -> None:
    s = TrainingSetup(method="full", seq_len=2048, micro_batch=2, recompute="none")

    def acts(**kw: object) -> int:
        return estimate(QWEN7, s.model_copy(update=kw)).components["activations"]

    none = acts()
    attn = acts(recompute_modules=("attention",))
    both = acts(recompute_modules=("attention", "mlp"))
    assert both < attn < none


def test_lora_frozen_linears_save_less_than_full() -> None:
    s = TrainingSetup(method="full", seq_len=2048, recompute="none", lora_dropout=0.0)

    def acts(**kw: object) -> int:
        return estimate(QWEN7, s.model_copy(update=kw)).components["activations"]

    lora = acts(method="lora")
    assert lora < acts()
    assert (
        acts(method="lora", lora_dropout=0.1) > lora
    )  # a dropped-out copy of x per adapted module


def test_inference_kv_cache() -> None:
    # Qwen-7B (MHA, 32 layers, 4096 wide): KV cache at 2048 tokens = 2*32*2048*4096*2 B = 1 GiB;
    # the Qwen README measured 16.99 GB for bf16 generation of 2048 tokens.
    b = estimate(get_model("qwen-7b"), TrainingSetup(method="inference", seq_len=2048))
    assert b.total_bytes / 1e9 == pytest.approx(16.99, rel=0.10)


def test_max_micro_batch_monotone_and_respects_headroom() -> None:
    s = TrainingSetup(method="lora", seq_len=2048)
    gpu = get_gpu("a100-80g")
    sizes = [max_micro_batch(QWEN7, s, gpu, h) for h in (0.0, 0.15, 0.2, 0.5)]
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[1] >= 1
    mb = sizes[1]
    fit = estimate(QWEN7, s.model_copy(update={"micro_batch": mb}))
    over = estimate(QWEN7, s.model_copy(update={"micro_batch": mb + 1}))
    assert fit.total_bytes <= 0.85 * gpu.memory_bytes < over.total_bytes
    # bigger cards fit at least as much; longer sequences fit no more rows
    assert max_micro_batch(QWEN7, s, get_gpu("h200-141g")) >= mb
    longer = s.model_copy(update={"seq_len": 4096})
    assert max_micro_batch(QWEN7, longer, gpu) <= mb
    assert max_micro_batch(get_model("qwen2.5-72b"), s, get_gpu("rtx-4090")) == 0


def test_two_gpu_target_shards_with_zero3() -> None:
    s = TrainingSetup(method="full", seq_len=2048, zero=3, optimizer_fused=True)
    one = max_micro_batch(QWEN7, s, get_gpu("a100-80g"))
    two = max_micro_batch(QWEN7, s, get_gpu("2xa100-80g"))
    assert one == 0 < two  # 7B full FT needs ~114 GiB of states: only the 2-GPU split fits


def test_invalid_setup_is_rejected() -> None:
    with pytest.raises(ValueError):
        TrainingSetup(method="lora", lora_targets=())
    with pytest.raises(ValueError):
        TrainingSetup(seq_len=0)


def test_full_recompute_stores_layer_inputs_only() -> None:
    # 2 B x s x b x h per layer, plus the final norm's fp32 input (4 B x s x b x h)
    s = TrainingSetup(method="lora", seq_len=4096, micro_batch=2, recompute="full")
    b = estimate(QWEN7, s)
    tokens, h, layers = 4096 * 2, QWEN7.hidden_size, QWEN7.num_layers
    assert b.activations == 2 * tokens * h * layers + 4 * tokens * h
