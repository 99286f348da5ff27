"""Kernels and memory features (Liger, fused LoRA, offload, paged optimizers) by hand.

A small decoder: hidden 64, 4 heads of 16, 2 KV heads, intermediate 128, vocabulary 1,000.
"""

from __future__ import annotations

import argparse

from pipeline.memory.activations import activation_bytes, head_input_bytes, layer_saved_tensors
from pipeline.memory.cli import add_arguments, main, setup_from_args
from pipeline.memory.estimate import estimate
from pipeline.memory.logits import logits_bytes
from schemas.memory import ModelSpec, TrainingSetup

M = ModelSpec(
    name="tiny", hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
    intermediate_size=128, vocab_size=1000,
)  # fmt: skip
# per layer: q 64x64 + k 64x32 + v 64x32 + o 64x64 + gate/up/down 3 x 64x128 = 36,864, norms 128
PER_LAYER = 36864 + 128
PARAMS = 2 * PER_LAYER + 2 * 64000 + 64  # layers, embedding and untied lm_head, final norm


def _per_token(s: TrainingSetup) -> float:
    return sum(t.bytes_per_token for t in layer_saved_tensors(M, s))


def test_liger_norms_and_swiglu_save_less() -> None:
    # full FT, bf16 (e = 2), flash. HF: each norm 4h (fp32 input) + 2h (normed) = 384;
    # qkv_in 2h 128; q,k,v 2 x (64 + 2 x 32) 256; lse 4 x 4 = 16; attention out 128;
    # gate_up_in 128; gate, up, SiLU(gate) 3 x 2 x 128 = 768; down_in 256
    s = TrainingSetup(method="full", recompute="none")
    assert _per_token(s) == 384 + 128 + 256 + 16 + 128 + 384 + 128 + 768 + 256
    # Liger: each norm its bf16 input and an fp32 rstd, 2 x 64 + 4 = 132; SwiGLU gate and up only
    liger = s.model_copy(update={"liger": True})
    assert _per_token(liger) == 132 + 128 + 256 + 16 + 128 + 132 + 128 + 2 * 2 * 128 + 256


def test_fused_lora_saves_no_dropout_copies_or_a_outputs() -> None:
    # LoRA r=8 on all seven linears, dropout 0.05: norms 4h = 256 each, q,k,v 256, lse 16,
    # attention out 128, gate/up/SiLU 768; per adapter its A output 2 x 8 = 16 (x 7) and the
    # dropped-out input + mask (2 + 1) x d_in: q,k,v,o,gate,up 6 x 192, down 3 x 128 = 384
    s = TrainingSetup(method="lora", lora_rank=8, recompute="none")
    assert _per_token(s) == 256 + 256 + 16 + 128 + 256 + 768 + 7 * 16 + 6 * 192 + 384
    # fused: q/k/v's and gate/up's input once (2 x 64 each), gate and up (2 x 2 x 128),
    # down's input recomputed, no adapter tensors
    fused = s.model_copy(update={"fused_lora": True})
    assert _per_token(fused) == 256 + 128 + 256 + 16 + 128 + 256 + 128 + 512


def test_liger_fused_linear_cross_entropy_by_hand() -> None:
    # 300 tokens: chunk = next_pow2(ceil(300 / ceil(1000 / 64))) = next_pow2(19) = 32 rows;
    # 32 x 1000 x 2 B logits chunk + 300 x 64 x 2 B grad_input + 300 x 4 B losses
    s = TrainingSetup(method="lora", seq_len=300, liger=True)
    assert logits_bytes(M, s) == 32 * 1000 * 2 + 300 * 64 * 2 + 300 * 4
    # full FT: lm_head's gradient is accumulated in the forward, 1000 x 64 x 2 B
    full = s.model_copy(update={"method": "full"})
    assert logits_bytes(M, full) == 32 * 1000 * 2 + 300 * 64 * 2 + 300 * 4 + 1000 * 64 * 2
    assert logits_bytes(M, s.model_copy(update={"liger": False})) == 300 * 1000 * 12
    # the final norm keeps 2 x 64 + 4 B a token; lm_head's input is not saved
    assert head_input_bytes(M, full, True) == 300 * (132 + 0)


def test_activation_offload_keeps_two_layers() -> None:
    six = M.model_copy(update={"num_layers": 6})
    s = TrainingSetup(method="lora", seq_len=300)  # full recompute: layer input 2 x 64 B/token
    assert activation_bytes(six, s, 6, 1).stored == 6 * 300 * 128
    off = s.model_copy(update={"activation_offload": True})
    assert activation_bytes(six, off, 6, 1).stored == 2 * 300 * 128


def test_optimizer_offload_deepspeed_moves_gradients_torchao_keeps_them() -> None:
    s = TrainingSetup(method="full", offload="optimizer", optimizer_fused=True)
    b = estimate(M, s)
    assert b.components["optimizer"] == 0 and b.weights == PARAMS * 2
    assert b.components["gradients"] == PARAMS * 2  # torchao CPUOffloadOptimizer
    ds = estimate(M, s.model_copy(update={"deepspeed": True, "zero": 2}))
    assert ds.components["gradients"] == 0
    assert ds.buffers == 5e8 * 2  # the ipg bucket stays on the device


def test_fsdp_offload_keeps_only_gathered_units_and_root() -> None:
    s = TrainingSetup(method="lora", zero=3, dp=2, offload="all")
    b = estimate(M, s)
    assert b.weights == b.components["gradients"] == b.optimizer == 0
    # current + prefetched layer (2 x 36,992 x 2 B) + FSDP1's unsharded root
    # (embedding, lm_head and final norm, 128,064 x 2 B)
    assert b.buffers == 2 * PER_LAYER * 2 + (128000 + 64) * 2


def test_paged_optimizer_outside_the_allocator() -> None:
    # bf16 mixed AdamW: fp32 master + two fp32 moments, 12 B a parameter, in unified memory
    b = estimate(M, TrainingSetup(method="full", optimizer="paged_adamw"))
    assert b.paged_optimizer == PARAMS * 12
    assert b.total_bytes - b.reserved_bytes == b.context + PARAMS * 12


def _setup(*flags: str) -> TrainingSetup:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return setup_from_args(parser.parse_args(["--model", "qwen2.5-7b", *flags]))


def test_cli_flags_set_the_features(capsys) -> None:  # type: ignore[no-untyped-def]
    assert _setup("--optimizer", "paged_adamw_32bit").optimizer == "paged_adamw"
    assert _setup("--optimizer", "adamw_bnb_8bit").optimizer == "adamw_8bit"
    s = _setup("--liger", "--fused-lora", "--offload-activations", "--loss-chunks", "16")
    assert (s.liger, s.fused_lora, s.activation_offload, s.loss_chunks) == (True, True, True, 16)
    s = _setup("--fsdp-offload", "--dp", "2")
    assert (s.zero, s.offload, s.deepspeed) == (3, "all", False)
    s = _setup("--zero", "2", "--offload-optimizer", "cpu")
    assert (s.offload, s.deepspeed) == ("optimizer", True)
    s = _setup("--zero", "3", "--offload-optimizer", "cpu", "--offload-param", "cpu")
    assert (s.offload, s.deepspeed) == ("all", True)
    assert main(["--model", "qwen2.5-7b", "--offload-param", "cpu", "--json"]) == 2
    assert "--offload-optimizer cpu" in capsys.readouterr().err
