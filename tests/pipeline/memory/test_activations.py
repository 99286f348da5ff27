"""Activation terms against hand-worked numbers."""

from __future__ import annotations

import pytest

from pipeline.memory.activations import layer_saved_tensors
from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from schemas.memory import GIB, TrainingSetup

QWEN7 = get_model("qwen2.5-7b")


def test_selective_sits_between_none_and_full_recompute() -> None:
    s = TrainingSetup(
        method="full", seq_len=4096, micro_batch=2, attention="eager", allocator_reserve=0.05
    )
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


def test_full_recompute_stores_layer_inputs_only() -> None:
    # 2 B x s x b x h per layer, plus the final norm's fp32 input (4 B x s x b x h)
    s = TrainingSetup(method="lora", seq_len=4096, micro_batch=2, recompute="full")
    b = estimate(QWEN7, s)
    tokens, h, layers = 4096 * 2, QWEN7.hidden_size, QWEN7.num_layers
    assert b.activations == 2 * tokens * h * layers + 4 * tokens * h


def test_quantized_linears_keep_their_inputs() -> None:
    # bitsandbytes' MatMul4Bit saves its input for the input gradient: without recomputation a
    # QLoRA layer keeps the q/k/v input (h), the gate/up input (h) and the down input (f) that a
    # frozen bf16 linear would not, 2 bytes each per token (dropout-free adapters on q,v only).
    s = TrainingSetup(method="lora", seq_len=1024, recompute="none", lora_dropout=0.0,
                      lora_targets=("q_proj", "v_proj"), stack="torchtune")  # fmt: skip
    lora = estimate(QWEN7, s)
    qlora = estimate(QWEN7, s.model_copy(update={"method": "qlora"}))
    h, f, n = QWEN7.hidden_size, QWEN7.intermediate_size, QWEN7.num_layers
    extra = 1024 * n * 2 * (h + f)  # q/k/v input already kept by the q,v adapters
    assert qlora.components["activations"] - lora.components["activations"] == extra


def test_layer_backward_working_set() -> None:
    # the gradients of gate and up outputs: 2 x intermediate x 2 B per token, on top of the
    # rebuilt layer (full recompute)
    s = TrainingSetup(method="lora", seq_len=4096, lora_dropout=0.0, stack="torchtune")
    b = estimate(QWEN7, s)
    rebuilt = sum(x.bytes_per_token for x in layer_saved_tensors(QWEN7, s)) * 4096
    inputs = 2 * QWEN7.hidden_size * 4096 * QWEN7.num_layers
    outside = 4 * QWEN7.hidden_size * 4096  # final norm's fp32 input
    working = 2 * 2 * QWEN7.intermediate_size * 4096
    assert b.components["activations"] == pytest.approx(
        inputs + outside + rebuilt + working, rel=1e-6
    )


