"""The dedup stage over shards, step by step through a `Runner` (see pipeline/dedup_shards.py).

Per shard and per partition steps go through `Runner.map`; the driver reads only small
columns (node keys and counts, candidate pairs, the features of the pairs' nodes, the
ranking columns of records in clusters of more than one record) and writes the small tables
the next steps read, named by their content so cached steps rerun when their inputs change.
The result equals `pipeline.dedup.dedup` over the shards' records in order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from pipeline import dedup_shards as ds
from pipeline.funnels.keys import step_key
from pipeline.funnels.steps import Call, Runner
from schemas.config import PipelineConfig
from schemas.manifest import StageOutput


@dataclass(frozen=True)
class _Driver:
    runner: Runner
    folder: Path
    base: tuple[str, ...]

    def save(self, name: str, frame: pl.DataFrame) -> str:
        """Write a driver table; its path names its content."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f"{name}.tmp.parquet"
        frame.write_parquet(tmp)
        digest = hashlib.sha256(tmp.read_bytes()).hexdigest()[:24]
        path = self.folder / f"{name}-{digest}.parquet"
        tmp.replace(path)
        return str(path)

    def map(self, step: str, inputs: Sequence[dict[str, list[str]]], params: Sequence[dict]):
        calls = [
            Call(step, step_key(step, repr(sorted(i.items())), repr(p), *self.base), i, p)
            for i, p in zip(inputs, params, strict=True)
        ]
        return self.runner.map(calls)


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
    if not shards:
        return []
    d = _Driver(runner, work / "dedup", base)
    dcfg = cfg.dedup
    n_shards = len(shards)
    feats = [
        o["features"]
        for o in d.map("dedup.nodes", [{"records": [p]} for p in shards], [{}] * n_shards)
    ]
    # run-wide nodes: distinct keys in order of first record
    keys = pl.concat(
        [
            pl.read_parquet(f.state["nodes"], columns=["key", "n_records"]).with_columns(
                pl.lit(i, pl.Int64).alias("shard"), pl.int_range(pl.len()).alias("local")
            )
            for i, f in enumerate(feats)
        ]
    )
    counts = keys.group_by("key").agg(pl.col("n_records").sum())
    first = keys.unique("key", keep="first", maintain_order=True).drop("n_records")
    first = first.with_columns(pl.int_range(pl.len()).alias("node"))
    n_new = first.height
    old = ds.index_nodes(index, dcfg) if index is not None else None
    n_old = old.height if old is not None else 0
    bits = max((n_new + n_old - 1).bit_length(), 1)

    sources = [
        (f.state["nodes"], first.filter(pl.col("shard") == i).select("local", "node"))
        for i, f in enumerate(feats)
    ]
    if old is not None:
        old_ids = pl.DataFrame({"local": np.arange(n_old), "node": n_new + np.arange(n_old)})
        sources.append((d.save("old-nodes", old.drop("record_id")), old_ids))
    src_inputs = [
        {"nodes": [n], "ids": [d.save(f"ids-{i}", ids)]} for i, (n, ids) in enumerate(sources)
    ]
    rows = [pl.scan_parquet(p).select(pl.len()).collect().item() for p in shards]
    parts = ds.partition_bits(n_new + n_old, max(rows, default=1), dcfg)
    params = {"bits": bits, "parts": parts}
    buckets = d.map("dedup.buckets", src_inputs, [params] * len(sources))
    labels = [f"part-{k:05d}/buckets" for k in range(1 << parts)]
    pairs = d.map(
        "dedup.pairs",
        [{"buckets": [b[label].kept for b in buckets]} for label in labels],
        [{"bits": bits, "n_new": n_new}] * len(labels),
    )
    u, v = ds.candidate_pairs([pl.read_parquet(p["pairs"].kept) for p in pairs])

    # the candidate pairs' nodes, decided; exact edges to the old index
    needed = pl.Series(np.unique(np.concatenate([u, v]))).implode()
    pair_nodes = pl.concat(
        [
            pl.read_parquet(n)
            .with_row_index("local")
            .join(ids.with_columns(pl.col("local").cast(pl.UInt32)), on="local")
            .filter(pl.col("node").is_in(needed))
            .drop("local", "record_id", strict=False)
            for n, ids in sources
        ],
        how="diagonal_relaxed",
    ).sort("node")
    decided = ds.decide_pairs(pair_nodes, u, v, dcfg)
    eu, ev = decided.pop("u"), decided.pop("v")
    old_keys = pl.DataFrame()
    if old is not None:
        old_keys = old.select("key", "record_id", "content_hash").with_columns(
            (n_new + pl.int_range(pl.len())).alias("v")
        )
        exact = first.select("key", pl.col("node").alias("u")).join(old_keys, on="key")
        exact = exact.sort("u", "v")
        eu = np.concatenate([eu, exact.get_column("u").to_numpy()])
        ev = np.concatenate([ev, exact.get_column("v").to_numpy()])
    components = ds.clusters(eu, ev)

    # clusters of more than one record, or holding a published record, are decided here
    nodes = first.join(counts, on="key").join(components, on="node", how="left")
    nodes = nodes.with_columns(pl.col("cluster").fill_null(pl.col("node")))
    old_clusters = (
        old_keys.join(components.rename({"node": "v"}), on="v").select(
            pl.col("record_id").alias("old_id"), "content_hash", "cluster"
        )
        if old is not None
        else pl.DataFrame(
            schema={"old_id": pl.String, "content_hash": pl.UInt64, "cluster": pl.Int64}
        )
    )
    sizes = nodes.group_by("cluster").agg(pl.col("n_records").sum().alias("size"))
    shared_clusters = sizes.filter(
        (pl.col("size") > 1) | pl.col("cluster").is_in(old_clusters.get_column("cluster").implode())
    ).get_column("cluster")
    shared = nodes.filter(pl.col("cluster").is_in(shared_clusters.implode())).select(
        "key", "node", "cluster"
    )
    offsets = np.cumsum([0, *rows]).tolist()
    records = pl.concat(
        [
            pl.read_parquet(f.kept)
            .join(shared, on="key")
            .with_columns(
                pl.lit(i, pl.Int64).alias("shard"),
                pl.col("row").alias("local_row"),
                pl.col("row") + offsets[i],
            )
            for i, f in enumerate(feats)
        ]
    )
    verdicts = ds.decide_clusters(records, old_clusters)

    # per shard: its rejects, and the run's first node rows of the keys it did not introduce
    empty_content = sum(rows) - sum(
        pl.scan_parquet(f.kept).select(pl.len()).collect().item() for f in feats
    )
    counters = {"empty_content": empty_content, "candidate_pairs": len(u), **decided}
    apply_inputs, apply_params = [], []
    for i, (path, f) in enumerate(zip(shards, feats, strict=True)):
        mine = verdicts.filter(pl.col("shard") == i).select("local_row", "_reason", "_duplicate_of")
        borrowed = (
            keys.filter(pl.col("shard") == i)
            .join(first, on="key")
            .filter(pl.col("shard_right") != i)
        )
        foreign = [
            pl.read_parquet(feats[s].state["nodes"])
            .with_row_index("local")
            .filter(pl.col("local").is_in(part.get_column("local_right").cast(pl.UInt32).implode()))
            .drop("local")
            for (s,), part in borrowed.group_by("shard_right", maintain_order=True)
        ]
        apply_inputs.append(
            {
                "records": [path],
                "features": [f.kept],
                "nodes": ([d.save(f"foreign-{i}", pl.concat(foreign))] if foreign else [])
                + [f.state["nodes"]],
                "decisions": [d.save(f"decisions-{i}", mine)] if mine.height else [],
            }
        )
        apply_params.append({"counters": counters if i == 0 else {}})
    return [o["dedup"] for o in d.map("dedup.apply", apply_inputs, apply_params)]
