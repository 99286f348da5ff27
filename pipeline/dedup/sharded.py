"""The dedup stage over shards, step by step through a `Runner` (see pipeline/dedup/steps.py).

Per shard and per partition steps go through `Runner.map`; the driver reads only small
columns (node keys and counts, verified edges, the ranking columns of records in clusters
of more than one record), never a candidate pair, a signature or a node's features, and
writes the small tables the next steps read, named by their content so cached steps rerun
when their inputs change.
The result equals the single-frame reference `tests/pipeline/dedup/oracle.py:dedup` over the
shards' records in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.dedup import steps as ds
from pipeline.dedup.clusters import decide_clusters
from pipeline.dedup.verify import PAIR_COUNTERS
from pipeline.execution.keys import step_key
from pipeline.execution.step import Call, Runner
from schemas.config import PipelineConfig
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


def _is_in(frame: pl.DataFrame, column: str, values: pl.Series | np.ndarray) -> pl.DataFrame:
    """Rows of `frame` whose `column` is one of `values` (a semi join)."""
    other = pl.DataFrame({column: values}).with_columns(pl.col(column).cast(frame.schema[column]))
    return frame.join(other, on=column, how="semi", maintain_order="left")


def _run_nodes(nodes: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The run's nodes, its distinct keys in order of first record (key, shard, local, node,
    n_records over the run), from the shards' `nodes` tables; and the requests (from, node,
    to, use) for the index row of each key a shard holds but did not introduce."""
    keys = pl.concat(
        [
            pl.read_parquet(path, columns=["key", "n_records"]).with_columns(
                pl.lit(i, pl.Int64).alias("shard"), pl.int_range(pl.len()).alias("local")
            )
            for i, path in enumerate(nodes)
        ]
    )
    first = keys.unique("key", keep="first", maintain_order=True).drop("n_records")
    first = first.with_columns(pl.int_range(pl.len()).alias("node"))
    borrowed = (
        keys.join(first.select("key", "node", pl.col("shard").alias("from")), on="key")
        .filter(pl.col("shard") != pl.col("from"))
        .select("from", "node", pl.col("shard").alias("to"), use=pl.lit("index"))
    )
    counts = keys.group_by("key").agg(pl.col("n_records").sum())
    return first.join(counts, on="key", maintain_order="left"), borrowed


def _sources(
    d: _Driver, feats: list[StageOutput], first: pl.DataFrame, published: list[StageOutput]
) -> tuple[list[dict[str, list[str]]], list[int]]:
    """Step inputs (nodes, signatures, ids: local row -> node) of each source of nodes, and
    its node count: each shard (the nodes it introduced), then each part of the index, whose
    nodes follow the new ones. A source's nodes have consecutive ids."""
    by_shard = first.select("shard", "local", "node").partition_by("shard", as_dict=True)
    empty_ids = pl.DataFrame(schema={"local": pl.Int64, "node": pl.Int64})
    src_inputs, sizes = [], []
    for i, f in enumerate(feats):
        ids = by_shard.pop((i,), empty_ids).drop("shard", strict=False)
        sizes.append(ids.height)
        src_inputs.append(
            {
                "nodes": [f.state["nodes"]],
                "signatures": [f.state["signatures"]],
                "ids": [d.save(f"ids-{i}", ids)],
            }
        )
    start = first.height
    for j, o in enumerate(published):
        size = pl.scan_parquet(o.kept).select(pl.len()).collect().item()
        ids = pl.DataFrame({"local": np.arange(size), "node": start + np.arange(size)})
        start += size
        sizes.append(size)
        src_inputs.append(
            {
                "nodes": [o.kept],
                "signatures": [o.state["signatures"]],
                "ids": [d.save(f"index-ids-{j}", ids)],
            }
        )
    return src_inputs, sizes


def _labelled(outputs: list[dict[str, StageOutput]], label: str) -> list[StageOutput]:
    """The outputs named `label` of the steps that have one, in step order."""
    return [o[label] for o in outputs if label in o]


def _import_groups(shard: int, imports: dict[int, StageOutput], budget: int) -> list[list[int]]:
    """The sources whose pairs with `shard` its verify step decides together, a group at a
    time: the shard's own first, then the exporters in order, at most about `budget`
    imported rows a group (what the step holds besides the shard's own nodes)."""
    groups, rows = [[shard]], 0
    for source, out in sorted(imports.items()):
        n = out.counters["rows"]
        if rows and rows + n > budget:
            groups.append([])
            rows = 0
        groups[-1].append(source)
        rows += n
    return groups


