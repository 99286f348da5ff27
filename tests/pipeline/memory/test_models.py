from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.memory.gpus import GPUS, get_gpu
from pipeline.memory.models import PRESETS, get_model, load_config_json

REQUIRED = [
    "qwen2.5-0.5b",
    "qwen2.5-1.5b",
    "qwen2.5-3b",
    "qwen2.5-7b",
    "qwen2.5-14b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "qwen2-7b",
    "qwen1.5-7b",
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "mistral-7b",
]


def test_presets_cover_the_issue_list() -> None:
    assert set(REQUIRED) <= set(PRESETS)
    assert get_model("Qwen2.5-7B") is PRESETS["qwen2.5-7b"]
    assert PRESETS["qwen2.5-7b"].vocab_size == 152064
    assert PRESETS["qwen2.5-1.5b"].vocab_size == 151936 and PRESETS["qwen2.5-1.5b"].tie_embeddings


def test_qwen1_config_json_computes_its_loss_on_16bit_logits(tmp_path: Path) -> None:
    # Qwen-7B's config.json (model_type "qwen"): its remote code skips the logits' fp32 upcast
    cfg = {
        "model_type": "qwen",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "intermediate_size": 22016,
        "vocab_size": 151936,
        "seq_length": 8192,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = load_config_json(tmp_path, name="qwen-7b")
    assert spec == PRESETS["qwen-7b"] and not spec.logits_upcast
    assert PRESETS["qwen2.5-7b"].logits_upcast


def test_local_config_json(tmp_path: Path) -> None:
    cfg = {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "intermediate_size": 18944,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
        "max_position_embeddings": 32768,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    spec = load_config_json(tmp_path, name="local")
    ref = PRESETS["qwen2.5-7b"]
    assert spec.model_dump(exclude={"name"}) == ref.model_dump(exclude={"name"})
    assert get_model(tmp_path / "config.json").num_kv_heads == 4
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="hidden_size"):
        load_config_json(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="unknown model"):
        get_model("gpt-17")


def test_gpu_catalog() -> None:
    for name in ("rtx-4090", "rtx-5090", "a100-40g", "a6000", "l40s-48g", "a100-80g",
                 "h100-80g", "h100-94g", "h100-nvl", "h200-141g", "2xa100-80g"):  # fmt: skip
        assert name in GPUS
    assert get_gpu("2xa100-80g").count == 2
    assert get_gpu("a100-80g").memory_gib == pytest.approx(80.0)
    assert 139 < get_gpu("h200-141g").memory_gib < 141
    with pytest.raises(ValueError):
        get_gpu("tpu-v5")
