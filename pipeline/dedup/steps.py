"""The dedup stage in steps over shards, none holding every record.

1. `shard_nodes` (per shard): each record's completeness features and node key, and the
   shard's distinct nodes (first record of each key) with signature, guard sets and evidence.
   `index_nodes` (per part of the published index): the same for the published records.
2. `node_buckets` (per shard, and per part of the published index): LSH bucket entries of
   the nodes the shard introduces (`pipeline.dedup.lsh.bucket_entries`) with run-wide node
   ids, split by their top bits into partitions (a bucket never spans two).
3. `partition_pairs` (per partition): candidate pairs (`pipeline.dedup.lsh.candidate_pairs`).
4. `export_nodes` (per source of nodes): the rows other shards asked for, one table per
   asking shard: the far node of each candidate pair a shard verifies, and the run's first
   node of each key a shard holds but did not introduce.
5. `verify_pairs` (per shard): the candidate pairs whose smaller node the shard introduced,
   decided on its own nodes (read once) and the rows exported to it, read a group of
   exporters at a time (`pipeline.dedup.verify.decide_pairs`).
6. The driver (pipeline.dedup.sharded) takes components over the verified edges and picks
   the kept record of each cluster holding more than one record
   (`pipeline.dedup.clusters.decide_clusters`), reading only those records' small feature
   columns.
7. `apply_decisions` (per shard): kept rows, rejects and index rows of the shard.

The result equals the single-frame reference `tests/pipeline/dedup/oracle.py:dedup` on the
shards' records concatenated in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import polars as pl

from pipeline.core.errors import StateError
from pipeline.core.stage import StageResult, empty_rejects, make_rejects, stage_result
from pipeline.dedup.clusters import RANK
from pipeline.dedup.content import batch_features, new_nodes, node_keys
from pipeline.dedup.hashing import set_hashes
from pipeline.dedup.lsh import bucket_entries, candidate_pairs, components, distinct_pairs
from pipeline.dedup.minhash import text_signatures
from pipeline.dedup.verify import EVIDENCE, decide_pairs, evidence
from schemas.dedup import DedupConfig, index_schema

STAGE = "dedup"

MAX_PARTITION_BITS = 8  # at most 2^8 partitions of bucket entries
_RECORDS = pl.DataFrame(
    schema={
        "row": pl.Int64,
        "record_id": pl.String,
        "key": pl.UInt64,
        "content_hash": pl.UInt64,
        **dict.fromkeys(("n_parts", "cause_len", "content_len"), pl.Int64),
        "has_codes": pl.Boolean,
    }
).select("row", "record_id", "key", "content_hash", *RANK)
EDGES = pl.DataFrame(schema={"u": pl.Int64, "v": pl.Int64})


def _side(kept: pl.DataFrame, **state: pl.DataFrame) -> StageResult:
    return StageResult(kept, empty_rejects(), {}, dict(state))


def _node_frame(cfg: DedupConfig) -> pl.DataFrame:
    """Columns of a `nodes` table: a node's key, its records in the shard, and its index row
    but the signature (kept apart in a `signatures` table)."""
    schema = {"key": pl.UInt64(), "n_records": pl.Int64(), **index_schema(cfg.num_perm)}
    return pl.DataFrame(schema={c: t for c, t in schema.items() if c != "signature"})


def flat_signatures(sig: np.ndarray) -> pl.DataFrame:
    """Signatures (nodes × num_perm) as one UInt32 column, row after row: Parquet reads a
    plain column several times faster than a fixed-size list column."""
    return pl.DataFrame({"value": sig.ravel()}, schema={"value": pl.UInt32})


def signature_rows(flat: pl.DataFrame | None, cfg: DedupConfig) -> np.ndarray:
    """`flat_signatures` back as nodes × num_perm."""
    values = flat.get_column("value").to_numpy() if flat is not None else np.empty(0, np.uint32)
    return values.reshape(-1, cfg.num_perm)


def with_signatures(nodes: pl.DataFrame, sig: np.ndarray, cfg: DedupConfig) -> pl.DataFrame:
    """`nodes` with their signatures as the index's `signature` column."""
    return nodes.with_columns(pl.Series("signature", sig, pl.Array(pl.UInt32, cfg.num_perm)))


