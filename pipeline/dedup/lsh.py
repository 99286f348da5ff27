"""LSH: candidate pairs of nodes sharing a band bucket, and connected components of pairs.

Band hashes are mixed with the node's machine (a merge needs one machine) and packed with
the node id as 64-bit integers (bucket << bits | node); one numpy sort brings each bucket's
nodes together. Nodes are bucketed by text (`bands` × `rows`, about J >= 0.55), and those
naming a machine also by moderately similar text (`moderate_bands` × `moderate_rows`,
about J >= 0.4). Components are a vectorized union-find.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.dedup.hashing import MASK32, MIX, MIX2, fmix64
from pipeline.dedup.minhash import band_hashes
from schemas.dedup import DedupConfig

_U64 = np.uint64
_BAND_BLOCK = 8192  # records per block of band hashes


def _band_entries(
    sig: np.ndarray,
    at: np.ndarray,
    salt: np.ndarray,
    bands: tuple[int, int, int],
    bits: np.uint64,
    out: np.ndarray,
) -> None:
    """(bucket << bits | node) of nodes `at` in each of `bands` = (count, rows, first id) LSH
    bands, into `out` (len(at) × count): the bucket is the band hash mixed with `salt[node]`
    and the band id, its high 64 - bits bits kept. Worked `_BAND_BLOCK` nodes at a time (the
    temporaries stay in cache)."""
    count, rows, first_id = bands
    ids = np.arange(first_id, first_id + count, dtype=np.uint64) * MIX
    for r0 in range(0, len(at), _BAND_BLOCK):
        block = at[r0 : r0 + _BAND_BLOCK]
        h = band_hashes(sig[block], count, rows) ^ ids ^ salt[block, None]
        out[r0 : r0 + _BAND_BLOCK] = ((h >> bits) << bits) | block.astype(np.uint64)[:, None]


def bucket_entries(
    sig: np.ndarray, at: np.ndarray, machine: np.ndarray, bits: int, cfg: DedupConfig
) -> np.ndarray:
    """Bucket entries (bucket << bits | node) of the nodes `at` (rows of `sig` and
    `machine`): each node in its `cfg.bands` text bands, then each node naming a machine in
    its `cfg.moderate_bands` moderate bands. Every bucket is split by machine: a pair on two
    machines never shares one."""
    salt = fmix64(machine ^ MIX2)
    b = _U64(bits)
    named = at[machine[at] != 0]
    n_text = len(at) * cfg.bands
    packed = np.empty(n_text + len(named) * cfg.moderate_bands, dtype=np.uint64)
    text = packed[:n_text].reshape(len(at), cfg.bands)
    moderate = packed[n_text:].reshape(len(named), cfg.moderate_bands)
    _band_entries(sig, at, salt, (cfg.bands, cfg.rows, 0), b, text)
    bands = (cfg.moderate_bands, cfg.moderate_rows, cfg.bands)
    _band_entries(sig, named, salt, bands, b, moderate)
    return packed


def distinct_pairs(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct pairs of node ids (below 2^32), ascending by (u, v): a hash set of
    64-bit keys u << 32 | v, then a sort of the few distinct ones (numpy's unique sorts all
    the repeats)."""
    key = (u.astype(np.uint64) << _U64(32)) | v.astype(np.uint64)
    key = pl.Series(key).unique().sort().to_numpy()
    return (key >> _U64(32)).astype(np.int64), (key & MASK32).astype(np.int64)


def candidate_pairs(
    packed: np.ndarray, bits: int, window: int, n_new: int
) -> tuple[np.ndarray, np.ndarray]:
    """Node pairs (u < v) sharing a bucket; only pairs with at least one new node (< n_new).

    `packed` holds bucket << bits | node entries (`bucket_entries`), sorted here in place:
    each bucket's nodes come together, ascending; each member is paired with the next
    `window`. Two buckets whose hashes share the kept high bits (rare) only add candidates,
    which are verified.
    """
    b = _U64(bits)
    packed.sort()
    same_next = (packed[1:] ^ packed[:-1]) >> b == 0
    paired = np.zeros(len(packed), dtype=bool)  # singletons dropped before any other work
    paired[1:] = same_next
    paired[:-1] |= same_next
    packed = packed[paired]
    if len(packed) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    keys = packed >> b
    nodes = (packed & ((_U64(1) << b) - _U64(1))).astype(np.int64)
    first = np.concatenate(([True], keys[1:] != keys[:-1]))
    bucket_of = np.cumsum(first) - 1
    keep = (nodes[first] < n_new)[bucket_of]  # a bucket's first node is its smallest
    nodes, bucket_of = nodes[keep], bucket_of[keep]
    us, vs = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    for d in range(1, window + 1):
        same = bucket_of[:-d] == bucket_of[d:]
        if not same.any():
            break
        us.append(nodes[:-d][same])
        vs.append(nodes[d:][same])
    u, v = np.concatenate(us), np.concatenate(vs)
    return distinct_pairs(u[u < n_new], v[u < n_new])


def components(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Connected components of n nodes: each node's label is the smallest node of its component."""
    labels = np.arange(n, dtype=np.int64)
    while True:
        lu, lv = labels[u], labels[v]
        differ = lu != lv
        if not differ.any():
            return labels
        np.minimum.at(labels, np.maximum(lu, lv)[differ], np.minimum(lu, lv)[differ])
        while True:
            jumped = labels[labels]
            if np.array_equal(jumped, labels):
                break
            labels = jumped
