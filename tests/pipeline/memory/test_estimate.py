"""Each estimator term against hand-worked numbers."""

from __future__ import annotations

import pytest

from pipeline.memory.estimate import (
    NF4_DQ_BYTES,
    estimate,
    layer_saved_tensors,
    max_micro_batch,
    param_counts,
    state_bytes_per_param,
)
from pipeline.memory.gpus import get_gpu
from pipeline.memory.models import get_model
from schemas.memory import GIB, ModelSpec, TrainingSetup

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
    eight = estimate(QWEN7, s.model_copy(update={"zero": 3, "dp": 8, "deepspeed": True}))
    psi = param_counts(QWEN7).total
    assert eight.optimizer == pytest.approx(12 * psi / 8, rel=1e-6)
    assert eight.gradients == pytest.approx(2 * psi / 8, rel=1e-6)
    # weights: 2 psi / 8; buffers: two unsharded layers, one layer's unsharded gradient and
    # DeepSpeed's 5e7-element prefetch bucket, all bf16
    layer = param_counts(QWEN7).per_layer
    assert eight.weights == pytest.approx(2 * psi / 8, rel=1e-6)
    assert eight.buffers == pytest.approx(6 * layer + 2 * 5e7, rel=1e-6)
    assert one.optimizer == pytest.approx(8 * eight.optimizer, rel=1e-6)
    # ZeRO-1 shards only the optimizer state
    z1 = estimate(QWEN7, s.model_copy(update={"zero": 1, "dp": 8}))
    assert (z1.weights, z1.gradients) == (one.weights, one.gradients)
    assert z1.optimizer == eight.optimizer
    # ZeRO-1/2 keep a reduce and an all-gather bucket of 5e8 bf16 elements (fewer if less trains)
    assert z1.buffers == 2 * 5e8 * 2
    lora_z2 = estimate(QWEN7, TrainingSetup(method="lora", zero=2, dp=8, lora_rank=8))
    assert lora_z2.buffers == pytest.approx(2 * lora_z2.trainable_params * 2, rel=1e-6)


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
    assert fit.plan_with_bytes <= 0.85 * gpu.memory_bytes < over.plan_with_bytes
    assert max_micro_batch(QWEN7, s, gpu, conservative=False) >= mb  # expected fits more
    # bigger cards fit at least as much; longer sequences fit no more rows
    assert max_micro_batch(QWEN7, s, get_gpu("h200-141g")) >= mb
    longer = s.model_copy(update={"seq_len": 4096})
    assert max_micro_batch(QWEN7, longer, gpu) <= mb
    assert max_micro_batch(get_model("qwen2.5-72b"), s, get_gpu("rtx-4090")) == 0


def test_two_gpu_target_shards_with_zero3() -> None:
    s = TrainingSetup(method="full", seq_len=2048, zero=3, optimizer_fused=True)
    one = max_micro_batch(QWEN7, s, get_gpu("a100-80g"), conservative=False)
    two = max_micro_batch(QWEN7, s, get_gpu("2xa100-80g"), conservative=False)
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


def test_variable_length_fragmentation_and_reserve_by_hand() -> None:
    # reserved = allocated + r x (bytes allocated within the step) + f x (loss buffers): the
    # loss buffers (tokens x vocab) are the step's largest blocks, the ones a longer batch
    # cannot fit into cached blocks; activations are layer-sized and reuse the cache.
    s = TrainingSetup(method="lora", seq_len=2048, allocator_reserve=0.1, fragmentation=0.5)
    fixed = estimate(QWEN7, s)
    dynamic = fixed.allocated_bytes - fixed.weights - fixed.optimizer - fixed.adapters
    dynamic -= fixed.buffers
    assert fixed.allocator_reserve == pytest.approx(0.1 * dynamic, rel=1e-6)
    varied = estimate(QWEN7, s.model_copy(update={"variable_length": True}))
    assert varied.peak_phase == "backward_start" and varied.activations > 0
    loss = varied.logits_and_loss
    assert loss == 2048 * QWEN7.vocab_size * 12  # fp32 log-probs, their grad, the logits' grad
    assert varied.allocator_reserve == pytest.approx(0.1 * dynamic + 0.5 * loss, rel=1e-6)
    assert varied.allocated_bytes == fixed.allocated_bytes  # allocation itself is unchanged
    assert varied.measured("allocated") == fixed.measured("allocated")
    assert varied.measured("reserved") > fixed.measured("reserved")


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


def test_lightning_fsdp_keeps_gradient_shards_of_frozen_weights() -> None:
    s = TrainingSetup(method="lora", zero=3, dp=4, seq_len=512, stack="torchtune")
    native = estimate(QWEN7, s)
    lightning = estimate(QWEN7, s.model_copy(update={"stack": "lightning"}))
    assert lightning.components["gradients"] - native.components["gradients"] == pytest.approx(
        2 * param_counts(QWEN7).total / 4, rel=1e-6
    )


