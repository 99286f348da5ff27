"""The clean-workorders flow end to end through a real (temporary) Prefect API."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from flows.clean_workorders import clean_workorders
from schemas.config import PipelineConfig
from tests.pipeline.ingest.workorders.support import discover_files, read_workorder_file

PII_PATTERNS = [
    r"1[3-9]\d{9}",  # Chinese mobile
    r"[\w.+-]+@[\w-]+\.[\w.]+",  # e-mail
    r"\d{17}[\dXx]",  # Chinese ID number
    r"\(\d{3}\) ?\d{3}-\d{4}",  # US phone
]


@pytest.fixture(scope="module")
def two_runs(prefect_server, sample_data, tmp_path_factory) -> tuple[Path, Path]:
    inputs = sample_data / "workorders"
    first = Path(clean_workorders(input=str(inputs), out=str(tmp_path_factory.mktemp("a"))))
    second = Path(clean_workorders(input=str(inputs), out=str(tmp_path_factory.mktemp("b"))))
    return first, second


def manifest(snapshot: Path) -> dict:
    return json.loads((snapshot / "manifest.json").read_text())


def test_snapshot_published_and_latest_points_at_it(two_runs):
    snapshot, _ = two_runs
    assert (snapshot.parent.parent / "LATEST").read_text().strip() == snapshot.name
    assert list(snapshot.glob("sft/tier=*/part-*.parquet"))
    assert list(snapshot.glob("rejects/part-*.parquet"))
    assert "<svg" in (snapshot / "report.html").read_text(encoding="utf-8")


def test_manifest_counts_add_up_per_stage_and_in_total(two_runs, sample_data):
    m = manifest(two_runs[0])
    counts = m["counts"]
    assert counts["read"] == counts["kept"] + counts["rejected"]
    assert sum(counts["by_reason"].values()) == counts["rejected"]
    stages = list(counts["stages"].values())
    for stage in stages:
        assert stage["read"] == stage["kept"] + stage["rejected"]
    for before, after in zip(stages, stages[1:], strict=False):
        assert after["read"] == before["kept"]
    assert stages[-1]["kept"] == counts["kept"]
    # Every input row is accounted for: rows read equals the rows of every input file.
    assert counts["read"] == sum(i["rows"] for i in m["inputs"])
    files = discover_files(sample_data / "workorders", PipelineConfig().ingest)
    assert sorted(i["path"] for i in m["inputs"]) == sorted(
        p.relative_to(sample_data / "workorders").as_posix() for p in files
    )
    # Shards hold exactly the kept and rejected rows.
    sft_rows = sum(o["rows"] for o in m["outputs"] if o["path"].startswith("sft/"))
    reject_rows = sum(o["rows"] for o in m["outputs"] if o["path"].startswith("rejects/"))
    assert (sft_rows, reject_rows) == (counts["kept"], counts["rejected"])


def test_outputs_checksummed(two_runs):
    snapshot, _ = two_runs
    for output in manifest(snapshot)["outputs"]:
        data = (snapshot / output["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == output["sha256"]


def test_encodings_recorded_per_input(two_runs):
    encodings = {i["path"]: i["encoding"] for i in manifest(two_runs[0])["inputs"]}
    assert "gbk" in encodings.values() or "gb18030" in encodings.values()
    assert all(e for e in encodings.values())


def test_no_pii_in_any_kept_shard(two_runs, sample_data):
    snapshot, _ = two_runs
    kept = pl.read_parquet(snapshot / "sft").drop("record_id")  # hex ids are not phone numbers
    text = "\n".join(
        json.dumps(row, ensure_ascii=False, default=str) for row in kept.iter_rows(named=True)
    )
    for pattern in PII_PATTERNS:
        assert not re.search(pattern, text), pattern
    names: set[str] = set()
    for path in discover_files(sample_data / "workorders", PipelineConfig().ingest):
        read = read_workorder_file(path, sample_data / "workorders", PipelineConfig().ingest)
        names |= {n for n in read.result.kept["technician"].drop_nulls().to_list() if len(n) > 1}
    assert names, "the sample data should name technicians"
    leaked = sorted(n for n in names if n in text)
    assert not leaked


def test_two_runs_give_identical_shard_content(two_runs):
    first, second = two_runs

    def digests(snapshot: Path) -> dict[str, str]:
        return {
            o["path"]: o["sha256"]
            for o in manifest(snapshot)["outputs"]
            if o["path"].endswith(".parquet")
        }

    assert digests(first) == digests(second)
    assert manifest(first)["counts"] == manifest(second)["counts"]


def test_cli_reports_bad_configuration_in_one_line(tmp_path, sample_data, repo):
    config = tmp_path / "bad.toml"
    config.write_text("[filters]\nmin_chars = -1.5\n")
    env = os.environ | {"PREFECT_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "flows.cli",
            "run",
            "clean-workorders",
            "--input",
            str(sample_data / "workorders"),
            "--out",
            str(tmp_path / "out"),
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        cwd=repo,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 2
    assert f"cnc-corpus: error: {config}: invalid configuration: field 'filters.min_chars'" in (
        proc.stderr
    )
    assert "Traceback" not in proc.stderr


def test_funnel_and_plan_published_as_prefect_artifacts(two_runs):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    keys = ["clean-workorders-funnel", "clean-workorders-plan"]
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys))
        )
    assert {a.key for a in artifacts} == set(keys)
    funnel = next(a for a in artifacts if a.key == "clean-workorders-funnel")
    assert "| workorder/filter |" in funnel.data
    assert "Samples per tier" in funnel.data


def test_technician_of_one_file_is_redacted_in_another_file(prefect_server, tmp_path):
    header = "工单号,设备编号,故障现象,原因分析,处理措施,维修人员,备注\n"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text(
        header + "A-1,VMC-01,主轴异响,轴承磨损,更换主轴轴承,王建国,\n", encoding="utf-8"
    )
    (tmp_path / "in" / "b.csv").write_text(
        header + "B-1,VMC-02,X轴报警SV0401,伺服放大器故障,王建国更换放大器后试机正常,李强,\n",
        encoding="utf-8",
    )
    snapshot = Path(clean_workorders(input=str(tmp_path / "in"), out=str(tmp_path / "out")))
    kept = pl.read_parquet(snapshot / "sft")
    assert kept.height == 2
    text = json.dumps(kept.drop("record_id").to_dicts(), ensure_ascii=False, default=str)
    assert "王建国" not in text and "李强" not in text


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (["--workers", "-1"], "--workers/--dask-address: workers: Input should be greater"),
        (["--dask-address", "sched:8786"], "--workers/--dask-address: dask_address: String"),
    ],
)
def test_cli_reports_a_bad_task_runner_flag_in_one_line_before_prefect(
    tmp_path, sample_data, repo, flag, message
):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", "run", "clean-workorders",
         "--input", str(sample_data / "workorders"), "--out", str(out), *flag],
        capture_output=True, text=True, cwd=repo, timeout=300,
        env=os.environ | {"PREFECT_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr == f"cnc-corpus: error: {message}" + proc.stderr.split(message, 1)[1]
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not out.exists() and not (tmp_path / "home").exists()  # Prefect never started
