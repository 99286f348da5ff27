from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from pipeline.memory.cli import add_arguments, run


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    p = argparse.ArgumentParser()
    add_arguments(p)
    rc = run(p.parse_args(argv))
    return rc, capsys.readouterr().out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", "qwen2.5-7b", "--method", "lora", "--seq-len", "2048", "--micro-batch",
            "4", "--gpu", "a100-80g", "--json"]  # fmt: skip
    rc, out = _run(argv, capsys)
    data = json.loads(out)
    assert rc == 0
    assert data["total_gib"] > 14  # at least the bf16 base
    assert set(data["breakdown"]) >= {"weights", "gradients", "optimizer", "activations",
                                      "logits_and_loss", "adapters", "overhead"}  # fmt: skip
    assert data["gpu"]["fits"] is True and data["gpu"]["max_micro_batch"] >= 4
    parts = sum(v["bytes"] for v in data["breakdown"].values())
    assert parts == pytest.approx(data["total_bytes"], abs=16)


def test_every_flag_changes_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--model", "qwen2.5-7b", "--seq-len", "4096", "--json"]
    _, out = _run(base, capsys)
    ref = json.loads(out)["total_gib"]
    for extra in (
        ["--method", "qlora"],
        ["--precision", "fp32"],
        ["--recompute", "none"],
        ["--recompute", "attention"],
        ["--attention", "eager", "--recompute", "none"],
        ["--loss", "chunked"],
        ["--zero", "3", "--dp", "4"],
        ["--tp", "2"],
        ["--pp", "2"],
        ["--lora-rank", "256"],
        ["--lora-targets", "q,v"],
        ["--micro-batch", "2"],
    ):
        _, out = _run(base + extra, capsys)
        assert json.loads(out)["total_gib"] != ref, extra


def test_table_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = _run(["--model", "llama-3.1-8b", "--method", "full", "--gpu", "rtx-4090"], capsys)
    assert rc == 0 and "total (per device)" in out and "does NOT fit" in out
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert run(p.parse_args(["--model", "gpt-17"])) == 2
    assert "unknown model" in capsys.readouterr().err


def test_module_entry_point() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.memory.cli", "--model", "qwen2.5-0.5b", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out)["model"] == "qwen2.5-0.5b"
