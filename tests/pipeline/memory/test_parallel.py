"""ZeRO/FSDP sharding and its buffers against hand-worked numbers."""

from __future__ import annotations

import pytest

from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from pipeline.memory.params import param_counts
from schemas.memory import TrainingSetup

QWEN7 = get_model("qwen2.5-7b")


def test_zero3_divides_model_states_by_dp() -> None:
    s = TrainingSetup(method="full", seq_len=128, recompute="full", cuda_context_gib=0)
    one = estimate(QWEN7, s)
    eight = estimate(QWEN7, s.model_copy(update={"zero": 3, "dp": 8, "deepspeed": True}))
    psi = param_counts(QWEN7).total
    assert eight.optimizer == pytest.approx(12 * psi / 8, rel=1e-6)
    assert eight.gradients == pytest.approx(2 * psi / 8, rel=1e-6)
    # weights: 2 psi / 8; buffers: two unsharded layers, one layer's unsharded gradient,
    # DeepSpeed's 5e7-element prefetch bucket and its 5e8-element contiguous-gradient bucket
    # (reduce_bucket_size, contiguous_gradients on by default), all bf16
    layer = param_counts(QWEN7).per_layer
    assert eight.weights == pytest.approx(2 * psi / 8, rel=1e-6)
    assert eight.buffers == pytest.approx(6 * layer + 2 * (5e7 + 5e8), rel=1e-6)
    # FSDP has neither bucket: it prefetches one unit (counted in the two layers; FSDP2
    # shards the root unit like any other)
    fsdp = estimate(QWEN7, s.model_copy(update={"zero": 3, "dp": 8, "stack": "torchtune"}))
    assert fsdp.buffers == pytest.approx(6 * layer, rel=1e-6)
    assert one.optimizer == pytest.approx(8 * eight.optimizer, rel=1e-6)
    # ZeRO-1 shards only the optimizer state
    z1 = estimate(QWEN7, s.model_copy(update={"zero": 1, "dp": 8}))
    assert (z1.weights, z1.gradients) == (one.weights, one.gradients)
    assert z1.optimizer == eight.optimizer
    # ZeRO-1/2 keep a reduce and an all-gather bucket of 5e8 bf16 elements (fewer if less trains)
    assert z1.buffers == 2 * 5e8 * 2
    lora_z2 = estimate(QWEN7, TrainingSetup(method="lora", zero=2, dp=8, lora_rank=8))
    assert lora_z2.buffers == pytest.approx(2 * lora_z2.trainable_params * 2, rel=1e-6)


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


def test_lightning_fsdp_keeps_gradient_shards_of_frozen_weights() -> None:
    s = TrainingSetup(method="lora", zero=3, dp=4, seq_len=512, stack="torchtune")
    native = estimate(QWEN7, s)
    lightning = estimate(QWEN7, s.model_copy(update={"stack": "lightning"}))
    assert lightning.components["gradients"] - native.components["gradients"] == pytest.approx(
        2 * param_counts(QWEN7).total / 4, rel=1e-6
    )


def test_fsdp_keeps_the_root_unit_unsharded() -> None:
    # FSDP1 does not reshard its root unit after forward: embeddings, final norm and lm_head
    # (Qwen2.5-7B: 2 x 152,064 x 3,584 + 3,584 params, bf16) stay whole through backward, i.e.
    # (1 - 1/dp) of them on top of the shard. DeepSpeed ZeRO-3 releases them like any module.
    s = TrainingSetup(method="lora", zero=3, dp=4, seq_len=512, stack="hf")
    fsdp = estimate(QWEN7, s)
    ds = estimate(QWEN7, s.model_copy(update={"deepspeed": True}))
    root = (2 * QWEN7.vocab_size * QWEN7.hidden_size + QWEN7.hidden_size) * 2
    ds_buckets = 2 * (5e7 + 5e8)  # DeepSpeed's prefetch and contiguous-gradient buckets
    assert fsdp.buffers - ds.buffers == pytest.approx(root * (1 - 1 / 4) - ds_buckets, rel=1e-9)
    # with the parameters offloaded to the CPU, the whole root unit is on the GPU
    off = estimate(QWEN7, s.model_copy(update={"offload": "all"}))
    off_ds = estimate(QWEN7, s.model_copy(update={"offload": "all", "deepspeed": True}))
    assert off.buffers - off_ds.buffers == pytest.approx(root - ds_buckets, rel=1e-9)
    native = s.model_copy(update={"stack": "torchtune"})  # FSDP2 recipes shard them apart
    assert estimate(QWEN7, native).buffers == pytest.approx(estimate(QWEN7, native.model_copy(
        update={"deepspeed": True})).buffers - ds_buckets, abs=2)  # fmt: skip