def shard_nodes(frame: pl.DataFrame | None, cfg: DedupConfig) -> dict[str, StageResult]:
    """Per record of a shard (with content): row, record_id, node key and ranking features;
    state `nodes`: the shard's distinct nodes in order of first record, and `signatures`
    theirs (`flat_signatures`). Worked `cfg.batch_size` records at a time
    (`pipeline.dedup.content.batch_features`)."""
    df = frame if frame is not None else pl.DataFrame({"record_id": []}, {"record_id": pl.String})
    seen = np.empty(0, dtype=np.uint64)  # node keys of earlier batches, ascending
    sig = np.empty((df.height, cfg.num_perm), dtype=np.uint32)
    records, reps, batch_nodes = [], [], []
    n_rep = 0
    for lo, f in batch_features(df, cfg):
        key = node_keys(f["content_hash"], f["codes_hash"], f["machine_hash"])
        rep, seen = new_nodes(key, f["n_parts"], seen)
        at = np.flatnonzero(rep)
        out = sig[n_rep : n_rep + len(at)]
        text_signatures(f["cps"], f["starts"][at], f["lengths"][at], cfg, out)
        n_rep += len(at)
        reps.append(lo + at)
        batch_nodes.append(_batch_nodes(f, key, at))
        records.append(_batch_records(f, key, lo))
    recs = _shard_records(records, df)
    rep = np.concatenate([np.empty(0, np.int64), *reps])
    nodes = _shard_node_frame(df, batch_nodes, rep, recs, cfg)
    return {"features": _side(recs, nodes=nodes, signatures=flat_signatures(sig[:n_rep]))}


def _batch_nodes(f: dict, key: np.ndarray, at: np.ndarray) -> pl.DataFrame:
    """Key, hashes and guard sets of the nodes a batch introduces (its records `at`)."""
    return pl.DataFrame(
        {
            "key": key[at],
            "content_hash": f["content_hash"][at],
            "machine_hash": f["machine_hash"][at],
            "codes": f["codes"].gather(at),
            "numbers": f["numbers"].gather(at),
        }
    )


def _batch_records(f: dict, key: np.ndarray, lo: int) -> pl.DataFrame:
    """Row in the shard, node key, content hash and ranking features of a batch's records."""
    return pl.DataFrame(
        {
            "row": np.arange(lo, lo + len(key), dtype=np.int64),
            "key": key,
            "content_hash": f["content_hash"],
            **{c: f[c] for c in RANK},
        }
    )


def _shard_records(records: list[pl.DataFrame], df: pl.DataFrame) -> pl.DataFrame:
    """The shard's records with content (`_RECORDS` columns), in order."""
    recs = pl.concat(records).with_columns(df.get_column("record_id")) if records else _RECORDS
    return recs.select(_RECORDS.columns).cast(_RECORDS.schema).filter(pl.col("n_parts") > 0)


def _shard_node_frame(
    df: pl.DataFrame,
    batch_nodes: list[pl.DataFrame],
    rep: np.ndarray,
    recs: pl.DataFrame,
    cfg: DedupConfig,
) -> pl.DataFrame:
    """The shard's nodes (`_node_frame`): the batches' nodes with the record_id and
    evidence of their first record (`rep`: its row) and their records in the shard."""
    if not batch_nodes:
        return _node_frame(cfg)
    counts = recs.group_by("key").len("n_records")
    nodes = pl.concat(batch_nodes).with_columns(
        pl.Series("record_id", df.get_column("record_id").gather(rep)),
        pl.lit(cfg.sig_key()).alias("sig_key"),
        *evidence(df, rep, cfg).values(),
    )
    nodes = nodes.join(counts, on="key", how="left", maintain_order="left")
    return nodes.select(_node_frame(cfg).columns).cast(_node_frame(cfg).schema)


def check_index(index: pl.DataFrame, cfg: DedupConfig) -> None:
    """A published index built with other signature settings cannot be compared with this
    run's records: refused in one line."""
    expected = index_schema(cfg.num_perm)
    problems = [
        f"{c}: expected {t}, got {index.schema.get(c)}"
        for c, t in expected.items()
        if index.schema.get(c) != t
    ]
    if problems:
        raise StateError("dedup index does not match this configuration: " + "; ".join(problems))
    keys = index.get_column("sig_key").unique().to_list()
    if index.height and keys != [cfg.sig_key()]:
        raise StateError(
            f"dedup index was built with {keys}, this configuration needs {cfg.sig_key()!r}; "
            "rebuild the index or restore the signature settings"
        )


