"""The dedup stage on one frame, all in memory: the reference the sharded stage
(pipeline.dedup.sharded) must equal, record for record, on the same records in order.

Built from the production pieces (content, minhash, lsh, verify, clusters) the way the
steps use them, but over every node at once: nodes are the distinct (content, alarm codes,
machine) of the new records, then the published index's records.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.core.stage import StageResult, make_rejects, stage_result
from pipeline.dedup.clusters import RANK, decide_clusters
from pipeline.dedup.content import batch_features, new_nodes, node_keys
from pipeline.dedup.hashing import set_hashes
from pipeline.dedup.lsh import bucket_entries, candidate_pairs, components
from pipeline.dedup.minhash import text_signatures
from pipeline.dedup.steps import STAGE, check_index
from pipeline.dedup.verify import EVIDENCE, decide_pairs, evidence
from schemas.dedup import DedupConfig, index_schema

_RECORD = {  # per record: its node's hashes and its ranking features
    "content_hash": np.uint64,
    "codes_hash": np.uint64,
    "machine_hash": np.uint64,
    "n_parts": np.int64,
    "has_codes": bool,
    "cause_len": np.int64,
    "content_len": np.int64,
}


def _candidates(
    sig: np.ndarray, machine: np.ndarray, n_new: int, cfg: DedupConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs among all nodes (`bucket_entries` of every node, one sort)."""
    if len(sig) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    bits = max((len(sig) - 1).bit_length(), 1)
    packed = bucket_entries(sig, np.arange(len(sig)), machine, bits, cfg)
    return candidate_pairs(packed, bits, cfg.pair_window, n_new)


def _records(df: pl.DataFrame, cfg: DedupConfig, sig: np.ndarray) -> dict:
    """Per record its `_RECORD` features and whether it introduces a node (`is_rep`); the
    new nodes' guard sets (`codes`, `numbers`) and count (`n_new`), their signatures
    written into the first `n_new` rows of `sig`."""
    rec = {c: np.empty(df.height, dtype=t) for c, t in _RECORD.items()}
    rec["is_rep"] = np.zeros(df.height, dtype=bool)
    codes, numbers = [], []
    seen = np.empty(0, dtype=np.uint64)  # node keys of earlier batches, ascending
    n_new = 0
    for lo, f in batch_features(df, cfg):
        hi = lo + len(f["lengths"])
        for c in _RECORD:
            rec[c][lo:hi] = f[c]
        key = node_keys(f["content_hash"], f["codes_hash"], f["machine_hash"])
        rep, seen = new_nodes(key, f["n_parts"], seen)
        rec["is_rep"][lo:hi] = rep
        codes.append(f["codes"].filter(rep))
        numbers.append(f["numbers"].filter(rep))
        n_rep = int(rep.sum())
        out = sig[n_new : n_new + n_rep]
        text_signatures(f["cps"], f["starts"][rep], f["lengths"][rep], cfg, out)
        n_new += n_rep
    return {**rec, "codes": codes, "numbers": numbers, "n_new": n_new}


def _nodes(df: pl.DataFrame, rec: dict, old: pl.DataFrame, cfg: DedupConfig) -> dict:
    """Per node (the new ones, then the published index's records): machine, content and
    codes hashes, guard sets, key and evidence."""
    rep_rows = np.flatnonzero(rec["is_rep"])
    machine = np.concatenate([rec["machine_hash"][rep_rows], old["machine_hash"].to_numpy()])
    content = np.concatenate([rec["content_hash"][rep_rows], old["content_hash"].to_numpy()])
    codes_hash = np.concatenate([rec["codes_hash"][rep_rows], set_hashes(old["codes"])])
    found = evidence(df, rep_rows, cfg)
    return {
        "machine": machine,
        "content": content,
        "key": node_keys(content, codes_hash, machine),
        "codes": pl.concat([*rec["codes"], old.get_column("codes")]),
        "numbers": pl.concat([*rec["numbers"], old.get_column("numbers")]),
        **{c: pl.concat([found[c], old.get_column(c)]) for c in EVIDENCE},
    }


def _labels(nodes: dict, sig: np.ndarray, n_new: int, cfg: DedupConfig) -> tuple[np.ndarray, dict]:
    """Each node's cluster (its component over the verified near-duplicate edges and the
    exact edges to the published index) and the pair counters."""
    u, v = _candidates(sig, nodes["machine"], n_new, cfg)
    decided = decide_pairs(nodes, sig, u, v, cfg)
    counters = {"candidate_pairs": len(u), **decided}
    u, v = counters.pop("u"), counters.pop("v")
    key, n_old = nodes["key"], len(sig) - n_new
    if n_old:
        exact = (
            pl.DataFrame({"key": key[:n_new], "u": np.arange(n_new)})
            .join(pl.DataFrame({"key": key[n_new:], "v": n_new + np.arange(n_old)}), on="key")
            .sort("u", "v")
        )
        u = np.concatenate([u, exact.get_column("u").to_numpy()])
        v = np.concatenate([v, exact.get_column("v").to_numpy()])
    return components(len(sig), u, v), counters


