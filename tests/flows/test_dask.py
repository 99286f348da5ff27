"""The same flows on Dask: a local cluster of worker processes, and a scheduler and worker
started as separate processes, publish byte-identical shards to the in-process run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.clean_workorders import clean_workorders
from flows.refresh_corpus import refresh_corpus


def _published(snapshot: str) -> dict[str, str]:
    """Parquet outputs of a snapshot -> sha256 (manifest and report carry a timestamp)."""
    manifest = json.loads((Path(snapshot) / "manifest.json").read_text())
    return {o["path"]: o["sha256"] for o in manifest["outputs"] if o["path"].endswith(".parquet")}


@pytest.fixture(scope="module")
def small_shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shards of 16 records: the sample exports are split into row ranges."""
    path = tmp_path_factory.mktemp("config") / "shards.toml"
    path.write_text("[execution]\nshard_rows = 16\n")
    return path


def test_refresh_corpus_on_a_local_dask_cluster_publishes_the_same_shards(
    prefect_server: None, sample_data: Path, small_shards: Path, tmp_path: Path
) -> None:
    args = {"input": str(sample_data), "config": str(small_shards)}
    here = refresh_corpus(out=str(tmp_path / "in-process"), **args)
    there = refresh_corpus(out=str(tmp_path / "dask"), workers=2, **args)
    published = _published(here)
    assert any(p.startswith("sft/tier=") for p in published)
    assert published == _published(there)
    counts = json.loads((Path(there) / "manifest.json").read_text())["counts"]
    assert counts["by_reason"].get("exact_dup", 0) + counts["by_reason"].get("near_dup", 0) > 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dask_cluster(repo: Path, tmp_path: Path) -> Iterator[str]:
    """`dask scheduler` and one `dask worker` (2 processes) on 127.0.0.1."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = [str(Path(sys.executable).parent / "dask")]
    log = (tmp_path / "dask.log").open("w")
    scheduler = subprocess.Popen(
        [*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        cwd=repo,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    worker = subprocess.Popen(
        [
            *dask,
            "worker",
            address,
            "--nworkers",
            "2",
            "--nthreads",
            "1",
            "--host",
            "127.0.0.1",
            "--no-dashboard",
        ],
        cwd=repo,
        env=os.environ | {"PYTHONPATH": str(repo)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        from distributed import Client

        deadline = time.monotonic() + 120
        with Client(address, timeout=120) as client:
            while len(client.scheduler_info()["workers"]) < 2:
                assert time.monotonic() < deadline, (tmp_path / "dask.log").read_text()
                time.sleep(0.5)
        yield address
    finally:
        for proc in (worker, scheduler):
            proc.terminate()
            proc.wait(timeout=60)
        log.close()


def test_clean_workorders_on_a_separately_started_dask_cluster(
    prefect_server: None, sample_data: Path, small_shards: Path, dask_cluster: str, tmp_path: Path
) -> None:
    args = {"input": str(sample_data / "workorders"), "config": str(small_shards)}
    here = clean_workorders(out=str(tmp_path / "in-process"), **args)
    there = clean_workorders(out=str(tmp_path / "dask"), dask_address=dask_cluster, **args)
    published = _published(here)
    assert any(p.startswith("sft/tier=") for p in published)
    assert published == _published(there)


def test_row_range_shards_publish_what_whole_files_publish(
    sample_data: Path, small_shards: Path, tmp_path: Path
) -> None:
    """Shards of 16 records (row ranges of each export) change nothing that is published:
    samples, rejects and per-file ledger rows are the same as with one shard per file."""
    from pipeline.funnels.refresh import Sources, refresh
    from schemas.config import load_config

    def run(cfg_path: Path | None, out: Path) -> tuple:
        published = refresh("refresh-corpus", Sources.everything(sample_data), out,
                            load_config(cfg_path))  # fmt: skip
        return _published(str(published.path)), published.manifest

    whole, whole_manifest = run(None, tmp_path / "whole")
    sharded, sharded_manifest = run(small_shards, tmp_path / "sharded")
    assert whole == sharded
    assert whole_manifest.inputs == sharded_manifest.inputs
    assert whole_manifest.counts == sharded_manifest.counts
    assert max(f.rows for f in whole_manifest.inputs if f.source_kind == "workorder") > 16
