from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.memory.cli import add_arguments, run
from pipeline.memory.gpus import GPUS
from schemas.memory import HEADLINE_BIAS


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
                                      "logits_and_loss", "adapters", "buffers",
                                      "allocator_reserve", "context"}  # fmt: skip
    assert data["gpu"]["fits"] is True and data["gpu"]["max_micro_batch"] >= 4
    parts = sum(v["bytes"] for v in data["breakdown"].values())
    assert parts == pytest.approx(data["total_bytes"], abs=16)
    assert data["device_gib"] == pytest.approx(data["total_bytes"] / 2**30, abs=1e-3)


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
        ["--compile-loss"],
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
    assert rc == 0 and "PEAK (reserved, per device)" in out and "does NOT fit" in out
    assert "device total" in out and "safety bias" in out
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


def _err(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    p = argparse.ArgumentParser()
    add_arguments(p)
    try:
        rc = run(p.parse_args(argv))
    except SystemExit as exc:
        rc = int(exc.code or 0)
    return rc, capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--seq-len", "0"], "--seq-len 0: must be greater than 0"),
        (["--micro-batch", "-2"], "--micro-batch -2: must be greater than 0"),
        (["--precision", "bf17"], "argument --precision: invalid choice: 'bf17'"),
        (["--seq-len", "long"], "argument --seq-len: invalid int value: 'long'"),
        (["--gpu", "rtx-9090"], "unknown GPU 'rtx-9090'"),
        (["--gpu-mem", "-4"], "--gpu-mem must be positive"),
        (["--headroom", "1.5"], "--headroom must be in [0, 1)"),
        (["--compile-loss=yes"], "argument --compile-loss: ignored explicit argument 'yes'"),
        (["--deepspeed=on"], "argument --deepspeed: ignored explicit argument 'on'"),
        (["--reduce-bucket-size", "0"], "--reduce-bucket-size 0.0: must be greater than 0"),
    ],
)
def test_bad_values_give_one_line_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, err = _err(["--model", "llama-3.1-8b", *argv], capsys)
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("estimate: ") and flag in err, err
    assert "pydantic" not in err and "http" not in err and "usage" not in err


