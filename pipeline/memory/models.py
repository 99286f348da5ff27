"""Model shapes: presets from published config.json files, or a local config.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


# Families whose MLP is plain (up, activation, down), and their other traits by model_type.
# Falcon-7B's old config.json says "RefinedWebModel", Falcon-40B's "RefinedWeb".
FALCON = ("falcon", "RefinedWeb", "RefinedWebModel")
PLAIN_MLP = {"gpt2", "gpt_bigcode", "gpt_neox", "phi", "bloom", "opt", "mpt", "starcoder2",
             "gptj", "gpt_neo", *FALCON}  # fmt: skip
LAYER_NORM = PLAIN_MLP - {"mpt"}  # LayerNorm with bias; MPT's has no bias with no_bias
ALL_BIASES = {"gpt2", "gpt_bigcode", "gpt_neox", "phi", "bloom", "opt"}
TIED_BY_DEFAULT = {"gpt2", "gpt_bigcode", "bloom", "opt", "mpt", "gemma", "gemma2",
                   "starcoder2", *FALCON}  # fmt: skip
FOUR_NORMS = {"gemma2", "gemma3_text"}  # pre- and post-norms around attention and MLP
QK_NORM = {"qwen3", "qwen3_moe", "olmoe", "olmo2", "gemma3_text"}
FULL_WIDTH_QK_NORM = {"olmoe", "olmo2"}  # q_norm over all heads, k_norm over all kv heads
DEFAULT_4H = {"gpt2", "gpt_bigcode", "bloom", "gpt_neo", "gptj", *FALCON}  # intermediate = 4h


class _Config:
    """A config.json dict read under the key names the families use."""

    def __init__(self, cfg: dict[str, Any], where: str) -> None:
        self.cfg, self.where = cfg, where
        self.type = str(cfg.get("model_type", ""))

    def get(self, *keys: str, default: Any = None) -> Any:
        for k in keys:
            if self.cfg.get(k) is not None:
                return self.cfg[k]
        return default

    def need(self, *keys: str) -> int:
        value = self.get(*keys)
        if value is None:
            raise ValueError(f"{self.where}: config.json lacks {keys[0]!r}")
        return int(value)

    def num(self, *keys: str, default: int = 0) -> int:
        return int(self.get(*keys, default=default))

    def flag(self, key: str, default: bool) -> bool:
        return bool(self.get(key, default=default))


def _unsupported(c: _Config) -> None:
    """Refuse what the counts do not model rather than miscount it."""
    if c.get("kv_lora_rank") is not None:
        raise ValueError(f"{c.where}: multi-head latent attention (kv_lora_rank) not modelled")
    dense_first = c.num("first_k_dense_replace")
    if dense_first or c.get("mlp_only_layers") or c.num("decoder_sparse_step", default=1) > 1:
        raise ValueError(f"{c.where}: MoE with dense layers between sparse ones not modelled")
    opt_proj = c.get("word_embed_proj_dim")
    if opt_proj is not None and opt_proj != c.get("hidden_size"):
        raise ValueError(f"{c.where}: OPT embedding projection (word_embed_proj_dim) not modelled")


def _kv_heads(c: _Config, heads: int) -> int:
    """GQA/MQA: num_key_value_heads and its aliases; multi_query (Falcon-7B, StarCoder) is one
    shared head unless Falcon's new decoder architecture uses num_kv_heads."""
    attn = c.get("attn_config", default={})
    mpt_kv = attn.get("kv_n_heads") if isinstance(attn, dict) else None
    kv = c.get("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
    if c.type in FALCON and not c.flag("new_decoder_architecture", False):
        return 1 if c.flag("multi_query", True) else heads
    if kv is None and mpt_kv is None and c.flag("multi_query", c.type == "gpt_bigcode"):
        return 1
    return int(kv or mpt_kv or heads)


def _mlp_kind(c: _Config) -> str:
    """Gated (SwiGLU, GeGLU) or plain, from an explicit key, a *GLU activation, or the family."""
    kind = str(c.get("mlp_type", "ffn_type", "mlp_class", default="")).lower()
    act = str(c.get("hidden_act", "activation_function", "activation", default="")).lower()
    if "glu" in kind or "gated" in kind or act.endswith("glu"):
        return "gated"
    if kind in ("mlp", "plain", "ffn"):
        return "plain"
    return "plain" if c.type in PLAIN_MLP else "gated"


def _intermediate(c: _Config, hidden: int) -> int:
    """MLP width (one expert's under MoE). Qwen1 stores twice the per-branch width, MPT a ratio."""
    moe = c.get("moe_intermediate_size")
    if moe is not None and (c.get("num_experts", "n_routed_experts") is not None):
        return int(moe)
    ffn = c.get("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim")
    if ffn is not None:
        return int(ffn) // (2 if c.type == "qwen" else 1)
    if c.get("expansion_ratio") is not None:
        return int(float(c.get("expansion_ratio")) * hidden)
    if c.type in DEFAULT_4H:
        return 4 * hidden
    return c.need("intermediate_size")


def _biases(c: _Config) -> dict[str, bool]:
    """Which linears carry biases: all of them in GPT-2-like families (or where `bias`/`use_bias`
    /`enable_bias` says so), q/k/v only in Qwen, attention_bias/mlp_bias in Llama-likes."""
    if c.type in ALL_BIASES:
        every = c.flag("enable_bias", True) and c.flag("attention_bias", True)
    elif c.type in FALCON or c.type in ("internlm2", "starcoder2"):
        every = c.flag("bias", False) or c.flag("use_bias", c.type == "starcoder2")
    elif c.type == "mpt":
        every = not c.flag("no_bias", False)
    else:
        attn = c.flag("attention_bias", c.type in ("qwen", "qwen2", "qwen2_moe"))
        qwen = c.type in ("qwen", "qwen2", "qwen2_moe") and "attention_bias" not in c.cfg
        return dict(qkv_bias=attn, attn_out_bias=attn and not qwen,
                    mlp_bias=c.flag("mlp_bias", False))  # fmt: skip
    return dict(qkv_bias=every, attn_out_bias=every, mlp_bias=every)


def _norms(c: _Config) -> dict[str, object]:
    """Norm kind, norms per layer and whether attention and MLP run in parallel."""
    if c.type in FALCON:
        parallel = c.flag("parallel_attn", True)
        new = c.flag("new_decoder_architecture", False)
        n = c.num("num_ln_in_parallel_attn", default=2 if new else 1) if parallel else 2
    else:
        parallel = c.type in ("phi", "gptj") or (
            c.type == "gpt_neox" and c.flag("use_parallel_residual", True)
        )
        n = 4 if c.type in FOUR_NORMS else 1 if c.type in ("phi", "gptj") else 2
    kind = "layer" if c.type in LAYER_NORM else "rms"
    if c.type == "mpt":
        kind = "layer_nobias" if c.flag("no_bias", False) else "layer"
    if c.type == "olmo":
        kind = "nonparametric"
    return dict(norm=kind, norms_per_layer=n, parallel_block=parallel)


def _moe(c: _Config) -> dict[str, object]:
    """Routed experts (num_local_experts / num_experts / n_routed_experts), experts per token,
    shared experts (Qwen2-MoE's shared_expert_intermediate_size, DeepSeek's n_shared_experts)."""
    experts = c.num("num_local_experts", "num_experts", "n_routed_experts")
    if experts <= 1:
        return {}
    shared = c.num("shared_expert_intermediate_size")
    if c.get("n_shared_experts"):
        shared = c.num("n_shared_experts") * c.num("moe_intermediate_size")
    return dict(
        num_experts=experts,
        experts_per_token=c.num("num_experts_per_tok", "moe_top_k", default=2),
        shared_expert_size=shared,
        shared_expert_gate=c.type == "qwen2_moe" and shared > 0,
    )


def _embeddings(c: _Config) -> dict[str, object]:
    """Tied head (tie_word_embeddings, else the family's default), learned position tables
    (GPT-2, StarCoder: n_positions rows; OPT: max_position_embeddings + 2), BLOOM's embedding
    norm, Phi-2's lm_head bias."""
    positions = 0
    if c.type in ("gpt2", "gpt_bigcode", "gpt_neo"):
        positions = c.need("n_positions", "max_position_embeddings")
    elif c.type == "opt":
        positions = c.need("max_position_embeddings") + 2  # OPTLearnedPositionalEmbedding
    tied = c.type == "mpt" or c.flag("tie_word_embeddings", c.type in TIED_BY_DEFAULT)
    return dict(
        tie_embeddings=tied,
        position_embeddings=positions,
        embedding_norm=c.type == "bloom",
        lm_head_bias=c.type == "phi",
    )


def spec_from_config(cfg: dict[str, Any], name: str, where: str = "config.json") -> ModelSpec:
    """The model structure a Hugging Face config.json describes (the families above)."""
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrappers keep the LM there
        cfg = cfg["text_config"]
    c = _Config(cfg, where)
    _unsupported(c)
    hidden = c.need("hidden_size", "n_embd", "n_embed", "d_model")
    heads = c.need("num_attention_heads", "n_head", "n_heads", "num_heads")
    window = c.get("sliding_window") if c.flag("use_sliding_window", True) else None
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        num_layers=c.need("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
        num_heads=heads,
        num_kv_heads=_kv_heads(c, heads),
        intermediate_size=_intermediate(c, hidden),
        vocab_size=c.need("vocab_size", "padded_vocab_size"),
        max_context=c.num(
            "max_position_embeddings", "seq_length", "n_positions", "max_seq_len", default=4096
        ),  # fmt: skip
        head_dim=c.num("head_dim", "kv_channels") or None,
        qk_norm=c.type in QK_NORM,
        qk_norm_per_head=c.type not in FULL_WIDTH_QK_NORM,
        logits_upcast=c.type != "qwen",
        mlp=_mlp_kind(c),
        sliding_window=int(window) if window else None,
        **_biases(c),
        **_norms(c),
        **_moe(c),
        **_embeddings(c),
    )


def load_config_json(path: str | Path, name: str | None = None) -> ModelSpec:
    """Read a Hugging Face config.json (a file, or the model folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read model config: {exc}") from exc
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: config.json is not an object")
    default = str(cfg.get("_name_or_path") or path.parent.name or "config.json")
    return spec_from_config(cfg, name or default, str(path))


def get_model(name_or_path: str | Path) -> ModelSpec:
    """A preset by name (case-insensitive), or a config.json / model folder on disk."""
    key = str(name_or_path).lower()
    if key in PRESETS:
        return PRESETS[key]
    path = Path(name_or_path)
    if path.exists():
        return load_config_json(path)
    raise ValueError(f"unknown model {name_or_path!r}; presets: {', '.join(sorted(PRESETS))}")
