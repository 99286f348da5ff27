"""`make demo`'s snapshot, held to the one published before the funnels were redeclared
(issue "One declared funnel per source kind"): every Parquet file and plan.json byte for byte.

The golden file is written by
`python -m tools.snapshot_digest out/demo --golden > tests/golden/demo_snapshot.json`; a change
that means to change what is published regenerates it the same way and says why in its commit
(`git log tests/golden/` lists them: the redesign kept 5d2eafc's files byte for byte; the
document block model changed only the record ids of manual table entries; the plans of
issue 24 changed plan.json: batch and schedule chosen from each stage's size).
Parquet bytes depend on the writer's version: where polars or pyarrow differ from those that
wrote the golden file, the rows are compared instead (and the test says so).
"""

from __future__ import annotations

import json
import warnings
from importlib.metadata import version
from pathlib import Path

from pipeline.funnels.refresh import Sources, refresh
from schemas.config import PipelineConfig
from tools.snapshot_digest import WRITERS, rows_digest, snapshot_digest

GOLDEN = Path(__file__).parent / "golden" / "demo_snapshot.json"


def test_demo_publishes_the_golden_snapshot(sample_data: Path, tmp_path: Path) -> None:
    golden = json.loads(GOLDEN.read_text())
    out = tmp_path / "demo"
    refresh("refresh-corpus", Sources.everything(sample_data), out, PipelineConfig())
    files = snapshot_digest(out)
    assert sorted(files) == sorted(golden["files"])
    assert files["plan.json"] == golden["files"]["plan.json"]
    writers = {name: version(name) for name in WRITERS}
    if writers == golden["writers"]:
        assert files == golden["files"]
    else:
        warnings.warn(
            f"Parquet writers {writers} differ from the golden file's {golden['writers']}: "
            "rows compared, not bytes",
            stacklevel=1,
        )
    assert rows_digest(out) == golden["rows"]