def test_spellings_and_custom_memory(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--model", "llama-3.1-8b", "--json"]
    _, a = _run([*base, "--precision", "bf16-mixed", "--gpu", "rtx_3090"], capsys)
    _, b = _run([*base, "--precision", "BF16_MIXED", "--gpu", "RTX-3090"], capsys)
    assert json.loads(a) == json.loads(b)
    assert json.loads(a)["gpu"]["name"] == "rtx-3090"
    for card in ("a10", "a10g", "l4", "v100-32g", "a800-80g", "h800-80g", "mi300x"):
        rc, _ = _run([*base, "--gpu", card], capsys)
        assert rc == 0, card
    _, c = _run([*base, "--gpu-mem", "24"], capsys)
    assert json.loads(c)["gpu"]["memory_gib"] == 24.0


def test_measure_and_one_activations_figure(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--model", "qwen2.5-7b", "--seq-len", "4096", "--json", "--variable-length"]
    _, a = _run([*base, "--measure", "allocated"], capsys)
    _, r = _run(base, capsys)
    alloc, res = json.loads(a), json.loads(r)
    assert res["measure"] == "reserved"  # the default: what runs out first
    assert alloc["expected_gib"] == alloc["allocated_gib"] < res["expected_gib"]
    assert res["expected_gib"] == res["reserved_gib"] < res["plan_with_gib"]
    # the headline (total_gib) is the --measure figure lifted by the calibrated safety bias
    for d in (alloc, res):
        assert d["total_gib"] == pytest.approx(d["expected_gib"] * (1 + HEADLINE_BIAS), abs=2e-3)
    assert res["device_gib"] > res["reserved_gib"]
    assert "components_gib" not in res
    assert json.dumps(res).count('"activations"') == 1


def test_does_not_fit_names_the_term_and_the_cheapest_fixes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Qwen2.5-7B QLoRA at 8k tokens on a 28 GiB card: the fp32 loss spike over a 152k
    # vocabulary (8192 x 152064 x 12 B = 13.9 GiB) dominates; chunking the loss is the cheapest
    # fix.
    argv = ["--model", "qwen2.5-7b", "--method", "qlora", "--seq-len", "8192", "--gpu-mem", "28"]
    rc, out = _run(argv, capsys)
    assert rc == 0
    assert "does NOT fit" in out and "Largest term: logits_and_loss (13.92 GiB)" in out
    same = out.split("same method, same cards:")[1].splitlines()
    # the user's order: a shorter sequence (8192 halved) first, then the chunked loss
    assert same[1].strip().startswith("--seq-len 4096") and same[1].endswith("fits")
    assert same[2].strip().startswith("--loss chunked") and same[2].endswith("fits")
    rc, js = _run([*argv, "--json"], capsys)
    advice = json.loads(js)["advice"]
    assert advice["dominant_term"] == "logits_and_loss"
    assert all(c["plan_with_gib"] <= 0.85 * 28 for c in advice["proposals"] if c["fits"])
    assert any(not c["fits"] for c in advice["proposals"])  # shown, with its figures
    # nothing fits at all: said plainly, with the cards that would
    rc, out = _run(["--model", "llama-3.1-70b", "--method", "full", "--gpu", "rtx-4090"], capsys)
    assert "does NOT fit" in out and "Not even micro-batch 1 fits." in out
    assert "Largest term: optimizer" in out


def test_compile_loss_and_deepspeed_set_the_loss(capsys: pytest.CaptureFixture[str]) -> None:
    # Qwen-7B (Qwen1 remote code, no logits upcast), 4,096 tokens x 151,936 vocabulary
    base = ["--model", "qwen-7b", "--seq-len", "4096", "--json"]

    def loss(extra: list[str]) -> int:
        _, out = _run(base + extra, capsys)
        return json.loads(out)["breakdown"]["logits_and_loss"]["bytes"]

    logits = 4096 * 151936
    assert loss([]) == logits * 12  # HF Trainer's autocast runs the loss in fp32
    assert loss(["--deepspeed"]) == logits * 6  # DeepSpeed: no autocast, bf16 loss
    assert loss(["--compile-loss"]) == logits * 4  # bf16 logits kept + their gradient


def test_deepspeed_bucket_flags_size_the_gradient_buckets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Qwen1's finetune/ds_config_zero2.json on one GPU: reduce_bucket_size 2e8 and overlap_comm,
    # two 16-bit buckets = 0.8 GB; DeepSpeed's defaults: one bucket of 5e8 = 1.0 GB
    base = ["--model", "qwen-7b", "--method", "lora", "--seq-len", "512", "--json"]
    base += ["--deepspeed", "--zero", "2"]

    def buffers(extra: list[str]) -> int:
        _, out = _run(base + extra, capsys)
        return json.loads(out)["breakdown"]["buffers"]["bytes"]

    assert buffers([]) == int(5e8 * 2)
    assert buffers(["--reduce-bucket-size", "2e8", "--overlap-comm"]) == int(2 * 2e8 * 2)


def test_no_reentrant_frees_the_layer_inputs_fsdp1_holds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Llama-2-70B LoRA on 2 GPUs under FSDP, 2 x 4096 tokens: with HF's reentrant checkpointing
    # FSDP1 holds every layer's 16-bit input until backward ends, at the layer-backward phase:
    # 80 layers x 8192 tokens x 8192 hidden x 2 B = 10 GiB more activations
    base = ["--model", "llama-2-70b", "--method", "lora", "--seq-len", "4096", "--json"]
    base += ["--micro-batch", "2", "--fsdp", "--dp", "2", "--recompute", "full"]

    def activations(extra: list[str]) -> int:
        _, out = _run(base + extra, capsys)
        return json.loads(out)["breakdown"]["activations"]["bytes"]

    assert activations([]) - activations(["--no-reentrant"]) == 80 * 8192 * 8192 * 2


def test_advice_keeps_full_fine_tuning_on_the_card_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Qwen2.5-7B full FT, 4 x 2048 tokens on one A100 80 GB (budget 0.85 x 80 = 68 GiB): Adam's
    # fp32 master, m and v (12 B x 7.62 B params = 85.1 GiB) alone exceed the card. Before LoRA
    # come the fixes that keep full FT: pure bf16 with 8-bit AdamW (2 + 2 + 2 B per param =
    # 3 x 14.19 GiB of weights, gradients and states) and optimizer offload (the GPU keeps
    # 2 x 14.19 GiB of weights and gradients).
    argv = ["--model", "qwen2.5-7b", "--method", "full", "--seq-len", "2048", "--micro-batch",
            "4", "--gpu", "a100-80g", "--json"]  # fmt: skip
    _, out = _run(argv, capsys)
    rows = json.loads(out)["advice"]["proposals"]
    groups = [r["group"] for r in rows]
    assert groups == sorted(groups, key=["same method, same cards", "another method",
                                         "more GPUs"].index)  # fmt: skip
    first = rows[0]
    assert first["group"] == "same method, same cards" and first["fits"]
    assert "--method" not in first["change"]
    by = {r["change"].split(" (")[0]: r for r in rows}
    weights = 7_615_616_512 * 2 / 2**30  # 14.19 GiB of bf16 weights (as many of gradients)
    eight_bit = by["--precision bf16 --optimizer adamw_8bit"]
    assert 3 * weights < eight_bit["expected_gib"] < 68 and eight_bit["fits"]
    offload = by["--offload optimizer"]
    assert 2 * weights < offload["expected_gib"] < 3 * weights and offload["fits"]
    changes = [r["change"] for r in rows]
    assert changes.index(offload["change"]) < changes.index("--method lora")
    assert rows[-1]["change"].startswith("--zero 3 --dp 4")  # 2 GPUs: 85.1 / 2 > 68 GiB


def test_advice_seq_len_at_the_stage_quantiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a stage whose p99 is 16,384 tokens and p95 16,000: the sequence is cut to the stage's
    # quantiles rounded up to 128 (p95: 16,000; p90: 15,000 -> 15,104), not halved
    plan = tmp_path / "plan.json"
    stats = {"p50": 9000, "p90": 15000, "p95": 16000, "p99": 16384, "max": 20000}
    plan.write_text(json.dumps({"stages": [{"name": "long", "stats": stats}]}))
    argv = ["--model", "qwen2.5-7b", "--method", "qlora", "--seq-len", "16384", "--gpu", "l4",
            "--stack", "torchtune", "--plan", str(plan), "--json"]  # fmt: skip
    _, out = _run(argv, capsys)
    rows = json.loads(out)["advice"]["proposals"]
    seq = [r for r in rows if r["change"].startswith("--seq-len")]
    assert seq[0]["change"].startswith("--seq-len 9088 (the stage's p50")  # none fits: furthest
    together = next(r for r in rows if r["change"].endswith("(together)"))
    # together: the fewest changes (each step the one that lowers the plan-with figure most);
    # dropping the 27.8 GiB loss spike and moving the stored activations off keeps all tokens
    assert together["change"] == "--loss fused --activation-offload (together)"
    assert together["fits"] and together["plan_with_gib"] <= 0.85 * GPUS["l4"].memory_gib
    rc, err = _err([*argv[:-3], "--plan", str(plan), "--stage", "lng"], capsys)
    assert rc == 2 and "unknown stage 'lng'; did you mean long?" in err
    assert err.count("\n") == 1


def test_cards_that_fit_are_one_list_in_text_and_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (
        ["--model", "qwen2.5-7b", "--method", "qlora", "--seq-len", "8192", "--gpu", "l4"],
        ["--model", "llama-3.1-8b", "--method", "full", "--gpu", "rtx-4090"],
        ["--model", "qwen2.5-14b", "--method", "lora", "--seq-len", "4096", "--gpu", "a10g"],
    ):
        _, text = _run(argv, capsys)
        _, js = _run([*argv, "--json"], capsys)
        listed = json.loads(js)["advice"]["cards_that_fit"]
        line = next(ln for ln in text.splitlines() if ln.startswith("Cards that fit it as is: "))
        shown = line.removeprefix("Cards that fit it as is: ")
        assert shown.split(", ") == listed or (shown.startswith("none") and listed == []), argv
        mem = [GPUS[n].memory_mib for n in listed]
        assert mem == sorted(mem), argv
    assert listed == ["h100-80g", "h800-80g", "a100-80g"]  # 81,559 MiB twice, then 81,920
