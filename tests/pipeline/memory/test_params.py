"""Parameter counts against published model sizes, and the structure read from config.json."""

from __future__ import annotations

import pytest

from pipeline.memory.activations import layer_backward_working_bytes, layer_saved_tensors
from pipeline.memory.adapters import lora_params_per_layer
from pipeline.memory.models import PRESETS, get_model, spec_from_config
from pipeline.memory.params import linear_shapes, param_counts
from schemas.memory import ALL_LINEAR, TrainingSetup

from .published_configs import PUBLISHED

QWEN7 = get_model("qwen2.5-7b")
SPECS = {p.repo: spec_from_config(p.config, p.repo) for p in PUBLISHED}


def test_param_counts_match_published_sizes() -> None:
    # Published totals: Qwen2.5-7B 7.62 B, Llama-3.1-8B 8.03 B, Llama-2-7B 6.74 B.
    assert param_counts(QWEN7).total == pytest.approx(7.6156e9, rel=1e-3)
    assert param_counts(get_model("llama-3.1-8b")).total == pytest.approx(8.0303e9, rel=1e-3)
    assert param_counts(get_model("llama-2-7b")).total == pytest.approx(6.7384e9, rel=1e-3)


def test_at_least_thirty_published_configs_of_many_families() -> None:
    assert len(PUBLISHED) >= 30
    assert len({p.config["model_type"] for p in PUBLISHED}) >= 15


@pytest.mark.parametrize("pub", PUBLISHED, ids=lambda p: p.repo)
def test_count_within_one_percent_of_the_published_count(pub) -> None:  # noqa: ANN001
    pc = param_counts(SPECS[pub.repo])
    assert pc.total == pytest.approx(pub.total, rel=0.01), pub.source
    if pub.active is not None:
        assert pc.active == pytest.approx(pub.active, rel=0.01), pub.source
    elif not SPECS[pub.repo].num_experts:
        assert pc.active == pc.total


def test_catalog_counts_unchanged_by_the_config_reader() -> None:
    """The presets and the published configs of the same models give the same counts."""
    for preset, repo in (("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B"), ("qwen2.5-72b", "Qwen/Qwen2.5-72B"),
                         ("llama-2-70b", "meta-llama/Llama-2-70b-hf"),
                         ("llama-3.2-3b", "meta-llama/Llama-3.2-3B"),
                         ("mistral-7b", "mistralai/Mistral-7B-v0.1"),
                         ("qwen3-8b", "Qwen/Qwen3-8B")):  # fmt: skip
        assert param_counts(SPECS[repo]) == param_counts(PRESETS[preset]), preset


def test_falcon_7b_plain_mlp_multi_query_parallel_block_by_hand() -> None:
    f = SPECS["tiiuae/falcon-7b"]
    assert (f.mlp, f.num_kv_heads, f.d_head, f.intermediate_size) == ("plain", 1, 64, 4 * 4544)
    assert f.parallel_block and f.norms_per_layer == 1 and f.norm == "layer" and f.tie_embeddings
    assert "gate_proj" not in linear_shapes(f)
    # query_key_value 4544 x (4544 + 2 x 64), dense 4544^2, h->4h and 4h->h, one LayerNorm
    layer = 4544 * 4672 + 4544**2 + 2 * 4544 * 18176 + 2 * 4544
    assert param_counts(f).per_layer == layer == 207_070_080
    # 32 layers + tied embedding 65024 x 4544 + ln_f: 6.92 B, not the 9.56 B of a gated MLP
    assert param_counts(f).total == 32 * layer + 65024 * 4544 + 2 * 4544 == 6_921_720_704


def test_phi2_biases_and_lm_head_bias_by_hand() -> None:
    p = SPECS["microsoft/phi-2"]
    assert p.mlp == "plain" and p.parallel_block and p.lm_head_bias and not p.tie_embeddings
    h, f, v = 2560, 10240, 51200
    layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 2 * h  # q,k,v,dense; fc1, fc2; one LN
    assert param_counts(p).per_layer == layer
    assert param_counts(p).lm_head == v * h + v