def _verify(
    d: _Driver,
    src_inputs: list[dict[str, list[str]]],
    pairs: list[dict[str, StageOutput]],
    borrowed: pl.DataFrame,
    starts: list[int],
    budget: int,
) -> tuple[np.ndarray, np.ndarray, dict[str, int], list[dict[str, StageOutput]]]:
    """The verified edges among the candidate `pairs` (routed by the pair steps), the
    counters, and the rows each source exported. Each shard verifies the pairs whose smaller
    node it introduced, in one step that reads its own nodes once and the rows other sources
    export to it a group of sources at a time: the far node of such a pair, as the pair
    steps asked. The `borrowed` requests (the first node of each key a shard holds but did
    not introduce: its records' index row) go to the same export steps."""
    by_source = borrowed.partition_by("from", as_dict=True, include_key=False)
    requests = [
        [o.kept for o in _labelled(pairs, f"from-{t:05d}/requests")]
        + ([d.save(f"borrowed-{t}", by_source[(t,)])] if (t,) in by_source else [])
        for t in range(len(src_inputs))
    ]
    exporters = [t for t, asked in enumerate(requests) if asked]
    exported = d.map(
        "dedup.export",
        [{**src_inputs[t], "requests": requests[t]} for t in exporters],
        [{}] * len(exporters),
    )
    calls, params = [], []
    for i in range(len(src_inputs)):  # a published record is never a pair's smaller node
        label = f"to-{i:05d}/pairs"
        routed = [o.kept for o in _labelled(pairs, label)]
        if not routed:
            continue
        imports = {t: o[label] for t, o in zip(exporters, exported, strict=True) if label in o}
        groups = [
            {
                "sources": group,
                "imported": [imports[t].kept for t in group if t in imports],
                "imported_signatures": [
                    imports[t].state["signatures"] for t in group if t in imports
                ],
            }
            for group in _import_groups(i, imports, budget)
        ]
        calls.append({**src_inputs[i], "pairs": routed})
        params.append({"groups": groups, "starts": starts})
    checked = d.map("dedup.verify", calls, params)
    counters = dict.fromkeys(("candidate_pairs", *PAIR_COUNTERS), 0)
    for c in checked:
        for name in counters:
            counters[name] += c["edges"].counters[name]
    edges = pl.concat([ds.EDGES] + [pl.read_parquet(c["edges"].kept) for c in checked])
    return edges["u"].to_numpy(), edges["v"].to_numpy(), counters, exported


def _published_clusters(
    components: pl.DataFrame, published: list[StageOutput], sizes: list[int], start: int
) -> pl.DataFrame:
    """(old_id, content_hash, cluster) of the published records in `components` (node,
    cluster); the index parts' nodes are numbered from `start` on, `sizes` nodes each."""
    frames = [
        pl.DataFrame(schema={"old_id": pl.String, "content_hash": pl.UInt64, "cluster": pl.Int64})
    ]
    for o, size in zip(published, sizes, strict=True):
        mine = components.filter(pl.col("node").is_between(start, start + size - 1))
        local = mine.select((pl.col("node") - start).cast(pl.UInt32).alias("local"), "cluster")
        frames.append(
            pl.read_parquet(o.kept, columns=["record_id", "content_hash"])
            .with_row_index("local")
            .join(local, on="local")
            .select(pl.col("record_id").alias("old_id"), "content_hash", "cluster")
        )
        start += size
    return pl.concat(frames)


def dedup_shards(
    runner: Runner,
    work: Path,
    shards: list[str],
    index: list[str],
    cfg: PipelineConfig,
    base: tuple[str, ...],
) -> list[StageOutput]:
    """The dedup stage over `shards` (filtered records, in order) against the published
    index, given in parts (Parquet files named by their content): one `dedup` output per
    shard, its state holding the index rows of the shard's kept records."""
    if not shards:
        return []
    run = step_key("dedup.run", *shards, *index, *base)
    d = _Driver(runner, work / "dedup", run[:24], base)
    feats = [
        o["features"]
        for o in d.map("dedup.nodes", [{"records": [p]} for p in shards], [{}] * len(shards))
    ]
    rows = [pl.scan_parquet(p).select(pl.len()).collect().item() for p in shards]
    decisions, counters, exported = _decisions(d, feats, index, rows, cfg)
    apply_inputs, apply_params = [], []
    for i, (path, f) in enumerate(zip(shards, feats, strict=True)):
        foreign = _labelled(exported, f"to-{i:05d}/index")
        apply_inputs.append(
            {
                "records": [path],
                "features": [f.kept],
                "nodes": [f.state["nodes"]],
                "signatures": [f.state["signatures"]],
                "foreign": [o.kept for o in foreign],
                "foreign_signatures": [o.state["signatures"] for o in foreign],
                "decisions": decisions[i],
            }
        )
        apply_params.append({"counters": counters if i == 0 else {}})
    return [o["dedup"] for o in d.map("dedup.apply", apply_inputs, apply_params)]


