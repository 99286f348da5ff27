"""config.json values of published models, copied by hand (only the keys that shape the model),
with each model's published parameter count. No file is downloaded: each entry cites the
config.json it copies and the source of its count ("safetensors": the total the Hugging Face
model page shows from the safetensors metadata)."""

from __future__ import annotations

from typing import Any, NamedTuple

HF = "https://huggingface.co/{}/blob/main/config.json"


class Published(NamedTuple):
    repo: str  # Hugging Face repository; its config.json is HF.format(repo)
    config: dict[str, Any]
    total: float  # published parameter count
    source: str  # where the count is published
    active: float | None = None  # MoE: parameters active per token


def _llama(h: int, n: int, heads: int, kv: int, ffn: int, vocab: int, **kw: Any) -> dict[str, Any]:
    return dict(model_type="llama", hidden_size=h, num_hidden_layers=n, num_attention_heads=heads,
                num_key_value_heads=kv, intermediate_size=ffn, vocab_size=vocab,
                hidden_act="silu", **{"tie_word_embeddings": False, **kw})  # fmt: skip


def _qwen2(h: int, n: int, heads: int, kv: int, ffn: int, vocab: int, tied: bool) -> dict[str, Any]:
    return dict(model_type="qwen2", hidden_size=h, num_hidden_layers=n, num_attention_heads=heads,
                num_key_value_heads=kv, intermediate_size=ffn, vocab_size=vocab,
                tie_word_embeddings=tied, hidden_act="silu", use_sliding_window=False,
                sliding_window=32768, max_position_embeddings=32768)  # fmt: skip


def _gemma(kind: str, h: int, n: int, heads: int, kv: int, ffn: int, **kw: Any) -> dict[str, Any]:
    return dict(model_type=kind, hidden_size=h, num_hidden_layers=n, num_attention_heads=heads,
                num_key_value_heads=kv, head_dim=kw.pop("head_dim", 256), intermediate_size=ffn,
                vocab_size=256000, hidden_act="gelu_pytorch_tanh", **kw)  # fmt: skip


def _gpt2(h: int, n: int, heads: int) -> dict[str, Any]:
    return dict(model_type="gpt2", n_embd=h, n_layer=n, n_head=heads, n_positions=1024,
                n_inner=None, vocab_size=50257, activation_function="gelu_new")  # fmt: skip


def _neox(h: int, n: int, heads: int, ffn: int, vocab: int) -> dict[str, Any]:
    return dict(model_type="gpt_neox", hidden_size=h, num_hidden_layers=n,
                num_attention_heads=heads,
                intermediate_size=ffn, vocab_size=vocab, hidden_act="gelu", rotary_pct=0.25,
                use_parallel_residual=True, tie_word_embeddings=False,
                max_position_embeddings=2048)  # fmt: skip


