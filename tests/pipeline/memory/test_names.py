"""Model and card names as users type them: Hugging Face ids, aliases, "did you mean"."""

from __future__ import annotations

import json

import pytest

from pipeline.memory.cli import main
from pipeline.memory.gpus import resolve_gpu
from pipeline.memory.models import PRESETS
from pipeline.memory.names import resolve_model


@pytest.mark.parametrize(
    ("name", "preset"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
        ("qwen/qwen2.5-7b", "qwen2.5-7b"),
        ("QWEN/QWEN2.5-0.5B-INSTRUCT", "qwen2.5-0.5b"),
        ("Qwen/Qwen3-8B-Base", "qwen3-8b"),
        ("Qwen/Qwen-7B-Chat", "qwen-7b"),
        ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("meta-llama/Meta-Llama-3-8B", "llama-3-8b"),
        ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
        ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "tinyllama-1.1b"),
        ("mistralai/Mistral-7B-Instruct-v0.2", "mistral-7b"),
    ],
)
def test_hugging_face_ids_name_their_preset(name: str, preset: str) -> None:
    model, note = resolve_model(name)
    assert model == PRESETS[preset]
    assert note == f"--model {name} read as preset {preset} (the same structure)"


def test_a_release_with_another_config_is_its_own_variant() -> None:
    # Mistral-7B-v0.3's config.json: vocab_size 32768 (v0.1/v0.2: 32000), the rest as the
    # preset; its embedding and untied head gain 2 x 768 x 4096 parameters
    for name in ("mistralai/Mistral-7B-v0.3", "mistralai/Mistral-7B-Instruct-v0.3"):
        model, note = resolve_model(name)
        assert model.vocab_size == 32768 and model.name == "mistral-7b-v0.3"
        assert (
            model.model_copy(update={"vocab_size": 32000, "name": "mistral-7b"})
            == PRESETS["mistral-7b"]
        )
        assert note is not None and "32768" in note


def test_a_preset_as_such_has_no_note() -> None:
    assert resolve_model("qwen2.5-7b") == (PRESETS["qwen2.5-7b"], None)
    assert resolve_model("Qwen2.5-7B")[0] == PRESETS["qwen2.5-7b"]


@pytest.mark.parametrize(
    ("name", "card", "alias"),
    [
        ("h100", "h100-80g", True),
        ("H100", "h100-80g", True),
        ("a100", "a100-80g", True),
        ("v100", "v100-32g", True),
        ("l40s", "l40s-48g", True),
        ("h200", "h200-141g", True),
        ("4090", "rtx-4090", False),
        ("rtx4090", "rtx-4090", False),
        ("rtx-4090", "rtx-4090", False),
        ("RTX 4090", "rtx-4090", False),
        ("GeForce RTX 4090", "rtx-4090", False),
        ("a10g", "a10g", False),
        ("A100-SXM4-80GB", "a100-80g", False),
        ("a100-40gb", "a100-40g", False),
        ("h100-nvl", "h100-94g", False),
        ("NVIDIA A10", "a10", False),
        ("rtx_3090", "rtx-3090", False),
    ],
)
def test_card_spellings_and_aliases(name: str, card: str, alias: bool) -> None:
    gpu, note = resolve_gpu(name)
    assert gpu.name == card
    assert (note is not None) == alias
    if alias:
        assert "without its memory size is its largest SXM board" in note


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["--model", "Qwen/Qwen2.5-8B-Instruct"],
            "estimate: unknown model 'Qwen/Qwen2.5-8B-Instruct'; did you mean qwen2.5-7b, ",
        ),
        (["--model", "lama-3.1-8b"], "did you mean llama-3.1-8b, "),
        (["--model", "gpt-17"], "estimate: unknown model 'gpt-17'; "),
        (
            ["--model", "qwen2.5-7b", "--gpu", "rtx-9090"],
            "estimate: unknown GPU 'rtx-9090'; did you mean rtx-5090, rtx-4090, rtx-3090?",
        ),
        (["--model", "qwen2.5-7b", "--gpu", "h10"], "did you mean h100, "),
    ],
)
def test_unknown_names_give_one_line_with_the_closest(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and line in err, err


def test_the_output_says_how_a_name_was_read(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "h100", "--method", "lora"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0] == "--model Qwen/Qwen2.5-7B-Instruct read as preset qwen2.5-7b (the same structure)"
    )
    assert out[1].startswith("--gpu h100 read as h100-80g (H100 80 GB): a card named without")
    assert "h100-80g (79.7 GiB" in "\n".join(
        out
    )  # 81,559 MiB = 79.65 GiB, as nvidia-smi reports it
    assert main([*argv, "--json"]) == 0
    names = json.loads(capsys.readouterr().out)["names"]
    assert names == out[:2]