def index_nodes(index: pl.DataFrame | None, cfg: DedupConfig) -> dict[str, StageResult]:
    """A part of the published index as nodes (key, no records of this run; record_id kept),
    their signatures apart (`flat_signatures`, state `signatures`)."""
    index = index if index is not None else pl.DataFrame(schema=index_schema(cfg.num_perm))
    check_index(index, cfg)
    key = node_keys(
        index.get_column("content_hash").to_numpy(),
        set_hashes(index.get_column("codes")),
        index.get_column("machine_hash").to_numpy(),
    )
    sig = flat_signatures(index.get_column("signature").to_numpy())
    nodes = index.select(index_schema(cfg.num_perm).keys()).drop("signature")
    nodes = nodes.with_columns(pl.Series("key", key), pl.lit(0, pl.Int64).alias("n_records"))
    return {"nodes": _side(nodes, signatures=sig)}


def partition_bits(n_nodes: int, budget: int, cfg: DedupConfig) -> int:
    """Partitions (2^bits) of the run's bucket entries so that one holds at most about
    `budget` entries (at most 2^MAX_PARTITION_BITS partitions)."""
    entries = n_nodes * (cfg.bands + cfg.moderate_bands)
    wanted = -(-entries // max(budget, 1))
    return min(max(wanted - 1, 0).bit_length(), MAX_PARTITION_BITS)


def node_buckets(
    nodes: pl.DataFrame,
    signatures: pl.DataFrame | None,
    ids: pl.DataFrame,
    bits: int,
    parts: int,
    cfg: DedupConfig,
) -> dict[str, StageResult]:
    """Bucket entries (bucket << bits | node id) of the nodes at `ids` (local -> node), as
    `bucket_entries` packs them, one `part-<k>/buckets` per partition (by the top `parts`
    bits: every entry of a bucket lands in one partition)."""
    local = ids.get_column("local").to_numpy()
    node = ids.get_column("node").to_numpy().astype(np.uint64)
    sig = signature_rows(signatures, cfg)
    machine = nodes.get_column("machine_hash").to_numpy()
    packed = bucket_entries(sig, local, machine, bits, cfg)
    # local row -> run-wide node id in the low bits
    to_node = np.zeros(len(sig), dtype=np.uint64)
    to_node[local] = node
    low = (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
    packed = (packed & ~low) | to_node[(packed & low).astype(np.int64)]
    if not parts:
        return {"part-00000/buckets": _side(pl.DataFrame({"packed": packed}))}
    part = (packed >> np.uint64(64 - parts)).astype(np.uint16)
    order = np.argsort(part, kind="stable")  # a radix sort of 16-bit keys
    cuts = np.searchsorted(part[order], np.arange((1 << parts) + 1))
    packed = packed[order]
    return {
        f"part-{k:05d}/buckets": _side(pl.DataFrame({"packed": packed[lo:hi]}))
        for k, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:], strict=True))
    }


def partition_pairs(
    buckets: pl.DataFrame | None, bits: int, starts: list[int], n_new: int, cfg: DedupConfig
) -> dict[str, StageResult]:
    """Candidate pairs (u < v, node ids) of one partition's bucket entries, routed to the
    shard that verifies them (the source of u; source k's nodes are numbered from
    `starts[k]` on): `to-<shard>/pairs`; and the far nodes that shard asks other sources for
    (node, to, use): `from-<source>/requests`."""
    packed = (
        buckets.get_column("packed").to_numpy().copy()
        if buckets is not None
        else np.empty(0, dtype=np.uint64)
    )
    u, v = candidate_pairs(packed, bits, cfg.pair_window, n_new)
    pairs = pl.DataFrame(
        {"u": u, "v": v, "to": source_of(u, starts), "from": source_of(v, starts)},
        schema={"u": pl.Int64, "v": pl.Int64, "to": pl.Int64, "from": pl.Int64},
    )
    out = {
        f"to-{to:05d}/pairs": _side(rows.select("u", "v"))
        for (to,), rows in pairs.partition_by("to", as_dict=True).items()
    }
    far = pairs.filter(pl.col("from") != pl.col("to"))
    far = far.select("from", pl.col("v").alias("node"), "to", use=pl.lit("pairs")).unique()
    for (source,), rows in far.partition_by("from", as_dict=True).items():
        out[f"from-{source:05d}/requests"] = _side(rows.drop("from"))
    return out


