"""Model shapes: presets from published config.json files, or a local config.json."""

from __future__ import annotations

import json
from pathlib import Path

from schemas.memory import ModelSpec


def _spec(name: str, h: int, n_layers: int, heads: int, kv: int, ffn: int, vocab: int,
          tied: bool, ctx: int, **kw: object) -> ModelSpec:  # fmt: skip
    return ModelSpec(
        name=name,
        hidden_size=h,
        num_layers=n_layers,
        num_heads=heads,
        num_kv_heads=kv,
        intermediate_size=ffn,
        vocab_size=vocab,
        tie_embeddings=tied,
        max_context=ctx,
        **kw,
    )


# hidden, layers, heads, kv heads, intermediate, vocab, tied embeddings, max context.
# Qwen1 ("qwen-7b" etc.) lists intermediate_size as twice the per-branch width; the width of
# w1/w2 is given here, and its remote code computes the loss on 16-bit logits (no `.float()`).
# Qwen2.5 contexts are the native 32k (longer needs YaRN).
QWEN1: dict[str, bool] = dict(qkv_bias=True, logits_upcast=False)
PRESETS: dict[str, ModelSpec] = {
    s.name: s
    for s in (
        _spec("qwen2.5-0.5b", 896, 24, 14, 2, 4864, 151936, True, 32768, qkv_bias=True),
        _spec("qwen2.5-1.5b", 1536, 28, 12, 2, 8960, 151936, True, 32768, qkv_bias=True),
        _spec("qwen2.5-3b", 2048, 36, 16, 2, 11008, 151936, True, 32768, qkv_bias=True),
        _spec("qwen2.5-7b", 3584, 28, 28, 4, 18944, 152064, False, 32768, qkv_bias=True),
        _spec("qwen2.5-14b", 5120, 48, 40, 8, 13824, 152064, False, 32768, qkv_bias=True),
        _spec("qwen2.5-32b", 5120, 64, 40, 8, 27648, 152064, False, 32768, qkv_bias=True),
        _spec("qwen2.5-72b", 8192, 80, 64, 8, 29568, 152064, False, 32768, qkv_bias=True),
        _spec("qwen2-7b", 3584, 28, 28, 4, 18944, 152064, False, 32768, qkv_bias=True),
        _spec("qwen1.5-7b", 4096, 32, 32, 32, 11008, 151936, False, 32768, qkv_bias=True),
        _spec("qwen-1.8b", 2048, 24, 16, 16, 5504, 151936, False, 8192, **QWEN1),
        _spec("qwen-7b", 4096, 32, 32, 32, 11008, 151936, False, 8192, **QWEN1),
        _spec("qwen-14b", 5120, 40, 40, 40, 13696, 152064, False, 8192, **QWEN1),
        _spec("qwen-72b", 8192, 80, 64, 64, 24576, 152064, False, 32768, **QWEN1),
        _spec("qwen3-8b", 4096, 36, 32, 8, 12288, 151936, False, 40960, head_dim=128, qk_norm=True),
        _spec("llama-2-7b", 4096, 32, 32, 32, 11008, 32000, False, 4096),
        _spec("llama-2-13b", 5120, 40, 40, 40, 13824, 32000, False, 4096),
        _spec("llama-2-70b", 8192, 80, 64, 8, 28672, 32000, False, 4096),
        _spec("llama-3-8b", 4096, 32, 32, 8, 14336, 128256, False, 8192),
        _spec("llama-3-70b", 8192, 80, 64, 8, 28672, 128256, False, 8192),
        _spec("llama-3.1-8b", 4096, 32, 32, 8, 14336, 128256, False, 131072),
        _spec("llama-3.1-70b", 8192, 80, 64, 8, 28672, 128256, False, 131072),
        _spec("llama-3.1-405b", 16384, 126, 128, 8, 53248, 128256, False, 131072),
        _spec("llama-3.2-3b", 3072, 28, 24, 8, 8192, 128256, True, 131072),
        _spec("mistral-7b", 4096, 32, 32, 8, 14336, 32000, False, 32768),
        _spec("tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000, False, 2048),
    )
}


def load_config_json(path: str | Path, name: str | None = None) -> ModelSpec:
    """Read a Hugging Face config.json (Llama, Qwen2/2.5/3, Mistral and Qwen1 key names)."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read model config: {exc}") from exc
    if "text_config" in cfg:  # multimodal wrappers keep the LM under text_config
        cfg = cfg["text_config"]

    def pick(*keys: str, default: object = None) -> object:
        for k in keys:
            if cfg.get(k) is not None:
                return cfg[k]
        if default is None:
            raise ValueError(f"{path}: config.json lacks {keys[0]!r}")
        return default

    hidden = int(pick("hidden_size", "n_embd", "d_model"))
    heads = int(pick("num_attention_heads", "n_head"))
    ffn = int(pick("intermediate_size", "ffn_hidden_size"))
    qwen1 = cfg.get("model_type") == "qwen"
    if qwen1:  # Qwen1 stores 2x the per-branch MLP width
        ffn //= 2
    model_type = str(cfg.get("model_type", ""))
    return ModelSpec(
        name=name or str(cfg.get("_name_or_path") or path.parent.name or "config.json"),
        hidden_size=hidden,
        num_layers=int(pick("num_hidden_layers", "n_layer", "num_layers")),
        num_heads=heads,
        num_kv_heads=int(pick("num_key_value_heads", "multi_query_group_num", default=heads)),
        intermediate_size=ffn,
        vocab_size=int(pick("vocab_size", "padded_vocab_size")),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        max_context=int(pick("max_position_embeddings", "seq_length", "n_positions", default=4096)),
        head_dim=int(cfg["head_dim"]) if cfg.get("head_dim") else None,
        qkv_bias=bool(cfg.get("attention_bias", qwen1 or model_type.startswith("qwen2"))),
        qk_norm=model_type.startswith("qwen3"),
        logits_upcast=not qwen1,
    )


def get_model(name_or_path: str | Path) -> ModelSpec:
    """A preset by name (case-insensitive), or a config.json / model folder on disk."""
    key = str(name_or_path).lower()
    if key in PRESETS:
        return PRESETS[key]
    path = Path(name_or_path)
    if path.exists():
        return load_config_json(path)
    raise ValueError(f"unknown model {name_or_path!r}; presets: {', '.join(sorted(PRESETS))}")
