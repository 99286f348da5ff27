"""Incremental refreshes, resume after kill -9, and one writer per corpus."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from flows.clean_workorders import clean_workorders
from pipeline.publish.locking import CorpusBusyError, corpus_lock
from sample_data.make_samples import EN_HEADER
from schemas.ingest import IngestConfig
from tests.pipeline.ingest.workorders.support import read_workorder_file


def manifest(snapshot: Path) -> dict:
    return json.loads((snapshot / "manifest.json").read_text())


def parquet_digests(snapshot: Path) -> dict[str, str]:
    return {
        o["path"]: o["sha256"]
        for o in manifest(snapshot)["outputs"]
        if o["path"].endswith(".parquet")
    }


def write_orders(path: Path, rows: list[list[str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(EN_HEADER)
        writer.writerows(rows)


@pytest.fixture()
def inputs(tmp_path, sample_data) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ["service_orders_en.csv", "维修工单_2024.csv"]:
        shutil.copy(sample_data / "workorders" / name, folder / name)
    return folder


def a_published_english_record(inputs: Path, snapshot: Path) -> dict:
    """A kept record of the English export with all four fields, as the export has it."""
    kept_ids = set(pl.read_parquet(snapshot / "sft")["record_id"])
    read = read_workorder_file(inputs / "service_orders_en.csv", inputs, IngestConfig())
    rows = read.result.kept.filter(
        pl.col("record_id").is_in(kept_ids)
        & pl.all_horizontal(
            pl.col(c).is_not_null() for c in ("symptom", "cause", "action", "prevention")
        )
    )
    return rows.row(0, named=True)


def test_refresh_processes_only_the_new_file_and_rejects_a_near_dup_of_the_old_corpus(
    prefect_server, inputs, tmp_path
):
    out = tmp_path / "corpus"
    first = Path(clean_workorders(input=str(inputs), out=str(out)))
    old = a_published_english_record(inputs, first)
    write_orders(
        inputs / "new_orders.csv",
        [
            # The same incident typed again with small edits: a near duplicate of `old`.
            [
                "SO-9001",
                old["asset"],
                old["machine_model"],
                "2024-11-02",
                old["symptom"] + " again",
                old["cause"],
                old["action"].replace(".", ""),
                old["prevention"],
                "",
                "Closed",
                "",
            ],
            [
                "SO-9002",
                "LATHE-7",
                "FANUC 0i-TF",
                "2024-11-03",
                "Turret indexing alarm 2071, turret stops between stations",
                "Turret clamp proximity switch loose, signal flickering",
                "Re-mounted and adjusted the clamp switch, indexed 50 times without fault",
                "Check switch brackets at the quarterly PM",
                "",
                "Closed",
                "",
            ],
        ],
    )
    second = Path(clean_workorders(input=str(inputs), out=str(out)))

    refresh = manifest(second)["refresh"]
    assert refresh["processed"] == ["new_orders.csv"]
    assert refresh["carried"] == ["service_orders_en.csv", "维修工单_2024.csv"]
    assert refresh["previous_snapshot"] == first.name
    new_stages = {s: c for s, c in manifest(second)["counts"]["stages"].items()}
    assert new_stages["workorder/ingest"]["read"] == manifest(first)["counts"]["read"] + 2

    rejects = pl.read_parquet(second / "rejects").filter(pl.col("source_file") == "new_orders.csv")
    dup = rejects.row(0, named=True)
    assert dup["reason"] in {"near_dup", "exact_dup"}
    assert dup["duplicate_of"] == old["record_id"]

    before = set(pl.read_parquet(first / "sft")["record_id"])
    after = pl.read_parquet(second / "sft")
    assert before <= set(after["record_id"])  # old records carried over, none rejected
    assert after.filter(pl.col("source_file") == "new_orders.csv")["order_id"].to_list() == [
        "SO-9002"
    ]
    counts = manifest(second)["counts"]
    assert counts["read"] == counts["kept"] + counts["rejected"]
    assert counts["kept"] == after.height


def test_changed_file_replaces_its_earlier_records(prefect_server, inputs, tmp_path):
    out = tmp_path / "corpus"
    first = Path(clean_workorders(input=str(inputs), out=str(out)))
    path = inputs / "service_orders_en.csv"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:12]))  # keep the header and the first records only
    second = Path(clean_workorders(input=str(inputs), out=str(out)))

    assert manifest(second)["refresh"]["processed"] == ["service_orders_en.csv"]
    sft = pl.read_parquet(second / "sft")
    rows_now = read_workorder_file(path, inputs, IngestConfig()).result.kept["source_row"].max()
    assert sft.filter(pl.col("source_file") == "service_orders_en.csv")["source_row"].max() <= (
        rows_now
    )
    zh_before = pl.read_parquet(first / "sft").filter(pl.col("source_file") == "维修工单_2024.csv")
    zh_after = sft.filter(pl.col("source_file") == "维修工单_2024.csv")
    assert zh_before["record_id"].sort().to_list() == zh_after["record_id"].sort().to_list()
    counts = manifest(second)["counts"]
    assert counts["read"] == sum(i["rows"] for i in manifest(second)["inputs"])
    assert counts["read"] == counts["kept"] + counts["rejected"]


def test_concurrent_refresh_is_refused(prefect_server, inputs, tmp_path):
    out = tmp_path / "corpus"
    with corpus_lock(out), pytest.raises(CorpusBusyError, match="another refresh"):
        clean_workorders(input=str(inputs), out=str(out))
    assert not (out / "LATEST").exists()


def run_cli(inputs: Path, out: Path, home: Path) -> subprocess.Popen:
    env = os.environ | {"PREFECT_HOME": str(home), "PREFECT_LOGGING_LEVEL": "INFO"}
    env.pop("PREFECT_API_URL", None)  # its own temporary server, not the test harness's
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flows.cli",
            "run",
            "clean-workorders",
            "--input",
            str(inputs),
            "--out",
            str(out),
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_kill_9_then_rerun_publishes_what_a_clean_run_does(tmp_path, repo):
    corpus = tmp_path / "generated"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sample_data.generate",
            "--rows",
            "40000",
            "--out",
            str(corpus),
            "--shards",
            "8",
        ],
        check=True,
        cwd=repo,
    )
    out = tmp_path / "killed"
    proc = run_cli(corpus, out, tmp_path / "home-a")
    results = out / "state" / "task-results"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(list(results.glob("*"))) < 6:
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the flow and its temporary API server
    proc.wait()
    assert not (out / "LATEST").exists()  # nothing half-written is ever published

    rerun = run_cli(corpus, out, tmp_path / "home-a")
    log, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, log
    assert "Cached" in log  # finished tasks were not recomputed

    clean_out = tmp_path / "clean"
    clean = run_cli(corpus, clean_out, tmp_path / "home-b")
    clean_log, _ = clean.communicate(timeout=600)
    assert clean.returncode == 0, clean_log

    resumed = out / "snapshots" / (out / "LATEST").read_text().strip()
    fresh = clean_out / "snapshots" / (clean_out / "LATEST").read_text().strip()
    assert parquet_digests(resumed) == parquet_digests(fresh)
    assert manifest(resumed)["counts"] == manifest(fresh)["counts"]