def source_of(node: np.ndarray, starts: list[int]) -> np.ndarray:
    """The source (shard, then part of the published index) of each node id; source k's
    nodes are numbered from `starts[k]` on (an empty source starts where the next does)."""
    return np.searchsorted(np.asarray(starts, dtype=np.int64), node, "right") - 1


def _numbered(nodes: pl.DataFrame, ids: pl.DataFrame) -> pl.DataFrame:
    """`nodes` with their run-wide `node` id (`ids`: local row -> node) and `local` row,
    only the nodes that have one."""
    return (
        nodes.with_row_index("local")
        .with_columns(pl.col("local").cast(pl.Int64))
        .join(ids, on="local", maintain_order="right")
    )


def export_nodes(
    nodes: pl.DataFrame,
    signatures: pl.DataFrame | None,
    ids: pl.DataFrame,
    requests: pl.DataFrame,
    cfg: DedupConfig,
) -> Iterator[tuple[str, StageResult]]:
    """The rows of the nodes asked for (`requests`: node, to, use), one `to-<shard>/<use>`
    per asking shard and use, in node order: the node's id and columns, with its signature
    apart (`flat_signatures`, state `signatures`). Yielded one table at a time: only the
    requests are joined, each table's rows are gathered when it is written."""
    own = _numbered(nodes, ids)
    local = own.get_column("local").to_numpy()
    own = own.drop("local")
    requests = requests.unique().sort("to", "use", "node")
    at = own.select("node").with_row_index("at").join(requests, on="node", maintain_order="right")
    sig = signature_rows(signatures, cfg)
    for (to, use), asked in at.partition_by("to", "use", as_dict=True).items():
        rows = asked.get_column("at").to_numpy()
        picked = flat_signatures(sig[local[rows]])
        yield (
            f"to-{to:05d}/{use}",
            StageResult(own[rows], empty_rejects(), {"rows": len(rows)}, {"signatures": picked}),
        )


def verify_pairs(
    nodes: pl.DataFrame,
    signatures: pl.DataFrame | None,
    ids: pl.DataFrame,
    pairs: pl.DataFrame,
    groups: Iterable[tuple[list[int], pl.DataFrame | None, pl.DataFrame | None]],
    starts: list[int],
    cfg: DedupConfig,
) -> dict[str, StageResult]:
    """The verified `edges` (u < v) among the candidate `pairs` routed to the shard (several
    partitions may find one pair), on the shard's own nodes (`ids`: local -> node) and the
    rows other sources exported to it, a group at a time: `groups` gives each group's
    sources (see `source_of`), their exported rows and signatures; a group decides the pairs
    whose far node is in one of its sources. Counters: distinct candidate pairs and verdicts."""
    u, v = distinct_pairs(pairs.get_column("u").to_numpy(), pairs.get_column("v").to_numpy())
    far_source = source_of(v, starts)
    own, own_sig = _numbered(nodes, ids), signature_rows(signatures, cfg)
    edges, counters = [EDGES], {"candidate_pairs": len(u)}
    for sources, imported, imported_signatures in groups:
        mine = np.isin(far_source, sources)
        far = (imported, signature_rows(imported_signatures, cfg)) if imported is not None else None
        out = _decide_group(own, own_sig, far, u[mine], v[mine], cfg)
        edges.append(out.pop("edges"))
        for name, n in out.items():
            counters[name] = counters.get(name, 0) + n
    return {"edges": StageResult(pl.concat(edges), empty_rejects(), counters)}


