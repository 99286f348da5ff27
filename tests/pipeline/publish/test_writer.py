from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from pipeline.publish.writer import SnapshotWriter, latest_snapshot
from schemas import arrow
from schemas.manifest import Counts, Manifest, RefreshSummary
from schemas.publish import PublishConfig

REPO = Path(__file__).resolve().parents[3]


def rejects(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "record_id": [f"{i:016x}" for i in range(n)],
            "source_kind": ["workorder"] * n,
            "source_file": ["维修工单.csv"] * n,
            "source_row": list(range(2, n + 2)),
            "stage": ["filter"] * n,
            "reason": ["placeholder"] * n,
            "detail": [None] * n,
            "duplicate_of": [None] * n,
            "payload": ['{"symptom":"同上"}'] * n,
        }
    )


def publish(out: Path, n: int, snapshot_id: str, cfg: PublishConfig | None = None) -> Path:
    with SnapshotWriter(out, cfg or PublishConfig(), snapshot_id) as writer:
        writer.write_table("rejects", rejects(n), arrow.REJECTS)
        manifest = Manifest(
            snapshot_id=snapshot_id,
            created_at=snapshot_id,
            flow="test",
            code_version="t",
            config_hash="h",
            inputs=[],
            counts=Counts(read=n, kept=0, rejected=n, by_reason={"placeholder": n}),
            refresh=RefreshSummary(previous_snapshot=None, processed=[], carried=[], removed=[]),
            outputs=writer.outputs,
        )
        return writer.commit(manifest)


def test_shards_are_size_capped_and_listed_in_manifest(tmp_path):
    path = publish(tmp_path, 25, "s1", PublishConfig(max_rows_per_shard=10))
    shards = sorted((path / "rejects").glob("part-*.parquet"))
    assert [pq.read_metadata(s).num_rows for s in shards] == [10, 10, 5]
    assert pq.read_schema(shards[0]).equals(arrow.REJECTS)
    manifest = json.loads((path / "manifest.json").read_text())
    assert [o["rows"] for o in manifest["outputs"]] == [10, 10, 5]
    assert latest_snapshot(tmp_path) == path


def test_failure_inside_the_block_leaves_latest_and_no_staging(tmp_path):
    first = publish(tmp_path, 3, "s1")
    with pytest.raises(RuntimeError), SnapshotWriter(tmp_path, PublishConfig(), "s2") as writer:
        writer.write_table("rejects", rejects(5), arrow.REJECTS)
        raise RuntimeError("stage failed")
    assert latest_snapshot(tmp_path) == first
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == ["s1"]


def test_kill_before_publish_leaves_latest_on_previous_snapshot(tmp_path):
    first = publish(tmp_path, 3, "s1")
    script = f"""
import sys, time
sys.path.insert(0, {str(REPO)!r})
from pathlib import Path
from tests.pipeline.publish.test_writer import rejects
from pipeline.publish.writer import SnapshotWriter
from schemas import arrow
from schemas.publish import PublishConfig
with SnapshotWriter(Path({str(tmp_path)!r}), PublishConfig(), "s2") as w:
    w.write_table("rejects", rejects(1000), arrow.REJECTS)
    print("written", flush=True)
    time.sleep(60)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "written"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (tmp_path / "snapshots" / ".staging-s2").is_dir()  # the half-written snapshot
    assert latest_snapshot(tmp_path) == first
    assert pl.read_parquet(first / "rejects").height == 3
    # The next publish clears the stale staging directory and moves LATEST.
    third = publish(tmp_path, 4, "s3")
    assert latest_snapshot(tmp_path) == third
    assert not list((tmp_path / "snapshots").glob(".staging-*"))


def test_old_snapshots_pruned_but_latest_kept(tmp_path):
    for i in range(4):
        publish(tmp_path, 1, f"s{i}", PublishConfig(keep_snapshots=2))
        time.sleep(0.01)
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == ["s2", "s3"]
    assert latest_snapshot(tmp_path).name == "s3"