def test_gemma_head_dim_tied_vocabulary_and_gemma2_norms() -> None:
    g = SPECS["google/gemma-7b"]
    assert g.d_head == 256 != g.hidden_size // g.num_heads and g.tie_embeddings
    assert g.mlp == "gated" and param_counts(g).lm_head == 0
    assert linear_shapes(g)["q_proj"] == (3072, 16 * 256)
    g2 = SPECS["google/gemma-2-9b"]
    assert g2.norms_per_layer == 4 and g2.sliding_window == 4096
    assert SPECS["mistralai/Mistral-7B-v0.1"].sliding_window == 4096
    assert SPECS["Qwen/Qwen2.5-7B"].sliding_window is None  # use_sliding_window: false


def test_moe_total_active_router_and_shared_expert_by_hand() -> None:
    mx = SPECS["mistralai/Mixtral-8x7B-v0.1"]
    assert (mx.num_experts, mx.experts_per_token, mx.mlp_width_per_token) == (8, 2, 2 * 14336)
    attn, expert, router = 4096 * (4096 + 1024 + 1024 + 4096), 3 * 4096 * 14336, 4096 * 8
    pc = param_counts(mx)
    assert pc.per_layer == attn + 8 * expert + router + 2 * 4096
    assert pc.total - pc.active == 32 * 6 * expert
    q = SPECS["Qwen/Qwen1.5-MoE-A2.7B"]
    assert (q.intermediate_size, q.shared_expert_size, q.shared_expert_gate) == (1408, 5632, True)
    assert q.mlp_width_per_token == 4 * 1408 + 5632
    qkv_bias = 3 * 2048
    layer = 4 * 2048**2 + qkv_bias + 60 * 3 * 2048 * 1408 + 3 * 2048 * 5632 + 2048 * 61 + 2 * 2048
    assert param_counts(q).per_layer == layer
    # OLMoE paper (arXiv 2409.02060), Table 1: 1.3B active, a figure rounded to 0.1 B
    olmoe = param_counts(SPECS["allenai/OLMoE-1B-7B-0924"])
    assert 1.25e9 <= olmoe.active < 1.35e9
    assert olmoe.active == olmoe.embedding * 2 + 2048 + 16 * (
        olmoe.per_layer - 56 * 3 * 2048 * 1024
    )


def test_lora_counts_every_expert_and_skips_a_missing_gate() -> None:
    mx = SPECS["mistralai/Mixtral-8x7B-v0.1"]
    attn = 16 * ((4096 + 4096) + 2 * (4096 + 1024) + (4096 + 4096))
    assert lora_params_per_layer(mx, 16, ALL_LINEAR) == attn + 8 * 3 * 16 * (4096 + 14336)
    f = SPECS["tiiuae/falcon-7b"]
    attn_f = 16 * ((4544 + 4544) + 2 * (4544 + 64) + (4544 + 4544))
    assert lora_params_per_layer(f, 16, ALL_LINEAR) == attn_f + 16 * 2 * (4544 + 18176)


def test_plain_mlp_and_shared_norm_activations_by_hand() -> None:
    f = SPECS["tiiuae/falcon-7b"]
    s = TrainingSetup(method="full", seq_len=1024, recompute="none")
    # backward of one layer: the up output's gradient only (bf16), not gate's and up's
    assert layer_backward_working_bytes(f, s) == 1024 * 1 * 2.0 * 18176
    saved = {t.name: t.bytes_per_token for t in layer_saved_tensors(f, s)}
    assert saved["gate_up_silu"] == 2.0 * 18176  # the activation's input, not 3 x width
    assert "mlp_norm_fp32_in" not in saved and "gate_up_in" not in saved  # one shared norm
    assert saved["qkv_in"] == 2.0 * 4544
    llama = {t.name: t.bytes_per_token for t in layer_saved_tensors(get_model("llama-2-7b"), s)}
    assert llama["gate_up_silu"] == 3 * 2.0 * 11008


def test_unmodelled_structures_are_refused() -> None:
    base = dict(model_type="deepseek_v2", hidden_size=2048, num_hidden_layers=27,
                num_attention_heads=16, intermediate_size=10944, vocab_size=102400)  # fmt: skip
    with pytest.raises(ValueError, match="latent attention"):
        spec_from_config({**base, "kv_lora_rank": 512}, "dsv2")
    with pytest.raises(ValueError, match="dense layers"):
        spec_from_config({**base, "n_routed_experts": 64, "first_k_dense_replace": 1}, "dsv2")