def _decide_group(
    own: pl.DataFrame,
    own_sig: np.ndarray,
    far: tuple[pl.DataFrame, np.ndarray] | None,
    u: np.ndarray,
    v: np.ndarray,
    cfg: DedupConfig,
) -> dict:
    """`decide_pairs` on the pairs (u, v) of node ids, over the shard's `own` nodes
    (`_numbered`) and signatures and the `far` rows imported for them: the merged pairs as
    `edges`, and the verdict counters."""
    wanted = pl.DataFrame({"node": np.unique(np.concatenate([u, v]))})
    near = own.join(wanted, on="node", how="semi", maintain_order="left")
    local = near.get_column("local").to_numpy()
    n_far = len(far[1]) if far is not None else 0
    sig = np.empty((len(local) + n_far, cfg.num_perm), np.uint32)
    np.take(own_sig, local, axis=0, out=sig[: len(local)])
    if far is not None:
        sig[len(local) :] = far[1]
    rows = [near.drop("local")] + ([far[0]] if far is not None else [])
    both = pl.concat(rows, how="diagonal_relaxed")
    node = both.get_column("node").to_numpy()
    order = np.argsort(node, kind="stable")
    at = (
        order[np.searchsorted(node, u, sorter=order)],
        order[np.searchsorted(node, v, sorter=order)],
    )
    features = {
        "machine": both.get_column("machine_hash").to_numpy(),
        "codes": both.get_column("codes"),
        "numbers": both.get_column("numbers"),
        **{c: both.get_column(c) for c in EVIDENCE},
    }
    out = decide_pairs(features, sig, *at, cfg)
    edges = pl.DataFrame({"u": node[out.pop("u")], "v": node[out.pop("v")]}, schema=EDGES.schema)
    return {"edges": edges, **out}


def clusters(u: np.ndarray, v: np.ndarray) -> pl.DataFrame:
    """(node, cluster) of the nodes on an edge; cluster: the smallest node of the component."""
    ids = np.unique(np.concatenate([u, v]))
    labels = components(len(ids), np.searchsorted(ids, u), np.searchsorted(ids, v))
    return pl.DataFrame({"node": ids, "cluster": ids[labels]})


def apply_decisions(
    frame: pl.DataFrame | None,
    features: pl.DataFrame,
    nodes: pl.DataFrame,
    signatures: pl.DataFrame | None,
    foreign: pl.DataFrame | None,
    foreign_signatures: pl.DataFrame | None,
    decisions: pl.DataFrame | None,
    cfg: DedupConfig,
    counters: dict[str, int],
) -> dict[str, StageResult]:
    """The shard's kept rows, rejects (`decisions`: local_row, _reason, _duplicate_of) and
    index rows of its kept records with content: from `foreign` (the run's first node of
    each key another source introduced) or else the shard's own `nodes` and `signatures`."""
    df = frame if frame is not None else pl.DataFrame({"record_id": []}, {"record_id": pl.String})
    decisions = (
        decisions
        if decisions is not None
        else pl.DataFrame(
            schema={"local_row": pl.Int64, "_reason": pl.String, "_duplicate_of": pl.String}
        )
    )
    rejected = decisions.filter(pl.col("_reason").is_not_null()).sort("local_row")
    rows = rejected.get_column("local_row").to_numpy()
    is_rejected = np.zeros(df.height, dtype=bool)
    is_rejected[rows] = True
    kept = df.filter(pl.Series(~is_rejected))
    rej = df.select(pl.all().gather(rows)).with_columns(
        rejected.get_column("_reason"), rejected.get_column("_duplicate_of")
    )
    rejects = make_rejects(
        rej, STAGE, reason=pl.col("_reason"), duplicate_of=pl.col("_duplicate_of")
    )
    mine = features.filter(~pl.Series(is_rejected).gather(features.get_column("row")))
    columns = [c for c in index_schema(cfg.num_perm) if c != "record_id"]
    keys = mine.select("key").unique()

    def of_kept_keys(rows: pl.DataFrame, sig: pl.DataFrame | None) -> pl.DataFrame:
        at = rows.with_row_index("at").join(keys, on="key", how="semi", maintain_order="left")
        picked = signature_rows(sig, cfg)[at.get_column("at").to_numpy()]
        return with_signatures(at.drop("at"), picked, cfg)

    nodes = of_kept_keys(nodes, signatures)
    if foreign is not None:
        nodes = pl.concat(
            [of_kept_keys(foreign.drop("node"), foreign_signatures), nodes], how="diagonal_relaxed"
        )
        nodes = nodes.unique("key", keep="first", maintain_order=True)  # the run's first wins
    index = (
        mine.select("record_id", "key")
        .join(nodes.select("key", *columns), on="key", how="left", maintain_order="left")
        .select(index_schema(cfg.num_perm).keys())
        .join(kept.select("record_id", "source_file"), on="record_id")
    )
    result = stage_result(kept, rejects, read=df.height, **counters)
    return {"dedup": StageResult(result.kept, result.rejected, result.counters, {"index": index})}
