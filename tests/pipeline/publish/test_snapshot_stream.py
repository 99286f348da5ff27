"""The SFT rows of a snapshot are published a chunk at a time: a refresh in shards writes
them, and derives tool-use samples and the report's digest from them, one shard at a time."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.funnels.refresh import Sources, refresh
from pipeline.publish import snapshot
from pipeline.publish.writer import TableStream
from schemas.config import PipelineConfig

SHARD_ROWS = 16


def test_sft_rows_are_written_and_read_a_shard_at_a_time(
    sample_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spies around the real writer and tool-use step (they still do their work): every SFT
    row reaches them once, in chunks no larger than a work-order shard or one alarm log's
    incidents, and the published table is what they were given, in lineage order."""
    written: dict[str, list[int]] = {}
    tool_reads: list[int] = []
    write, tool_use_samples = TableStream.write, snapshot.tool_use_samples

    def spy_write(self: TableStream, chunk: pl.DataFrame) -> None:
        written.setdefault(self.name, []).append(chunk.height)
        write(self, chunk)

    def spy_tools(sft: pl.DataFrame, *args: object) -> object:
        tool_reads.append(sft.height)
        return tool_use_samples(sft, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(TableStream, "write", spy_write)
    monkeypatch.setattr(snapshot, "tool_use_samples", spy_tools)
    cfg = PipelineConfig.model_validate({"execution": {"shard_rows": SHARD_ROWS}})
    published = refresh("refresh-corpus", Sources.everything(sample_data), tmp_path, cfg)

    kept = published.manifest.counts.kept
    incidents = published.manifest.counts.stages["alarm_log/incidents"].kept
    assert kept > 2 * SHARD_ROWS
    assert sum(written["sft"]) == kept and sum(tool_reads) == kept
    assert len(written["sft"]) > 2 and max(written["sft"]) <= max(SHARD_ROWS, incidents)
    assert tool_reads == written["sft"]
    tools = published.manifest.sources["sft_tools"]
    assert sum(written["sft_tools"]) == tools["kept"] and tools["read"] == kept
    rows = pl.read_parquet(published.path / "sft", hive_partitioning=False)
    assert rows.height == kept
    for (tier,), part in rows.group_by("tier"):
        order = part.select("source_kind", "source_file", "source_row")
        assert order.equals(order.sort(pl.all())), tier
