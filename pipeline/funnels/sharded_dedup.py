"""The dedup stage over shards, step by step through a `Runner` (see pipeline/dedup_shards.py).

Per shard or per band steps go through `Runner.map` (concurrently where the runner can); the
driver only reads small columns (node keys, pair lists, the records of shared clusters) and
writes the small tables the next steps read, named by their content so cached steps rerun
when their inputs change.
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
    `index`: one `dedup` stage output per shard, its state holding the shard's index rows."""
    d = _Driver(runner, work / "dedup", base)
    dcfg = cfg.dedup
    feats = [
        o["features"]
        for o in d.map("dedup.features", [{"records": [p]} for p in shards], [{}] * len(shards))
    ]
    ids, nodes = ds.assign_nodes(
        [pl.read_parquet(f.state["nodes"], columns=["local", "key", "n_records"]) for f in feats]
    )
    n_new = nodes.height
    old = ds.old_nodes(index, dcfg) if index is not None else None
    sources = [(f.state["nodes"], d.save(f"ids-{i}", ids[i])) for i, f in enumerate(feats)]
    starts = list(np.cumsum([0] + [len(i) for i in ids])[:-1].tolist())
    if old is not None:
        old_ids = old.select("local", (pl.col("local") + n_new).alias("node"))
        sources.append((d.save("old-nodes", old), d.save("old-ids", old_ids)))
        starts.append(n_new)
    n_nodes = n_new + (old.height if old is not None else 0)

    src_inputs = [{"nodes": [n], "ids": [i]} for n, i in sources]
    bands = d.map("dedup.bands", src_inputs, [{}] * len(sources))
    band_inputs = [
        {"band": [b[f"band_{k:03d}/bands"].kept for b in bands]} for k in range(dcfg.bands)
    ]
    pairs = d.map("dedup.pairs", band_inputs, [{"n_new": n_new}] * dcfg.bands)
    candidates = ds.candidate_pairs([pl.read_parquet(p["pairs"].kept) for p in pairs])
    by_source = candidates.with_columns(ds.source_of(candidates.get_column("u"), starts))
    pair_files = {
        int(s): d.save(f"pairs-{int(s)}", part.drop("_source"))
        for (s,), part in by_source.group_by("_source", maintain_order=True)
    }
    sides = d.map(
        "dedup.pair_sides",
        [
            {**s, "pairs": [pair_files[i]] if i in pair_files else []}
            for i, s in enumerate(src_inputs)
        ],
        [{"starts": starts}] * len(sources),
    )
    verify_inputs = [
        {**s, "sides": [o[f"to_{t:05d}/sides"].kept for o in sides if f"to_{t:05d}/sides" in o]}
        for t, s in enumerate(src_inputs)
    ]
    verified = pl.concat(
        [
            pl.read_parquet(v["verified"].kept)
            for v in d.map("dedup.verify", verify_inputs, [{}] * len(sources))
        ]
    )
    edges = verified
    if old is not None:
        edges = pl.concat([verified, ds.exact_to_old(nodes, old, n_new)])
    labels = ds.clusters(n_nodes, edges)
    old_frame = old if old is not None else ds.old_nodes_empty()
    shared = ds.shared_clusters(nodes, labels, n_new)

    offsets = np.cumsum([0] + [f.counters["read"] for f in feats]).tolist()
    keys = shared.get_column("key").implode()
    records = pl.concat(
        [
            pl.scan_parquet(f.kept)
            .filter(pl.col("key").is_in(keys))
            .with_columns(
                pl.lit(i, pl.Int32).alias("shard"),
                pl.col("row").alias("local_row"),
                (pl.col("row") + offsets[i]).alias("row"),
            )
            .collect()
            for i, f in enumerate(feats)
        ]
    )
    decided = ds.decide_shared(records, shared, old_frame, labels, n_new)
    foreign = ds.foreign_index_rows(decided, [f.state["nodes"] for f in feats])
    counters = {"candidate_pairs": candidates.height, "verified_pairs": verified.height}
    apply_inputs, apply_params = [], []
    for i, (path, f) in enumerate(zip(shards, feats, strict=True)):
        mine = decided.filter((pl.col("shard") == i) & pl.col("_reason").is_not_null())
        theirs = foreign.filter(pl.col("shard") == i).drop("shard")
        apply_inputs.append(
            {
                "frame": [path],
                "features": [f.kept],
                "nodes": [sources[i][0]],
                "ids": [sources[i][1]],
                "decisions": [
                    d.save(f"decisions-{i}", mine.select("local_row", "_reason", "_duplicate_of"))
                ]
                if mine.height
                else [],
                "foreign": [d.save(f"foreign-{i}", theirs)] if theirs.height else [],
            }
        )
        apply_params.append({"counters": counters if i == 0 else {}})
    return [o["dedup"] for o in d.map("dedup.apply", apply_inputs, apply_params)]
