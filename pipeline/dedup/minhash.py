"""MinHash signatures of character shingles, and the band hashes LSH buckets them by.

Computed in numpy with datasketch's permutations: a signature equals
`MinHash(num_perm, seed, scheme, hashfunc=identity).update_batch(hashes).hashvalues` for
the same shingle hashes (pipeline.dedup.hashing). Texts are worked a block of shingles at
a time and a few permutations at a time, so temporaries stay in cache.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from datasketch import MinHash

from pipeline.dedup.hashing import (
    MASK32,
    SHINGLE_ADD,
    SHINGLE_MULT,
    fmix64,
    shingle_counts,
    shingles_at,
    spans,
)
from schemas.dedup import DedupConfig

_U64 = np.uint64
_MERSENNE = _U64((1 << 61) - 1)
_CHUNK_SHINGLES = 16384  # shingles per signature block
_PERM_BLOCK = 32  # permutations at a time: 32 × 16384 uint32 = 2 MiB


def _fmix32(x: np.ndarray) -> np.ndarray:
    """MurmurHash3 32-bit finalizer, as datasketch applies it before affine32 permutations."""
    x = x ^ (x >> np.uint32(16))
    x *= np.uint32(0x85EBCA6B)
    x ^= x >> np.uint32(13)
    x *= np.uint32(0xC2B2AE35)
    x ^= x >> np.uint32(16)
    return x


def _permutations(cfg: DedupConfig) -> tuple[np.ndarray, np.ndarray]:
    """datasketch's permutation parameters (a, b) for the configured seed, size and scheme."""
    a, b = MinHash(num_perm=cfg.num_perm, seed=cfg.seed, scheme=cfg.scheme).permutations
    dtype = np.uint32 if cfg.scheme == "affine32" else np.uint64
    return a.astype(dtype), b.astype(dtype)


def signatures(
    offsets: np.ndarray,
    cfg: DedupConfig,
    shingles: Callable[[int, int], np.ndarray],
    out: np.ndarray | None = None,
) -> np.ndarray:
    """MinHash signatures (n_texts × num_perm, uint32, into `out` when given) of texts r0..r1
    at a time, whose shingle hashes, in order, are `shingles(r0, r1)`; text i has
    offsets[i+1] - offsets[i], at least one."""
    n = len(offsets) - 1
    if n and np.any(np.diff(offsets) == 0):
        raise ValueError("every text needs at least one shingle")
    a, b = _permutations(cfg)
    legacy = cfg.scheme == "legacy"
    if out is None:
        out = np.empty((n, cfg.num_perm), dtype=np.uint32)

    def work(chunks: list[tuple[int, int]]) -> None:
        for r0, r1 in chunks:
            hashes = shingles(r0, r1)
            hv = hashes.astype(np.uint64) if legacy else _fmix32(hashes)
            local = offsets[r0:r1] - offsets[r0]
            # permutations × shingles: reduceat along contiguous rows is the fast layout;
            # a few permutations at a time keep the buffer in cache
            for p in range(0, len(a), _PERM_BLOCK):
                buf = np.multiply(a[p : p + _PERM_BLOCK, None], hv[None, :])
                buf += b[p : p + _PERM_BLOCK, None]
                if legacy:  # x mod (2^61-1) without division, then 32 bits
                    buf = (buf & _MERSENNE) + (buf >> _U64(61))
                    buf -= np.where(buf >= _MERSENNE, _MERSENNE, _U64(0))
                    buf &= MASK32
                out[r0:r1, p : p + _PERM_BLOCK] = np.minimum.reduceat(buf, local, axis=1).T

    chunks = spans(offsets[1:], _CHUNK_SHINGLES)
    if cfg.threads == 1 or len(chunks) < 2:
        work(chunks)
    else:
        with ThreadPoolExecutor(cfg.threads) as pool:
            list(pool.map(work, [chunks[i :: cfg.threads] for i in range(cfg.threads)]))
    return out


def text_signatures(
    cps: np.ndarray, starts: np.ndarray, lengths: np.ndarray, cfg: DedupConfig, out: np.ndarray
) -> None:
    """`signatures` of the texts' `cfg.shingle_size` shingles into `out`, hashed a block at
    a time (`cps`: code points with at least shingle_size - 1 NULs after every text)."""
    k = cfg.shingle_size
    counts = shingle_counts(lengths, k)
    signatures(
        np.concatenate(([0], np.cumsum(counts))),
        cfg,
        lambda r0, r1: shingles_at(cps, starts[r0:r1], counts[r0:r1], k),
        out,
    )


def band_hashes(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One 64-bit hash per (record, band) of `rows` consecutive signature values."""
    x = sig[:, : bands * rows].reshape(len(sig), bands, rows)
    h = np.full((len(sig), bands), SHINGLE_ADD, dtype=np.uint64)
    for j in range(rows):
        h += x[:, :, j] * SHINGLE_MULT[j % len(SHINGLE_MULT)]  # uint32 × uint64 -> uint64
    return fmix64(h)