QWEN_CARD = "model card, 'Number of Parameters'"
PYTHIA = "Pythia README (github.com/EleutherAI/pythia), table of models, 'Params'"
PUBLISHED: list[Published] = [
    Published(
        "meta-llama/Llama-2-7b-hf", _llama(4096, 32, 32, 32, 11008, 32000), 6.74e9, "safetensors"
    ),
    Published(
        "meta-llama/Llama-2-13b-hf", _llama(5120, 40, 40, 40, 13824, 32000), 13.0e9, "safetensors"
    ),
    Published(
        "meta-llama/Llama-2-70b-hf", _llama(8192, 80, 64, 8, 28672, 32000), 69.0e9, "safetensors"
    ),
    Published(
        "meta-llama/Meta-Llama-3-8B", _llama(4096, 32, 32, 8, 14336, 128256), 8.03e9, "safetensors"
    ),
    Published(
        "meta-llama/Meta-Llama-3-70B", _llama(8192, 80, 64, 8, 28672, 128256), 70.6e9, "safetensors"
    ),
    Published(
        "meta-llama/Llama-3.1-405B",
        _llama(16384, 126, 128, 8, 53248, 128256),
        405e9,
        "model card, 'Params' column",
    ),
    Published(
        "meta-llama/Llama-3.2-1B",
        _llama(2048, 16, 32, 8, 8192, 128256, head_dim=64, tie_word_embeddings=True),
        1.24e9,
        "safetensors; model card 'Params' 1.23B",
    ),
    Published(
        "meta-llama/Llama-3.2-3B",
        _llama(3072, 28, 24, 8, 8192, 128256, head_dim=128, tie_word_embeddings=True),
        3.21e9,
        "safetensors; model card 'Params' 3.21B",
    ),
    Published(
        "mistralai/Mistral-7B-v0.1",
        {**_llama(4096, 32, 32, 8, 14336, 32000), "model_type": "mistral", "sliding_window": 4096},
        7.24e9,
        "safetensors",
    ),
    Published(
        "mistralai/Mixtral-8x7B-v0.1",
        {
            **_llama(4096, 32, 32, 8, 14336, 32000),
            "model_type": "mixtral",
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
        },
        46.7e9,
        "mistral.ai/news/mixtral-of-experts: '46.7B total parameters but only "
        "uses 12.9B parameters per token'",
        active=12.9e9,
    ),
    Published(
        "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T",
        _llama(2048, 22, 32, 4, 5632, 32000),
        1.1e9,
        "model card, '1.1B parameters'",
    ),
    Published(
        "deepseek-ai/deepseek-coder-6.7b-base",
        _llama(4096, 32, 32, 32, 11008, 32256),
        6.7e9,
        "model card, '6.7B'",
    ),
    Published("01-ai/Yi-6B", _llama(4096, 32, 32, 4, 11008, 64000), 6.06e9, "safetensors"),
    Published("Qwen/Qwen2.5-0.5B", _qwen2(896, 24, 14, 2, 4864, 151936, True), 0.49e9, QWEN_CARD),
    Published("Qwen/Qwen2.5-1.5B", _qwen2(1536, 28, 12, 2, 8960, 151936, True), 1.54e9, QWEN_CARD),
    Published("Qwen/Qwen2.5-3B", _qwen2(2048, 36, 16, 2, 11008, 151936, True), 3.09e9, QWEN_CARD),
    Published("Qwen/Qwen2.5-7B", _qwen2(3584, 28, 28, 4, 18944, 152064, False), 7.61e9, QWEN_CARD),
    Published("Qwen/Qwen2.5-14B", _qwen2(5120, 48, 40, 8, 13824, 152064, False), 14.7e9, QWEN_CARD),
    Published("Qwen/Qwen2.5-32B", _qwen2(5120, 64, 40, 8, 27648, 152064, False), 32.5e9, QWEN_CARD),
    Published("Qwen/Qwen2.5-72B", _qwen2(8192, 80, 64, 8, 29568, 152064, False), 72.7e9, QWEN_CARD),
    Published(
        "Qwen/Qwen3-8B",
        {
            **_qwen2(4096, 36, 32, 8, 12288, 151936, False),
            "model_type": "qwen3",
            "head_dim": 128,
            "attention_bias": False,
        },
        8.2e9,
        QWEN_CARD,
    ),
    Published(
        "Qwen/Qwen1.5-MoE-A2.7B",
        {
            **_qwen2(2048, 24, 16, 16, 5632, 151936, False),
            "model_type": "qwen2_moe",
            "moe_intermediate_size": 1408,
            "num_experts": 60,
            "num_experts_per_tok": 4,
            "shared_expert_intermediate_size": 5632,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
        },
        14.3e9,
        "model card: '14.3B parameters in total and 2.7B activated parameters'",
        active=2.7e9,
    ),
    Published("google/gemma-2b", _gemma("gemma", 2048, 18, 8, 1, 16384), 2.51e9, "safetensors"),
    Published("google/gemma-7b", _gemma("gemma", 3072, 28, 16, 16, 24576), 8.54e9, "safetensors"),
    Published(
        "google/gemma-2-2b",
        _gemma("gemma2", 2304, 26, 8, 4, 9216, sliding_window=4096),
        2.61e9,
        "safetensors",
    ),
    Published(
        "google/gemma-2-9b",
        _gemma("gemma2", 3584, 42, 16, 8, 14336, sliding_window=4096),
        9.24e9,
        "safetensors",
    ),
    Published(
        "google/gemma-2-27b",
        _gemma("gemma2", 4608, 46, 32, 16, 36864, head_dim=128, sliding_window=4096),
        27.2e9,
        "safetensors",
    ),
    Published(
        "microsoft/phi-2",
        dict(
            model_type="phi",
            hidden_size=2560,
            num_hidden_layers=32,
            num_attention_heads=32,
            intermediate_size=10240,
            vocab_size=51200,
            hidden_act="gelu_new",
            partial_rotary_factor=0.4,
            tie_word_embeddings=False,
        ),
        2.78e9,
        "safetensors",
    ),
    Published(
        "microsoft/Phi-3-mini-4k-instruct",
        dict(
            model_type="phi3",
            hidden_size=3072,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=32,
            intermediate_size=8192,
            vocab_size=32064,
            hidden_act="silu",
            sliding_window=2047,
            tie_word_embeddings=False,
        ),
        3.82e9,
        "safetensors",
    ),
    Published(
        "tiiuae/falcon-7b",
        dict(
            model_type="falcon",
            hidden_size=4544,
            num_hidden_layers=32,
            num_attention_heads=71,
            multi_query=True,
            new_decoder_architecture=False,
            parallel_attn=True,
            bias=False,
            alibi=False,
            vocab_size=65024,
        ),
        6.92e9,
        "safetensors",
    ),
    Published(
        "openai-community/gpt2",
        _gpt2(768, 12, 12),
        124e6,
        "github.com/karpathy/nanoGPT README, 'gpt2 124M'",
    ),
    Published(
        "openai-community/gpt2-xl",
        _gpt2(1600, 48, 25),
        1558e6,
        "github.com/karpathy/nanoGPT README, 'gpt2-xl 1558M'",
    ),
    Published("EleutherAI/pythia-1b", _neox(2048, 16, 8, 8192, 50304), 1_011_781_632, PYTHIA),
    Published("EleutherAI/pythia-6.9b", _neox(4096, 32, 32, 16384, 50432), 6_857_302_016, PYTHIA),
    Published(
        "bigscience/bloom-560m",
        dict(model_type="bloom", hidden_size=1024, n_layer=24, n_head=16, vocab_size=250880),
        559_214_592,
        "model card, 'Parameters'",
    ),
    Published(
        "bigcode/starcoder2-3b",
        dict(
            model_type="starcoder2",
            hidden_size=3072,
            num_hidden_layers=30,
            num_attention_heads=24,
            num_key_value_heads=2,
            intermediate_size=12288,
            vocab_size=49152,
            use_bias=True,
            sliding_window=4096,
            hidden_act="gelu_pytorch_tanh",
            max_position_embeddings=16384,
            tie_word_embeddings=True,
        ),
        3.03e9,
        "safetensors",
    ),
    Published(
        "bigcode/starcoder",
        dict(
            model_type="gpt_bigcode",
            n_embd=6144,
            n_layer=40,
            n_head=48,
            n_inner=24576,
            n_positions=8192,
            vocab_size=49152,
            multi_query=True,
        ),
        15.5e9,
        "model card, '15.5B parameter models'",
    ),
    Published(
        "mosaicml/mpt-7b",
        dict(
            model_type="mpt",
            d_model=4096,
            n_layers=32,
            n_heads=32,
            expansion_ratio=4,
            max_seq_len=2048,
            vocab_size=50432,
            no_bias=True,
            attn_config={"alibi": True, "attn_type": "multihead_attention"},
        ),
        6.7e9,
        "model card, hyperparameter table, 'n_parameters 6.7B'",
    ),
    Published(
        "allenai/OLMo-7B-hf",
        dict(
            model_type="olmo",
            hidden_size=4096,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=32,
            intermediate_size=11008,
            vocab_size=50304,
            hidden_act="silu",
            tie_word_embeddings=False,
        ),
        6.89e9,
        "safetensors",
    ),
    Published(
        "allenai/OLMoE-1B-7B-0924",
        dict(
            model_type="olmoe",
            hidden_size=2048,
            num_hidden_layers=16,
            num_attention_heads=16,
            num_key_value_heads=16,
            intermediate_size=1024,
            num_experts=64,
            num_experts_per_tok=8,
            vocab_size=50304,
            hidden_act="silu",
            tie_word_embeddings=False,
        ),
        6.92e9,
        "safetensors",
    ),
]