def test_fsdp_gradient_shards_stay_in_the_reduce_scatter_streams_pool() -> None:
    # FSDP allocates the sharded gradients on its reduce-scatter (post-backward) stream; the
    # caching allocator serves those blocks to no compute-stream allocation, so at the start of
    # backward (no gradient alive, accumulation 1) the pool of the last step's shards is still
    # reserved. Mistral-7B full fine-tune, pure bf16, FSDP over 2 GPUs: the pool is the
    # gradient shards, 2 B x psi / 2.
    mistral = get_model("mistral-7b")
    psi = param_counts(mistral).total
    s = TrainingSetup(method="full", precision="bf16", seq_len=4096, micro_batch=4, zero=3, dp=2)
    b = estimate(mistral, s)
    allocated, _, _, pool = b.phase_parts["backward_start"]
    assert pool == pytest.approx(2 * psi / 2, rel=1e-6)
    assert b.phase_parts["optimizer_step"][3] == 0  # the shards are allocated then
    assert b.components["gradients"] == pytest.approx(pool, rel=1e-6)
    # reserved at the peak is the most any moment reserves, the pool counted
    assert b.reserved_bytes >= allocated + pool
    # the explained reserve names the carried pool and still sums to the breakdown
    reserve = next(t for t in b.explain if t.name == "allocator_reserve")
    assert "stream_pool_bytes" in reserve.formula
    assert reserve.bytes == pytest.approx(b.allocator_reserve, abs=2)
    # FSDP1's CPUOffload still writes the shards on the device and keeps them to the end of
    # backward (_saved_grad_shard): the same pool, though the gradients term is on the host
    off = estimate(mistral, s.model_copy(update={"offload": "all"}))
    assert off.gradients == 0
    assert off.phase_parts["backward_start"][3] == pytest.approx(2 * psi / 2, rel=1e-6)
    # FSDP2 copies each reduce-scatter output to the host as reduced; DeepSpeed ZeRO-3 reduces
    # into its own partitions; one GPU has no reduce-scatter stream
    for other in (
        s.model_copy(update={"offload": "all", "stack": "torchtune"}),
        s.model_copy(update={"deepspeed": True}),
        s.model_copy(update={"dp": 1}),
    ):
        assert all(p[3] == 0 for p in estimate(mistral, other).phase_parts.values())


def test_fsdp_parameter_offload_keeps_adapters_on_the_host_and_their_grad_shards_on_device() -> (
    None
):
    # FSDP CPUOffload(offload_params=True), LoRA r=8 on q and v of Mistral-7B (h 4096, 8 KV
    # heads of 128: v out 1024), pure bf16, 2 GPUs. Per layer: q 8 x (4096 + 4096) = 65,536,
    # v 8 x (4096 + 1024) = 40,960; 32 layers: 3,407,872 adapter parameters. Their shards,
    # gradients and AdamW states are on the host (adapters 0); the gradient shards the
    # reduce-scatter wrote stay on the device: 3,407,872 x 2 B / 2 = 3,407,872 B.
    mistral = get_model("mistral-7b")
    s = TrainingSetup(
        method="lora",
        precision="bf16",
        lora_rank=8,
        lora_targets=("q_proj", "v_proj"),
        seq_len=1024,
        zero=3,
        dp=2,
        offload="all",
    )
    b = estimate(mistral, s)
    assert b.trainable_params == 3_407_872
    assert b.adapters == 0
    assert b.phase_parts["backward_start"][3] == pytest.approx(3_407_872, abs=1)


def test_deepspeed_zero3_gradient_partitions_are_alive_at_every_moment() -> None:
    # stage3.py allocates the gradient partitions once (grad_partitions_flat_buffer, zeros of
    # the partitions' size) on the device: with accumulation 1 they are alive at the start of
    # backward too. Full fine-tune of Qwen2.5-7B, bf16 mixed, 8 GPUs: 2 B x psi / 8 there,
    # where FSDP (hf stack) has none but keeps its root unit (2 x 152,064 x 3,584 + 3,584
    # params, bf16, 7/8 of it beyond the shard) and DeepSpeed adds its two buckets.
    psi = param_counts(QWEN7).total
    s = TrainingSetup(method="full", seq_len=128, recompute="full", zero=3, dp=8)
    ds = estimate(QWEN7, s.model_copy(update={"deepspeed": True}))
    fsdp = estimate(QWEN7, s)
    ds_bs, fsdp_bs = ds.phase_parts["backward_start"][0], fsdp.phase_parts["backward_start"][0]
    buckets = 2 * (5e7 + 5e8)
    root = (2 * QWEN7.vocab_size * QWEN7.hidden_size + QWEN7.hidden_size) * 2 * (1 - 1 / 8)
    assert ds_bs - fsdp_bs == pytest.approx(2 * psi / 8 + buckets - root, rel=1e-6)