def _verdicts(
    df: pl.DataFrame, rec: dict, nodes: dict, labels: np.ndarray, old: pl.DataFrame
) -> pl.DataFrame:
    """`decide_clusters` on every record with content (row, node, _reason, _duplicate_of)."""
    n_new = rec["n_new"]
    key = nodes["key"]
    node_of = pl.DataFrame(
        {"key": key[:n_new], "node": np.arange(n_new), "cluster": labels[:n_new]}
    )
    records = (
        pl.DataFrame(
            {
                "row": np.arange(df.height),
                "record_id": df.get_column("record_id"),
                "key": node_keys(rec["content_hash"], rec["codes_hash"], rec["machine_hash"]),
                **{c: rec[c] for c in ("content_hash", *RANK)},
            }
        )
        .filter(pl.col("n_parts") > 0)
        .join(node_of, on="key", how="left")
    )
    old_nodes = pl.DataFrame(
        {
            "old_id": old.get_column("record_id"),
            "content_hash": nodes["content"][n_new:],
            "cluster": labels[n_new:],
        }
    )
    return decide_clusters(records, old_nodes, ("row", "node"))


def _index(
    df: pl.DataFrame, kept_rows: pl.DataFrame, nodes: dict, sig: np.ndarray, cfg: DedupConfig
) -> pl.DataFrame:
    """Index rows (schemas.dedup.index_schema) of the kept records with content."""
    kept = kept_rows.get_column("node").to_numpy()
    return pl.DataFrame(
        {
            "record_id": df.get_column("record_id")[kept_rows.get_column("row").to_numpy()],
            "sig_key": pl.Series([cfg.sig_key()] * len(kept), dtype=pl.String),
            "content_hash": nodes["content"][kept],
            "machine_hash": nodes["machine"][kept],
            "codes": nodes["codes"].gather(kept),
            "numbers": nodes["numbers"].gather(kept),
            "signature": sig[kept],
            **{c: nodes[c].gather(kept) for c in EVIDENCE},
        },
        schema=index_schema(cfg.num_perm),
    )


def dedup(
    df: pl.DataFrame, cfg: DedupConfig, index: pl.DataFrame | None = None
) -> tuple[StageResult, pl.DataFrame]:
    """Remove exact and near duplicates; return the stage result and the index of kept records.

    `index` is a published corpus's dedup index (schemas.dedup.index_schema); its records
    are never rejected, and new records duplicating one are rejected against it. The
    returned index covers this call's kept, non-empty records only: the published
    corpus's index is the concatenation of the old and the returned one.
    """
    if index is not None:
        check_index(index, cfg)
    old = index if index is not None else pl.DataFrame(schema=index_schema(cfg.num_perm))
    # new nodes' signatures, then the old index's; pages are touched only where written
    sig = np.empty((df.height + old.height, cfg.num_perm), dtype=np.uint32)
    rec = _records(df, cfg, sig)
    n_new = rec["n_new"]
    sig = sig[: n_new + old.height]
    sig[n_new:] = old.get_column("signature").to_numpy().reshape(old.height, cfg.num_perm)
    nodes = _nodes(df, rec, old, cfg)
    labels, counters = _labels(nodes, sig, n_new, cfg)
    decided = _verdicts(df, rec, nodes, labels, old)
    rejected_rows = decided.filter(pl.col("_reason").is_not_null()).sort("row")
    kept_rows = decided.filter(pl.col("_reason").is_null()).sort("row")

    is_rejected = np.zeros(df.height, dtype=bool)
    is_rejected[rejected_rows.get_column("row").to_numpy()] = True
    rej_df = df.select(pl.all().gather(rejected_rows.get_column("row"))).with_columns(
        rejected_rows.get_column("_reason"), rejected_rows.get_column("_duplicate_of")
    )
    rejects = make_rejects(
        rej_df, STAGE, reason=pl.col("_reason"), duplicate_of=pl.col("_duplicate_of")
    )
    result = stage_result(
        df.filter(pl.Series(~is_rejected)),
        rejects,
        read=df.height,
        empty_content=int(df.height - decided.height),
        **counters,
    )
    return result, _index(df, kept_rows, nodes, sig, cfg)