def test_kbit_upcast_makes_the_residual_stream_fp32() -> None:
    # PEFT's prepare_model_for_kbit_training (hf stack, bnb base, one GPU) leaves embeddings and
    # norms fp32: the hidden states and bnb's outputs (cast back to the input dtype) are fp32.
    # Hand-worked for Qwen2.5-7B (h 3584, f 18944), adapters on q,k,v,o without dropout.
    qkvo = ("q_proj", "k_proj", "v_proj", "o_proj")
    s = TrainingSetup(method="qlora", seq_len=2048, lora_dropout=0.0, lora_targets=qkvo)
    h, f = QWEN7.hidden_size, QWEN7.intermediate_size
    hf = {x.name: x.bytes_per_token for x in layer_saved_tensors(QWEN7, s)}
    bf16 = {
        x.name: x.bytes_per_token
        for x in layer_saved_tensors(QWEN7, s.model_copy(update={"kbit_upcast": False}))
    }
    # each of q, k, v saves its own bf16 cast of the input, the fp32 adapters the fp32 input
    assert (hf["qkv_in"], bf16["qkv_in"]) == (3 * 2 * h + 4 * h, 2 * h)
    assert (hf["gate_up_in"], bf16["gate_up_in"]) == (2 * 2 * h, 2 * h)
    assert (hf["gate_up_silu"], bf16["gate_up_silu"]) == (3 * 4 * f, 3 * 2 * f)
    assert hf["down_in"] == bf16["down_in"] == 2 * f  # bnb's bf16 cast of the fp32 product
    assert hf["q_k_v"] == bf16["q_k_v"]  # HF casts q, k, v back to bf16 for flash attention
    # checkpointed layer inputs: 4 B instead of 2 B per hidden element, per layer
    up, down = estimate(QWEN7, s), estimate(QWEN7, s.model_copy(update={"kbit_upcast": False}))
    tokens, n = 2048, QWEN7.num_layers
    rebuilt = (sum(hf.values()) - sum(bf16.values())) * tokens
    working = 2 * (4 - 2) * f * tokens  # fp32 gradients of gate and up
    extra = (4 - 2) * h * tokens * n + rebuilt + working
    assert up.components["activations"] - down.components["activations"] == pytest.approx(extra)
    # TRL skips the preparation when the 4-bit weights are sharded; torchtune never runs it
    sharded = s.model_copy(update={"zero": 3, "dp": 2})
    assert (
        estimate(QWEN7, sharded).components["activations"]
        < (
            estimate(QWEN7, sharded.model_copy(update={"kbit_upcast": True})).components[
                "activations"
            ]
        )
    )
    tt = estimate(QWEN7, s.model_copy(update={"stack": "torchtune"}))
    assert tt.components["activations"] == down.components["activations"]
    assert tt.weights == down.weights < up.weights  # no fp32 embeddings, lm_head or norms


def test_fsdp1_frozen_units_hold_every_layer_input_gradient() -> None:
    # FSDP1's reshard-only hook on a frozen decoder unit's input (HF reentrant checkpointing)
    # keeps the checkpoint's input leaf and its .grad until the end of backward: at the first
    # layer's backward, one 16-bit layer-input gradient per layer is alive on top of the rest.
    # Llama-2-70B, LoRA, 2 GPUs, 2 x 4096 tokens: 80 x 8192 x 8192 x 2 B = 10 GiB exactly.
    llama70 = get_model("llama-2-70b")
    s = TrainingSetup(method="lora", zero=3, dp=2, seq_len=4096, micro_batch=2, stack="hf")
    fsdp1 = estimate(llama70, s)
    ds = estimate(llama70, s.model_copy(update={"deepspeed": True}))
    held = fsdp1.components["activations"] - ds.components["activations"]
    assert held == pytest.approx(80 * 8192 * 8192 * 2, rel=1e-9)
    assert held == pytest.approx(10 * GIB, rel=1e-9)
    # 10 GiB of gradients outweigh the 2.9 GiB of fp32 loss buffers (8192 x 32,000 x 12 B):
    # the peak moves from the start of backward to the first layer's backward
    assert fsdp1.peak_phase == "layer_backward"
    # not for trained units (AccumulateGrad hooks), non-reentrant recompute or FSDP2 recipes
    for update in (
        {"method": "full"},
        {"recompute": "selective"},
        {"stack": "torchtune"},
        {"hf_reentrant_checkpointing": False},  # checkpoint inside the unit, or non-reentrant
    ):
        other = s.model_copy(update=update)
        plain = estimate(llama70, other.model_copy(update={"deepspeed": True}))
        assert estimate(llama70, other).components["activations"] == plain.components["activations"]
    # an fp32 residual stream (kbit upcast kept) holds 4 B gradients
    up = s.model_copy(update={"method": "qlora", "kbit_upcast": True})
    up_ds = up.model_copy(update={"deepspeed": True})
    diff = (
        estimate(llama70, up).components["activations"]
        - estimate(llama70, up_ds).components["activations"]
    )
    assert diff == pytest.approx(20 * GIB, rel=1e-9)