def test_plan_with_adds_the_regime_margin() -> None:
    b = estimate(QWEN7, TrainingSetup(method="lora"))
    assert b.regime == "LoRA" and b.plan_margin > 0
    assert b.plan_with_bytes == int(b.total_bytes * (1 + b.plan_margin))
    assert estimate(QWEN7, TrainingSetup(method="qlora")).regime == "QLoRA (NF4)"
    assert estimate(QWEN7, TrainingSetup(method="full", zero=3, dp=2)).regime == (
        "full, sharded/parallel"
    )


def test_paged_optimizer_states_live_outside_the_allocator() -> None:
    # Llama-3.1-8B full, pure bf16, bitsandbytes PagedAdamW8bit (torchtune's single-device
    # recipe): 8.03e9 params x 2 B (m and v in 8 bit) = 14.96 GiB of states in unified memory.
    llama = get_model("llama-3.1-8b")
    s = TrainingSetup(method="full", precision="bf16", optimizer="paged_adamw_8bit")
    paged = estimate(llama, s)
    resident = estimate(llama, s.model_copy(update={"optimizer": "adamw_8bit"}))
    states = param_counts(llama).total * 2.0
    assert paged.paged_optimizer == pytest.approx(states, rel=1e-6)
    assert paged.optimizer == 0 and paged.optimizer_step_temp == 0  # fused bnb kernel
    # torch.cuda.max_memory_reserved never sees them; the device total does
    assert resident.reserved_bytes - paged.reserved_bytes >= 0.99 * states
    assert paged.total_bytes == paged.reserved_bytes + paged.context + paged.paged_optimizer
    assert sum(paged.terms().values()) == pytest.approx(paged.total_bytes, abs=16)
    # 32-bit paged AdamW in pure bf16: two bf16 moments, 4 B per parameter
    p32 = estimate(llama, s.model_copy(update={"optimizer": "paged_adamw"}))
    assert p32.paged_optimizer == pytest.approx(param_counts(llama).total * 4.0, rel=1e-6)


def test_deepspeed_stage2_gradient_buckets_whatever_trains() -> None:
    # DeepSpeed's stage-1/2 optimizer allocates its contiguous-gradient (ipg) buffer of
    # reduce_bucket_size 16-bit elements at every backward, whatever the world size and however
    # few parameters train; overlap_comm adds a second one. Qwen2.5-7B LoRA r=16 on all linears
    # trains 16 x (7168 + 4096 + 4096 + 7168 + 3 x 22528) x 28 = 40,370,176 params, yet:
    s = TrainingSetup(method="lora", lora_rank=16, zero=2, dp=1, seq_len=512)
    plain = estimate(QWEN7, s)
    ds = estimate(QWEN7, s.model_copy(update={"deepspeed": True}))
    assert plain.buffers == 0  # no DeepSpeed, one GPU: nothing to reduce
    assert ds.buffers == 5e8 * 2  # DeepSpeed's default: one bucket of 5e8 elements, 1.0 GB
    # Qwen1's finetune/ds_config_zero2.json: reduce_bucket_size 2e8, overlap_comm true
    qwen = s.model_copy(
        update={"deepspeed": True, "reduce_bucket_elements": 2e8, "overlap_comm": True}
    )
    assert estimate(QWEN7, qwen).buffers == 2 * 2e8 * 2  # 0.8 GB
    full = s.model_copy(update={"method": "full", "deepspeed": True})
    assert estimate(QWEN7, full).buffers == 5e8 * 2  # the same bucket for a full fine-tune


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


def test_fsdp_keeps_the_root_unit_unsharded() -> None:
    # FSDP1 does not reshard its root unit after forward: embeddings, final norm and lm_head
    # (Qwen2.5-7B: 2 x 152,064 x 3,584 + 3,584 params, bf16) stay whole through backward, i.e.
    # (1 - 1/dp) of them on top of the shard. DeepSpeed ZeRO-3 releases them like any module.
    s = TrainingSetup(method="lora", zero=3, dp=4, seq_len=512, stack="hf")
    fsdp = estimate(QWEN7, s)
    ds = estimate(QWEN7, s.model_copy(update={"deepspeed": True}))
    root = (2 * QWEN7.vocab_size * QWEN7.hidden_size + QWEN7.hidden_size) * 2
    assert fsdp.buffers - ds.buffers == pytest.approx(root * (1 - 1 / 4), rel=1e-9)
    # with the parameters offloaded to the CPU, the whole root unit is on the GPU
    off = estimate(QWEN7, s.model_copy(update={"offload": "all"}))
    off_ds = estimate(QWEN7, s.model_copy(update={"offload": "all", "deepspeed": True}))
    assert off.buffers - off_ds.buffers == pytest.approx(root, rel=1e-9)
    native = s.model_copy(update={"stack": "torchtune"})  # FSDP2 recipes shard them apart
    assert estimate(QWEN7, native).buffers == estimate(QWEN7, native.model_copy(
        update={"deepspeed": True})).buffers  # fmt: skip


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
