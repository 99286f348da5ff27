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

from pipeline import dedup as dd
from pipeline import dedup_shards as ds
from pipeline.funnels.keys import step_key
from pipeline.funnels.steps import Call, Runner
from schemas.config import PipelineConfig
from schemas.dedup import DedupConfig
from schemas.manifest import StageOutput


@dataclass(frozen=True)
class _Driver:
    runner: Runner
    folder: Path
    run: str  # names the driver's tables: a key over everything they are computed from
    base: tuple[str, ...]

    def save(self, name: str, frame: pl.DataFrame) -> str:
        """Write a driver table, named by the run's key and its name."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{self.run}-{name}.parquet"
        frame.write_parquet(path)
        return str(path)

    def map(self, step: str, inputs: Sequence[dict[str, list[str]]], params: Sequence[dict]):
        calls = [
            Call(step, step_key(step, repr(sorted(i.items())), repr(p), *self.base), i, p)
            for i, p in zip(inputs, params, strict=True)
        ]
        return self.runner.map(calls)


def _index_digest(index: pl.DataFrame | None) -> str:
    """A fingerprint of the published index (a hash per row, then sha256 over them)."""
    if index is None:
        return "no index"
    rows = index.hash_rows(seed=0).to_numpy()
    return hashlib.sha256(rows.tobytes()).hexdigest() + str(index.schema)


def _is_in(frame: pl.DataFrame, column: str, values: pl.Series | np.ndarray) -> pl.DataFrame:
    """Rows of `frame` whose `column` is one of `values` (a semi join)."""
    other = pl.DataFrame({column: values}).with_columns(pl.col(column).cast(frame.schema[column]))
    return frame.join(other, on=column, how="semi", maintain_order="left")


def _picked_nodes(
    nodes: str, signatures: str, ids: pl.DataFrame, wanted: np.ndarray, cfg: DedupConfig
) -> tuple[pl.DataFrame, np.ndarray]:
    """The rows of a nodes table (with run-wide `node` id) whose node is wanted, and their
    signatures (nodes x num_perm), kept apart from the frame so that they are copied once."""
    picked = _is_in(
        pl.read_parquet(nodes)
        .with_row_index("local")
        .join(ids.with_columns(pl.col("local").cast(pl.UInt32)), on="local", maintain_order="left"),
        "node",
        wanted,
    )
    sig = ds.signature_rows(pl.read_parquet(signatures), cfg)
    return picked.drop("local"), sig[picked.get_column("local").to_numpy()]


def _decide(
    sources: list[tuple[str, str, pl.DataFrame]],
    u: np.ndarray,
    v: np.ndarray,
    wanted: np.ndarray,
    borrowed: pl.Series,
    cfg: DedupConfig,
) -> tuple[dict, pl.DataFrame]:
    """`decide_pairs` over the candidate pairs, reading the `wanted` nodes of each source
    once; and the rows of the `borrowed` nodes (without `node`). Sources come in node order
    (each shard's new nodes, then the published index's), so their rows are sorted only in
    case they are not."""
    parts = [_picked_nodes(n, sg, ids, wanted, cfg) for n, sg, ids in sources]
    picked = pl.concat([f for f, _ in parts], how="diagonal_relaxed")
    sig = np.concatenate([s for _, s in parts]) if parts else np.empty((0, cfg.num_perm))
    del parts
    node = picked.get_column("node").to_numpy()
    if len(node) > 1 and not (np.diff(node) > 0).all():
        order = np.argsort(node, kind="stable")
        picked, sig = picked[order], sig[order]
    decided = ds.decide_pairs(picked.drop("record_id"), sig, u, v, cfg)
    mine = np.isin(picked.get_column("node").to_numpy(), borrowed.to_numpy())
    foreign = ds.with_signatures(picked.filter(mine), sig[mine], cfg)
    return decided, foreign.drop("node")


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
    run = step_key("dedup.run", *shards, _index_digest(index), *base)
    d = _Driver(runner, work / "dedup", run[:24], base)
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

    by_shard = first.partition_by("shard", as_dict=True, include_key=False)
    empty_ids = pl.DataFrame(schema={"key": pl.UInt64, "local": pl.Int64, "node": pl.Int64})
    sources = [
        (f.state["nodes"], f.state["signatures"], by_shard.get((i,), empty_ids).drop("key"))
        for i, f in enumerate(feats)
    ]
    if old is not None:
        old_ids = pl.DataFrame({"local": np.arange(n_old), "node": n_new + np.arange(n_old)})
        old_sig = ds.flat_signatures(old.get_column("signature").to_numpy())
        sources.append(
            (
                d.save("old-nodes", old.drop("record_id", "signature")),
                d.save("old-signatures", old_sig),
                old_ids,
            )
        )
    src_inputs = [
        {"nodes": [n], "signatures": [sg], "ids": [d.save(f"ids-{i}", ids)]}
        for i, (n, sg, ids) in enumerate(sources)
    ]
    rows = [pl.scan_parquet(p).select(pl.len()).collect().item() for p in shards]
    parts = ds.partition_bits(n_new + n_old, cfg.execution.dedup_partition_entries, dcfg)
    params = {"bits": bits, "parts": parts}
    buckets = d.map("dedup.buckets", src_inputs, [params] * len(sources))
    labels = [f"part-{k:05d}/buckets" for k in range(1 << parts)]
    pairs = d.map(
        "dedup.pairs",
        [{"buckets": [b[label].kept for b in buckets]} for label in labels],
        [{"bits": bits, "n_new": n_new}] * len(labels),
    )
    u, v = ds.candidate_pairs([pl.read_parquet(p["pairs"].kept) for p in pairs])

    # one read of each source's nodes: the candidate pairs' nodes, and the nodes of keys
    # that more than one shard holds (a later shard's kept record takes the first's row)
    repeated = keys.group_by("key").len().filter(pl.col("len") > 1).select("key")
    borrowed = first.join(repeated, on="key", how="semi").get_column("node")
    wanted = np.unique(np.concatenate([u, v, borrowed.to_numpy()]))
    decided, foreign_nodes = _decide(sources, u, v, wanted, borrowed, dcfg)
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
    shared_clusters = pl.concat(
        [
            sizes.filter(pl.col("size") > 1).get_column("cluster"),
            old_clusters.get_column("cluster"),
        ]
    ).unique()
    shared = _is_in(nodes, "cluster", shared_clusters).select("key", "node", "cluster")
    offsets = np.cumsum([0, *rows]).tolist()
    records = pl.concat(
        [
            pl.scan_parquet(f.kept)
            .join(shared.lazy(), on="key")
            .with_columns(
                pl.lit(i, pl.Int64).alias("shard"),
                pl.col("row").alias("local_row"),
                pl.col("row") + offsets[i],
            )
            for i, f in enumerate(feats)
        ]
    ).collect()
    verdicts = dd.decide_clusters(records, old_clusters, ("row", "shard", "local_row"))

    # per shard: its rejects, and the run's first node rows of the keys it did not introduce
    empty_content = sum(rows) - sum(
        pl.scan_parquet(f.kept).select(pl.len()).collect().item() for f in feats
    )
    counters = {"empty_content": empty_content, "candidate_pairs": len(u), **decided}
    mine_by_shard = verdicts.partition_by("shard", as_dict=True, include_key=False)
    # a kept record whose key another shard introduced takes that first node's index row;
    # such a key has two records at least, so the record was decided above
    kept = records.select("row", "shard", "key").join(
        verdicts.filter(pl.col("_reason").is_null()).select("row"), on="row"
    )
    kept_by_shard = kept.partition_by("shard", as_dict=True, include_key=False)
    no_keys = pl.DataFrame(schema={"key": pl.UInt64})
    apply_inputs, apply_params = [], []
    for i, (path, f) in enumerate(zip(shards, feats, strict=True)):
        mine = mine_by_shard.get((i,))
        own = by_shard.get((i,), empty_ids)
        theirs = kept_by_shard.get((i,), no_keys).join(own, on="key", how="anti")
        foreign = _is_in(foreign_nodes, "key", theirs["key"])
        apply_inputs.append(
            {
                "records": [path],
                "features": [f.kept],
                "nodes": [f.state["nodes"]],
                "signatures": [f.state["signatures"]],
                "foreign": [d.save(f"foreign-{i}", foreign)] if foreign.height else [],
                "decisions": [
                    d.save(f"decisions-{i}", mine.select("local_row", "_reason", "_duplicate_of"))
                ]
                if mine is not None
                else [],
            }
        )
        apply_params.append({"counters": counters if i == 0 else {}})
    return [o["dedup"] for o in d.map("dedup.apply", apply_inputs, apply_params)]
