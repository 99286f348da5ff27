"""Dedup over shards: the same decisions as `pipeline.dedup.dedup` on the concatenated shards,
without ever holding all records (or all signatures) in one frame.

Steps (each one a plain function over Parquet tables; `*_step` run per shard or per band):

1. `features_step` (per shard): per-record hashes and completeness, and the shard's nodes
   (first record of each distinct content/codes/machine key) with their MinHash signatures.
2. `assign_nodes` (driver, over the small key columns): a key's node is its first occurrence
   in shard order; nodes are numbered in that order, then the published index's nodes.
3. `bands_step` (per node source): LSH bucket keys, one table per band.
4. `pairs_step` (per band): candidate pairs from that band's buckets.
5. `pair_sides_step` (per node source, for the pairs whose first node it holds), then
   `verify_step` (per node source, for the pairs whose second node it holds): signature
   agreement and guard, two hops so that no step needs another source's signatures.
6. `decide_clusters` (driver): components over the verified edges (and exact edges to the
   published index), then "keep the most complete record" over the records of clusters with
   more than one record only.
7. `apply_step` (per shard): kept rows, rejects and the shard's part of the new index.

Every decision comes from `pipeline.dedup` (`record_features`, `band_hashes`, `bucket_keys`,
`bucket_pairs`, `verify_pairs`, `components`, `decide`): the two paths cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import polars as pl

from pipeline.dedup import (
    STAGE,
    band_hashes,
    bucket_keys,
    bucket_pairs,
    check_index,
    components,
    decide,
    node_key,
    record_features,
    set_hashes,
    verify_pairs,
)
from pipeline.stage import StageResult, empty_rejects, make_rejects, stage_result
from schemas.dedup import DedupConfig, index_schema

_NODE_ATTRS = ("content_hash", "machine_hash", "codes", "numbers", "signature")
_PAIRS = {"u": pl.Int64, "v": pl.Int64}


def _result(table: pl.DataFrame, state: dict[str, pl.DataFrame] | None = None, **counters: int):
    return StageResult(table, empty_rejects(), {"rows": table.height, **counters}, state or {})


def _signature_column(sig: np.ndarray, num_perm: int) -> pl.Series:
    return pl.Series("signature", sig, dtype=pl.Array(pl.UInt32, num_perm))


def _signatures(nodes: pl.DataFrame, num_perm: int) -> np.ndarray:
    return nodes.get_column("signature").to_numpy().reshape(nodes.height, num_perm)


# ---------------------------------------------------------------- 1. features (per shard)


def features_step(records: pl.DataFrame, cfg: DedupConfig) -> dict[str, StageResult]:
    """Per-record features of one shard (`kept`) and its nodes (state `nodes`)."""
    f = record_features(records, cfg)
    keys = f.keys()
    table = pl.DataFrame(
        {
            "row": np.arange(records.height, dtype=np.int64),
            "record_id": records.get_column("record_id"),
            "key": keys,
            "content_hash": f.content_hash,
            "n_parts": f.n_parts,
            "has_codes": f.has_codes,
            "cause_len": f.cause_len,
            "content_len": f.content_len,
        }
    ).filter(pl.col("n_parts") > 0)
    reps = np.flatnonzero(f.is_rep)
    counts = table.group_by("key").agg(pl.len().cast(pl.Int64).alias("n_records"))
    nodes = (
        pl.DataFrame(
            {
                "local": np.arange(len(reps), dtype=np.int64),
                "key": keys[reps],
                "content_hash": f.content_hash[reps],
                "machine_hash": f.machine_hash[reps],
                "codes": pl.concat([pl.Series([], dtype=pl.List(pl.String)), *f.rep_codes]),
                "numbers": pl.concat([pl.Series([], dtype=pl.List(pl.String)), *f.rep_numbers]),
            }
        )
        .with_columns(_signature_column(f.sig[: f.n_new], cfg.num_perm))
        .join(counts, on="key", how="left", maintain_order="left")
    )
    empty = records.height - table.height
    return {"features": _result(table, {"nodes": nodes}, read=records.height, empty_content=empty)}


def old_nodes(index: pl.DataFrame, cfg: DedupConfig) -> pl.DataFrame:
    """The published index as a node source (its records are never rejected)."""
    check_index(index, cfg)
    keys = node_key(
        index.get_column("content_hash").to_numpy(),
        set_hashes(index.get_column("codes")),
        index.get_column("machine_hash").to_numpy(),
    )
    return index.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("local"),
        pl.Series("key", keys),
        *_NODE_ATTRS,
        pl.lit(0, dtype=pl.Int64).alias("n_records"),
        pl.col("record_id").alias("old_id"),
    )


def old_nodes_empty() -> pl.DataFrame:
    """No published index: no old nodes."""
    return pl.DataFrame(schema={"old_id": pl.String, "content_hash": pl.UInt64})


# ---------------------------------------------------------------- 2. node numbering (driver)


def assign_nodes(shard_keys: Sequence[pl.DataFrame]) -> tuple[list[pl.DataFrame], pl.DataFrame]:
    """Global node ids from each shard's node keys (`local`, `key`, `n_records`), in order.

    Returns per shard the (local, node) of the nodes it holds first, and one row per node:
    node, key, n_records (over all shards), shard.
    """
    frames = [
        keys.select("local", "key", "n_records").with_columns(pl.lit(i, pl.Int32).alias("shard"))
        for i, keys in enumerate(shard_keys)
    ]
    every = (
        pl.concat(frames)
        if frames
        else pl.DataFrame(
            schema={"local": pl.Int64, "key": pl.UInt64, "n_records": pl.Int64, "shard": pl.Int32}
        )
    )
    totals = every.group_by("key").agg(pl.col("n_records").sum().alias("total"))
    nodes = (
        every.filter(pl.col("key").is_first_distinct())
        .with_row_index("node")
        .with_columns(pl.col("node").cast(pl.Int64))
        .join(totals, on="key", how="left", maintain_order="left")
        .select("node", "key", pl.col("total").alias("n_records"), "shard", "local")
    )
    ids = [nodes.filter(pl.col("shard") == i).select("local", "node") for i in range(len(frames))]
    return ids, nodes


# ---------------------------------------------------------------- 3. bands (per node source)


def _held(nodes: pl.DataFrame, ids: pl.DataFrame) -> pl.DataFrame:
    """The nodes this source holds first, in node order, with their global id."""
    return nodes.join(ids, on="local", how="inner").sort("node")


def bands_step(nodes: pl.DataFrame, ids: pl.DataFrame, cfg: DedupConfig) -> Iterator:
    """LSH bucket keys of the source's nodes, one table per band (`band_<b>`)."""
    held = _held(nodes, ids)
    buckets = bucket_keys(band_hashes(_signatures(held, cfg.num_perm), cfg.bands, cfg.rows))
    node = held.get_column("node").to_numpy()
    for b in range(cfg.bands):
        table = pl.DataFrame({"bucket": buckets[:, b], "node": node})
        yield f"band_{b:03d}/bands", _result(table)