def _decisions(
    d: _Driver, feats: list[StageOutput], index: list[str], rows: list[int], cfg: PipelineConfig
) -> tuple[list[list[str]], dict[str, int], list[dict[str, StageOutput]]]:
    """The decisions table of each shard (local_row, _reason, _duplicate_of of its records in
    clusters decided here; none where it has none), the stage's counters, and the export
    steps' outputs. Its tables over the whole run (nodes, components, ranked records) are
    freed on return, before the apply steps run."""
    published = [
        o["nodes"] for o in d.map("dedup.index", [{"index": [p]} for p in index], [{}] * len(index))
    ]
    first, borrowed = _run_nodes([f.state["nodes"] for f in feats])
    src_inputs, sizes = _sources(d, feats, first, published)
    starts = np.cumsum([0, *sizes])[:-1].tolist()
    pairs = _candidates(d, src_inputs, starts, sum(sizes), first.height, cfg)
    budget = cfg.execution.shard_rows
    eu, ev, decided, exported = _verify(d, src_inputs, pairs, borrowed, starts, budget)
    exact = _exact_edges(first, published)
    eu = np.concatenate([eu, exact.get_column("u").to_numpy()])
    ev = np.concatenate([ev, exact.get_column("v").to_numpy()])
    components = ds.clusters(eu, ev)
    old_clusters = _published_clusters(components, published, sizes[len(feats) :], first.height)
    records = _clustered_records(feats, first, components, old_clusters, rows)
    verdicts = decide_clusters(records, old_clusters, ("row", "shard", "local_row"))
    empty_content = sum(rows) - sum(
        pl.scan_parquet(f.kept).select(pl.len()).collect().item() for f in feats
    )
    return (
        _saved_decisions(d, verdicts, len(feats)),
        {"empty_content": empty_content, **decided},
        exported,
    )


def _candidates(
    d: _Driver,
    src_inputs: list[dict[str, list[str]]],
    starts: list[int],
    n_nodes: int,
    n_new: int,
    cfg: PipelineConfig,
) -> list[dict[str, StageOutput]]:
    """The candidate-pair steps' outputs: each source's bucket entries, split into
    partitions of about `dedup_partition_entries` entries, then each partition's pairs
    (routed to the shards that verify them). The new nodes are the first `n_new` of the
    run's `n_nodes`."""
    bits = max((n_nodes - 1).bit_length(), 1)
    parts = ds.partition_bits(n_nodes, cfg.execution.dedup_partition_entries, cfg.dedup)
    params = {"bits": bits, "parts": parts}
    buckets = d.map("dedup.buckets", src_inputs, [params] * len(src_inputs))
    labels = [f"part-{k:05d}/buckets" for k in range(1 << parts)]
    return d.map(
        "dedup.pairs",
        [{"buckets": [b[label].kept for b in buckets]} for label in labels],
        [{"bits": bits, "starts": starts, "n_new": n_new}] * len(labels),
    )


def _exact_edges(first: pl.DataFrame, published: list[StageOutput]) -> pl.DataFrame:
    """Edges (u, v) from each new node to the published nodes with its key (an exact
    duplicate of a published record); the published nodes follow the new ones."""
    old_keys = pl.concat(
        [pl.DataFrame(schema={"key": pl.UInt64})]
        + [pl.read_parquet(o.kept, columns=["key"]) for o in published]
    ).with_columns((first.height + pl.int_range(pl.len())).alias("v"))
    exact = first.select("key", pl.col("node").alias("u")).join(old_keys, on="key")
    return exact.sort("u", "v")


def _clustered_records(
    feats: list[StageOutput],
    first: pl.DataFrame,
    components: pl.DataFrame,
    old_clusters: pl.DataFrame,
    rows: list[int],
) -> pl.DataFrame:
    """The records (shard, local_row, run-wide row, their `features` columns, cluster) of
    the clusters decided here: of more than one record, or holding a published record."""
    nodes = first.join(components, on="node", how="left")
    nodes = nodes.with_columns(pl.col("cluster").fill_null(pl.col("node")))
    sizes = nodes.group_by("cluster").agg(pl.col("n_records").sum().alias("size"))
    shared_clusters = pl.concat(
        [
            sizes.filter(pl.col("size") > 1).get_column("cluster"),
            old_clusters.get_column("cluster"),
        ]
    ).unique()
    shared = _is_in(nodes, "cluster", shared_clusters).select("key", "node", "cluster")
    offsets = np.cumsum([0, *rows]).tolist()
    return pl.concat(
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


def _saved_decisions(d: _Driver, verdicts: pl.DataFrame, n_shards: int) -> list[list[str]]:
    """Per shard, the driver table of the verdicts on its records (none where it has none)."""
    mine_by_shard = verdicts.partition_by("shard", as_dict=True, include_key=False)
    return [
        [
            d.save(
                f"decisions-{i}",
                mine_by_shard[(i,)].select("local_row", "_reason", "_duplicate_of"),
            )
        ]
        if (i,) in mine_by_shard
        else []
        for i in range(n_shards)
    ]
