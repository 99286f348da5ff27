"""`cnc-corpus probe`: the setup read from a real plan.json, the row it appends (and never to the
frozen set), the one-line answer without torch or a GPU, and a measured run where a GPU is."""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
import types
from importlib.util import find_spec
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import UsageError
from pipeline.funnels.refresh import Sources, refresh
from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from pipeline.training import probe, probe_gpu
from pipeline.training.plan import plan_stages, write_plan
from pipeline.training.probe_gpu import Measured
from schemas.config import PipelineConfig
from schemas.memory import ALL_LINEAR, GIB
from schemas.plan import PlanConfig, StageConfig
from tools.calibration import row_to_case

REPO = Path(__file__).resolve().parents[3]
CLI = Path(sys.executable).parent / "cnc-corpus"
FROZEN = REPO / "data" / "measured_memory_peaks.csv"


@pytest.fixture(scope="module")
def plan_json(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """plan.json of the demo snapshot, written by the in-process refresh on sample_data."""
    out = tmp_path_factory.mktemp("demo")
    refresh("refresh-corpus", Sources.everything(sample_data), out, PipelineConfig())
    return out / "snapshots" / (out / "LATEST").read_text().strip() / "plan.json"


def _raw_stage(plan_json: Path, name: str) -> dict:
    return next(s for s in json.loads(plan_json.read_text())["stages"] if s["name"] == name)


def _probe_stage(plan_json: Path, name: str, card_gib: float) -> probe.ProbeStage:
    stage = probe.read_stage(plan_json, name)
    settings = probe.stage_settings(stage, PipelineConfig().plan.stages)
    fit = probe.choose_fit(stage, None, card_gib)
    setup = probe.probe_setup(stage, settings, fit, "flash")
    return probe.ProbeStage(stage, settings, get_model(settings.model), fit, setup)


def _no_gpu_here() -> bool:
    if find_spec("torch") is None:
        return True
    import torch

    return not torch.cuda.is_available()


def test_without_torch_or_a_gpu_one_line_says_what_to_install(plan_json, tmp_path):
    if not _no_gpu_here():
        pytest.skip("a CUDA GPU is here: the probe would run, not refuse")
    own = tmp_path / "own.csv"
    argv = ["probe", "--plan", str(plan_json), "--stage", "sft-expert", "--calibration-file"]
    done = subprocess.run(
        [str(CLI), *argv, str(own)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "pip install -e '.[probe]'" in lines[0] and "NVIDIA GPU" in lines[0]
    assert ("torch" in lines[0] and "not installed" in lines[0]) or "no CUDA GPU" in lines[0]
    assert not own.exists()


def test_torch_without_cuda_is_named(monkeypatch):
    """A CPU-only torch: what is missing is the GPU, and the line says which torch it found."""
    fake = types.ModuleType("torch")
    fake.__version__ = "2.5.1+cpu"
    fake.cuda = types.SimpleNamespace(is_available=lambda: False)
    fake.version = types.SimpleNamespace(cuda=None)
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(probe_gpu, "find_spec", lambda name: object())
    assert probe_gpu.missing("lora", "adamw") == (
        "no CUDA GPU visible to torch 2.5.1+cpu (a CPU-only build)"
    )
    fake.version.cuda = "12.4"
    assert probe_gpu.missing("full", "sgd").endswith("(CUDA 12.4)")


def test_missing_names_only_what_the_stage_needs(monkeypatch):
    present = {"torch", "transformers"}
    monkeypatch.setattr(probe_gpu, "find_spec", lambda name: object() if name in present else None)
    assert probe_gpu.missing("lora", "adamw") == "peft is not installed"
    assert probe_gpu.missing("qlora", "adamw") == "peft, bitsandbytes, accelerate are not installed"
    assert probe_gpu.missing("full", "paged_adamw_8bit") == "bitsandbytes is not installed"


def test_attention_falls_back_to_sdpa_without_a_flash_kernel(monkeypatch):
    monkeypatch.setattr(probe_gpu, "find_spec", lambda name: object())  # flash_attn installed
    assert probe_gpu.attention("flash") == "flash"
    assert probe_gpu.attention("flash", "fp32") == "sdpa"  # FlashAttention 2 has no fp32 kernel
    assert probe_gpu.attention("eager") == "eager"
    monkeypatch.setattr(probe_gpu, "find_spec", lambda name: None)
    assert probe_gpu.attention("flash") == "sdpa"


def test_the_frozen_set_is_refused(plan_json, tmp_path):
    for frozen in (
        FROZEN,
        REPO.parent / "shared" / "reference" / "measured_memory_calibration.csv",
        REPO.parent / "shared" / "reference" / "mine.csv",
        tmp_path / "copy" / "measured_memory_peaks.csv",
    ):
        with pytest.raises(UsageError, match="frozen calibration set"):
            probe.check_calibration_file(frozen)
    assert probe.check_calibration_file(tmp_path / "own.csv") == (tmp_path / "own.csv").resolve()
    before = hashlib.sha256(FROZEN.read_bytes()).hexdigest()
    argv = ["probe", "--plan", str(plan_json), "--stage", "sft-expert"]
    done = subprocess.run(
        [str(CLI), *argv, "--calibration-file", str(FROZEN)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "frozen calibration set" in done.stderr
    assert hashlib.sha256(FROZEN.read_bytes()).hexdigest() == before


def test_the_setup_is_the_plans(plan_json):
    """sft-expert of the demo plan on a card torch reports as 79.2 GiB (an H100 80 GB): the
    largest fitting target it holds (within 3 %) is a100-80g (80.0 GiB); its micro-batch,
    recomputation and max_seq_len come from plan.json, and with no recomputation to replace the
    probe's estimate is the plan's own expected peak."""
    raw = _raw_stage(plan_json, "sft-expert")
    p = _probe_stage(plan_json, "sft-expert", 79.2)
    assert p.fit.gpu == "a100-80g"
    fit = next(g for g in raw["gpus"] if g["gpu"] == "a100-80g")
    assert (p.setup.seq_len, p.setup.micro_batch) == (raw["max_seq_len"], fit["micro_batch"])
    assert p.setup.recompute == ("full" if fit["recompute_needed"] else "none")
    assert p.setup.grad_accum_steps == (2 if fit["grad_accum_steps"] > 1 else 1)
    assert (p.setup.method, p.setup.precision, p.setup.optimizer) == ("lora", "bf16_mixed", "adamw")
    assert (p.setup.lora_rank, p.setup.lora_targets) == (16, ALL_LINEAR)
    if fit["recompute"] == "none":
        assert round(estimate(p.spec, p.setup).total_bytes / GIB, 2) == fit["peak_gib"]
    small = _probe_stage(plan_json, "sft-expert", 23.6)  # an RTX 4090 as torch reports it
    fits = [g for g in raw["gpus"] if g["fits"] and g["devices"] == 1]
    expected = [g for g in fits if g["memory_gib"] <= 23.6 * 1.03]
    expected = expected or [min(fits, key=lambda g: g["memory_gib"])]
    chosen = max(expected, key=lambda g: g["memory_gib"])
    assert small.fit.gpu == chosen["gpu"]
    assert small.setup.recompute == ("full" if chosen["recompute_needed"] else "none")
    assert small.setup.micro_batch == chosen["micro_batch"]


def test_choose_fit_by_name_and_its_refusals(plan_json):
    stage = probe.read_stage(plan_json, "sft-expert")
    assert probe.choose_fit(stage, "h100-80g", 10.0).gpu == "h100-80g"
    with pytest.raises(UsageError, match="planned for rtx-4090"):
        probe.choose_fit(stage, "v100-32g", 80.0)
    with pytest.raises(UsageError, match="has 2 devices"):
        probe.choose_fit(stage, "2xa100-80g", 80.0)


def test_settings_must_match_the_plan(plan_json):
    stage = probe.read_stage(plan_json, "domain-adapt")
    assert probe.stage_settings(stage, PipelineConfig().plan.stages).lora_rank == 64
    other = [StageConfig(name="domain-adapt", corpus="pretrain", model="llama-3-8b")]
    with pytest.raises(UsageError, match="plans llama-3-8b lora, plan.json qwen2.5-7b lora"):
        probe.stage_settings(stage, other)
    with pytest.raises(UsageError, match="plan.json has stages domain-adapt, sft-expert"):
        probe.read_stage(plan_json, "sft")
    with pytest.raises(UsageError, match="not a cnc-corpus plan.json"):
        probe.read_stage(REPO / "pyproject.toml", "sft")
    fp8 = StageConfig(name="x", corpus="tier_A", precision="fp8")
    assert "fp8" in probe.unsupported(fp8)
    assert "loss 'fused'" in probe.unsupported(StageConfig(name="x", corpus="tier_A", loss="fused"))


def _measured() -> Measured:
    return Measured(20.125, 22.5, "NVIDIA H100 80GB HBM3", "2.5.1+cu124", "4.46.3")


def test_calibration_row_reads_back_as_the_probed_setup(plan_json):
    """The row has data/measured_memory_peaks.csv's columns, then the probe's own, and
    tools/calibration.py parses it back into the very setup that was estimated."""
    p = _probe_stage(plan_json, "sft-expert", 79.2)
    row = probe.calibration_row(p, _measured(), "cnc-corpus probe --plan x", "2026-12-03T06:00Z")
    with FROZEN.open(encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    assert list(row) == header + ["command", "torch_version", "transformers_version", "date"]
    assert (row["peak_mem_gb"], row["measured"], row["unit"]) == (22.5, "reserved", "GiB")
    assert row["gpu"] == "NVIDIA H100 80GB HBM3" and row["params_b"] == 7.616  # Qwen2.5-7B
    assert "max_memory_allocated 20.125 GiB" in str(row["notes"])
    case = row_to_case(0, row, "project")
    assert not isinstance(case, str), case
    assert case.model == "qwen2.5-7b" and case.measured_bytes == 22.5 * GIB
    fields = ("method", "precision", "optimizer", "seq_len", "micro_batch", "grad_accum_steps",
              "recompute", "attention", "lora_rank", "lora_targets", "lora_dropout", "packing",
              "hf_reentrant_checkpointing", "zero", "dp")  # fmt: skip
    assert {f: getattr(case.setup, f) for f in fields} == {f: getattr(p.setup, f) for f in fields}
    assert estimate(get_model(case.model), case.setup) == estimate(p.spec, p.setup)


def test_rows_append_under_one_header(tmp_path, plan_json):
    p = _probe_stage(plan_json, "sft-expert", 79.2)
    own = tmp_path / "cache" / "own.csv"
    for date in ("d1", "d2"):
        probe.append_row(own, probe.calibration_row(p, _measured(), "cmd", date))
    rows = list(csv.DictReader(own.open(encoding="utf-8")))
    assert [r["date"] for r in rows] == ["d1", "d2"] and own.read_text().count("source,") == 1


def test_report_prints_measured_beside_estimate(plan_json):
    p = _probe_stage(plan_json, "sft-expert", 79.2)
    est = estimate(p.spec, p.setup)
    lines = probe.report(p, est, _measured())
    reserved = est.reserved_bytes / GIB
    assert lines[3].split()[:3] == ["reserved", "22.50", f"{reserved:.2f}"]
    assert lines[3].endswith(f"{100 * (reserved / 22.5 - 1):+.1f} %")


def test_catalog_models_map_to_transformers_configs():
    assert probe_gpu.model_type(get_model("qwen2.5-0.5b")) == "qwen2"
    assert probe_gpu.model_type(get_model("llama-3.1-8b")) == "llama"
    assert probe_gpu.model_type(get_model("qwen3-8b")) == "qwen3"
    with pytest.raises(UsageError, match="not in transformers"):
        probe_gpu.model_type(get_model("qwen-7b"))
    fields = probe_gpu._fields(get_model("qwen2.5-0.5b"))
    assert fields["num_key_value_heads"] == 2 and fields["tie_word_embeddings"] is True
    assert "attention_bias" not in fields and "head_dim" not in fields
    assert probe_gpu._fields(get_model("qwen3-8b"))["head_dim"] == 128


def test_probe_measures_a_tiny_model_on_the_gpu(tmp_path):
    """Qwen2.5-0.5B's structure, LoRA, 256-token rows: measured and appended on a CUDA GPU."""
    if _no_gpu_here() or probe_gpu.missing("lora", "adamw"):
        pytest.skip("no CUDA GPU here (or the probe extra is not installed)")
    from flows.cli import main

    stage = StageConfig(name="tiny", corpus="tier_A", model="qwen2.5-0.5b", gpus=("rtx-4090",))
    lengths = {"tier_A": pl.Series("n_tokens", [200, 256, 180] * 50)}
    plan = write_plan(plan_stages(lengths, PlanConfig(stages=[stage])), tmp_path / "plan.json")
    own = tmp_path / "own.csv"
    argv = ["probe", "--plan", str(plan), "--stage", "tiny", "--steps", "2"]
    assert main([*argv, "--calibration-file", str(own)]) == 0
    (row,) = list(csv.DictReader(own.open(encoding="utf-8")))
    assert row["seq_len"] == "256" and row["method"] == "LoRA"
    reserved = float(row["peak_mem_gb"])
    p = _probe_stage(plan, "tiny", probe_gpu.card_gib())
    est = estimate(p.spec, p.setup.model_copy(update={"attention": probe_gpu.attention("flash")}))
    assert 0.5 < reserved * GIB / est.reserved_bytes < 1.5