# ---------------------------------------------------------------- 4. pairs (per band)


def pairs_step(band: pl.DataFrame, n_new: int, cfg: DedupConfig) -> dict[str, StageResult]:
    """Candidate pairs of one band: buckets sorted, each bucket's nodes ascending."""
    ordered = band.sort("bucket", "node")
    u, v = bucket_pairs(
        ordered.get_column("node").to_numpy(),
        ordered.get_column("bucket").to_numpy(),
        cfg.pair_window,
        n_new,
    )
    return {"pairs": _result(pl.DataFrame({"u": u, "v": v}, schema=_PAIRS))}


def candidate_pairs(bands: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """Distinct candidate pairs over all bands (the driver's edge list), sorted."""
    return pl.concat([pl.DataFrame(schema=_PAIRS), *bands]).unique().sort("u", "v")


# ---------------------------------------------------------------- 5. verification


def source_of(nodes: pl.Series, starts: Sequence[int]) -> pl.Series:
    """Index of the node source holding each node (sources hold consecutive node ranges
    beginning at `starts`)."""
    at = np.searchsorted(np.asarray(starts, dtype=np.int64), nodes.to_numpy(), side="right") - 1
    return pl.Series("_source", at, dtype=pl.Int64)


def pair_sides_step(
    nodes: pl.DataFrame, ids: pl.DataFrame, pairs: pl.DataFrame | None, starts: Sequence[int]
) -> Iterator:
    """The first node's attributes of the pairs whose first node this source holds (`pairs`),
    one table per source holding the second node (`to_<source>`)."""
    if pairs is None:
        return
    held = _held(nodes, ids).select("node", *_NODE_ATTRS)
    mine = pairs.join(held.rename({"node": "u"}), on="u", how="inner", maintain_order="left")
    mine = mine.with_columns(source_of(mine.get_column("v"), starts))
    for (to,), part in mine.group_by("_source", maintain_order=True):
        yield f"to_{to:05d}/sides", _result(part.drop("_source"))


def verify_step(
    nodes: pl.DataFrame, ids: pl.DataFrame, sides: pl.DataFrame | None, cfg: DedupConfig
) -> dict[str, StageResult]:
    """Verified pairs among those whose second node this source holds."""
    if sides is None or sides.height == 0:
        return {"verified": _result(pl.DataFrame(schema=_PAIRS), candidates=0)}
    held = _held(nodes, ids).select("node", *_NODE_ATTRS)
    pairs = sides.join(
        held.rename({"node": "v"}), on="v", how="inner", suffix="_v", maintain_order="left"
    )
    m = pairs.height

    def both(name: str) -> pl.Series:
        return pl.concat([pairs.get_column(name), pairs.get_column(f"{name}_v").alias(name)])

    sig = np.concatenate(
        [
            _signatures(pairs.select("signature"), cfg.num_perm),
            _signatures(pairs.select(pl.col("signature_v").alias("signature")), cfg.num_perm),
        ]
    )
    ok = verify_pairs(
        sig,
        both("codes"),
        both("numbers"),
        both("machine_hash").to_numpy(),
        np.arange(m),
        m + np.arange(m),
        cfg,
    )
    verified = pairs.filter(pl.Series(ok)).select("u", "v")
    return {"verified": _result(verified, candidates=m)}


# ---------------------------------------------------------------- 6. decisions (driver)


def exact_to_old(nodes: pl.DataFrame, old: pl.DataFrame, n_new: int) -> pl.DataFrame:
    """Edges from new nodes to published records with the same key."""
    return (
        nodes.select("key", pl.col("node").alias("u"))
        .join(
            old.select("key", (pl.col("local") + n_new).alias("v")),
            on="key",
        )
        .select("u", "v")
        .sort("u", "v")
    )


def clusters(n_nodes: int, edges: pl.DataFrame) -> np.ndarray:
    """Each node's cluster: the smallest node of its component."""
    return components(n_nodes, edges.get_column("u").to_numpy(), edges.get_column("v").to_numpy())


def shared_clusters(nodes: pl.DataFrame, labels: np.ndarray, n_new: int) -> pl.DataFrame:
    """key, node, cluster of the new nodes whose cluster holds more than one record, or a
    published one: only their records need a decision; every other record is kept."""
    clustered = nodes.with_columns(pl.Series("cluster", labels[:n_new]))
    old_clusters = pl.Series("cluster", np.unique(labels[n_new:]))
    shared = clustered.group_by("cluster").agg(pl.col("n_records").sum().alias("in_cluster"))
    shared = shared.filter(
        (pl.col("in_cluster") > 1) | pl.col("cluster").is_in(old_clusters.implode())
    )
    return clustered.join(shared.select("cluster"), on="cluster", how="semi").select(
        "key", "node", "cluster", "shard", "local"
    )


def decide_shared(
    records: pl.DataFrame, shared: pl.DataFrame, old: pl.DataFrame, labels: np.ndarray, n_new: int
) -> pl.DataFrame:
    """`decide` over the records of shared clusters (`records`: features with `shard` and a
    global `row`); returns the decided rows with their shard and the node's home shard."""
    rec = records.join(
        shared.select("key", "node", "cluster", pl.col("shard").alias("home"), "local"), on="key"
    )
    old_nodes_frame = pl.DataFrame(
        {
            "old_id": old.get_column("old_id"),
            "content_hash": old.get_column("content_hash"),
            "cluster": labels[n_new:],
        },
        schema={"old_id": pl.String, "content_hash": pl.UInt64, "cluster": pl.Int64},
    )
    decided = decide(rec.drop("home", "local", "shard"), old_nodes_frame)
    return decided.join(
        rec.select("row", "shard", "home", "local", "local_row"), on="row", maintain_order="left"
    )


def foreign_index_rows(decided: pl.DataFrame, node_files: Sequence[str]) -> pl.DataFrame:
    """Index attributes of kept records whose node another shard holds: shard, row (in the
    record's shard) and the node's attributes, read from the node's shard."""
    away = decided.filter(pl.col("_reason").is_null() & (pl.col("home") != pl.col("shard")))
    parts = [pl.DataFrame(schema={"shard": pl.Int32, "row": pl.Int64})]
    for (home,), part in away.group_by("home", maintain_order=True):
        attrs = pl.scan_parquet(node_files[home]).filter(
            pl.col("local").is_in(part.get_column("local").implode())
        )
        parts.append(
            part.select("shard", pl.col("local_row").alias("row"), "local")
            .join(attrs.select("local", *_NODE_ATTRS).collect(), on="local", maintain_order="left")
            .drop("local")
        )
    return pl.concat(parts, how="diagonal_relaxed")


# ---------------------------------------------------------------- 7. apply (per shard)


def apply_step(
    frame: pl.DataFrame,
    features: pl.DataFrame,
    nodes: pl.DataFrame,
    ids: pl.DataFrame,
    decisions: pl.DataFrame | None,
    foreign: pl.DataFrame | None,
    cfg: DedupConfig,
    counters: dict[str, int],
) -> dict[str, StageResult]:
    """This shard's kept records, its duplicates rejected with the record they duplicate, and
    the index rows of its kept records (state `index`, with `source_file`)."""
    decisions = (
        decisions
        if decisions is not None
        else pl.DataFrame(
            schema={"local_row": pl.Int64, "_reason": pl.String, "_duplicate_of": pl.String}
        )
    )
    rejected_rows = decisions.filter(pl.col("_reason").is_not_null()).sort("local_row")
    is_rejected = np.zeros(frame.height, dtype=bool)
    is_rejected[rejected_rows.get_column("local_row").to_numpy()] = True
    kept = frame.filter(pl.Series(~is_rejected))
    rej = frame.select(pl.all().gather(rejected_rows.get_column("local_row"))).with_columns(
        rejected_rows.get_column("_reason"), rejected_rows.get_column("_duplicate_of")
    )
    rejects = make_rejects(
        rej, STAGE, reason=pl.col("_reason"), duplicate_of=pl.col("_duplicate_of")
    )
    held = _held(nodes, ids).select("key", *_NODE_ATTRS)
    kept_features = features.filter(
        ~pl.col("row").is_in(rejected_rows.get_column("local_row").implode())
    )
    local = kept_features.join(held, on="key", how="inner").select("row", *_NODE_ATTRS)
    index = pl.concat([local, *([foreign.select(local.columns)] if foreign is not None else [])])
    index = index.sort("row").join(
        frame.select(
            pl.int_range(pl.len(), dtype=pl.Int64).alias("row"), "record_id", "source_file"
        ),
        on="row",
        maintain_order="left",
    )
    schema = index_schema(cfg.num_perm)
    index = index.select(
        pl.col(c).cast(t) if c != "sig_key" else pl.lit(cfg.sig_key(), pl.String).alias(c)
        for c, t in schema.items()
    ).with_columns(index.get_column("source_file"))
    result = stage_result(kept, rejects, read=frame.height, **counters)
    return {"dedup": StageResult(result.kept, result.rejected, result.counters, {"index": index})}
