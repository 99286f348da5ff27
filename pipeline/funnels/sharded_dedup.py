"""Duplicate removal over the shards of a run, its result given back per shard.

For now this is one step over the records of every shard: the single-frame dedup stage
(`pipeline.dedup`: candidates from text bands split by machine, evidence-weighted merge
decisions, the published index), whose kept rows, rejects and index rows are then split
back into the shards they came from, so the steps after it run per shard again. Its peak
memory grows with the run's filtered records, not with a shard: the partitioned version
(band keys written per shard, candidate pairs per band partition, components over the edge
list) that issue 14 built on the earlier dedup is not yet ported onto these semantics.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.funnels.keys import step_key
from pipeline.funnels.steps import Runner
from schemas.config import PipelineConfig
from schemas.manifest import StageOutput

STEP = "workorders.dedup"


def dedup_shards(
    runner: Runner,
    work: Path,
    shards: list[str],
    index: pl.DataFrame | None,
    cfg: PipelineConfig,
    base: tuple[str, ...],
) -> list[StageOutput]:
    """The dedup stage over `shards` (filtered records, in order) against the published
    `index` (without `source_file`): one `dedup` output per shard, its state holding the
    index rows of the shard's kept records."""
    sizes = [pl.scan_parquet(p).select(pl.len()).collect().item() for p in shards]
    inputs = {"filtered": shards, "index": []}
    if index is not None:
        work.mkdir(parents=True, exist_ok=True)
        inputs["index"] = [str(work / "dedup_previous_index.parquet")]
        index.write_parquet(inputs["index"][0])
    result = runner(STEP, step_key(STEP, *shards, *base), inputs, {"sizes": sizes})
    return [result[f"part-{i:05d}/dedup"] for i in range(len(shards))]
