"""The peak estimate and the micro-batch search."""

from __future__ import annotations

import pytest

from pipeline.memory.estimate import estimate, max_micro_batch
from pipeline.memory.gpus import get_gpu
from pipeline.memory.models import get_model
from schemas.memory import TrainingSetup

QWEN7 = get_model("qwen2.5-7b")


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
