"""Stable 64-bit hashes of texts, of sets of strings and of character shingles, in numpy.

Published dedup indexes hold these values (schemas.dedup): a change to any of them needs
`NORMALIZATION_VERSION` bumped. Large arrays are worked a span at a time, so temporaries
stay in cache and no big buffer is faulted in.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl

_U64 = np.uint64
MASK32 = _U64(0xFFFFFFFF)
MIX = _U64(0x9E3779B97F4A7C15)
MIX2 = _U64(0xC2B2AE3D27D4EB4F)


def _splitmix64(n: int, seed: int) -> np.ndarray:
    """n fixed pseudo-random 64-bit constants (SplitMix64): stable across versions."""
    out, x, mask = [], seed, (1 << 64) - 1
    for _ in range(n):
        x = (x + 0x9E3779B97F4A7C15) & mask
        z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out.append(z ^ (z >> 31))
    return np.array(out, dtype=np.uint64)


_KEYS = _splitmix64(33, 2024)
SHINGLE_MULT = _KEYS[:32] | _U64(1)  # one odd multiplier per character position
SHINGLE_ADD = _KEYS[32]
_SPAN_CHARS = 1 << 18  # code points per block of the string work
TILE = 8  # code points per tile of a string hash (SHINGLE_MULT[:8])


def fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3 64-bit finalizer (a bijection); fmix64(0) == 0."""
    x = x ^ (x >> _U64(33))
    x *= _U64(0xFF51AFD7ED558CCD)
    x ^= x >> _U64(33)
    x *= _U64(0xC4CEB9FE1A85EC53)
    x ^= x >> _U64(33)
    return x


def spans(ends: np.ndarray, size: int) -> list[tuple[int, int]]:
    """Consecutive row ranges [r0, r1) covering all rows, each adding about `size` to the
    running total `ends` (ascending). Large arrays are processed a span at a time: small
    temporaries stay in cache and reuse memory instead of faulting in fresh pages."""
    cuts = np.searchsorted(ends, np.arange(size, ends[-1], size)) if len(ends) else []
    bounds = np.unique(np.concatenate(([0], cuts, [len(ends)]))).tolist()
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def codepoints(texts: pl.Series, pad: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate `texts`, each followed by `pad` NULs, as uint32 code points.

    Returns (code points, start of each text, length of each text in characters).
    """
    lengths = texts.str.len_chars().to_numpy().astype(np.int64)
    ends = np.cumsum(lengths + pad)
    starts = ends - lengths - pad
    padded = texts + "\0" * pad if pad else texts
    cps = np.empty(ends[-1] if len(ends) else 0, dtype=np.uint32)
    for r0, r1 in spans(ends, _SPAN_CHARS):
        joined = padded.slice(r0, r1 - r0).str.join("").item()
        cps[starts[r0] : ends[r1 - 1]] = np.frombuffer(joined.encode("utf-32-le"), np.uint32)
    return cps, starts, lengths


def _ragged_arange(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenation of arange(s, s + c) for each (s, c)."""
    first = np.cumsum(counts) - counts
    return np.arange(counts.sum()) + np.repeat(starts - first, counts)


def _window_sums(columns: Iterable[np.ndarray], n: int) -> np.ndarray:
    """(SHINGLE_ADD + sum_j columns[j] * SHINGLE_MULT[j]) mod 2^64, element-wise over n windows;
    columns[j] holds the j-th code point of each window."""
    h = np.full(n, SHINGLE_ADD, dtype=np.uint64)
    for j, column in enumerate(columns):
        h += column * SHINGLE_MULT[j]  # uint32 × uint64 -> uint64
    return h


def codepoint_hashes(cps: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Stable 64-bit hash of each text (0 for the empty text), from its code points.

    `cps` must hold at least `TILE` - 1 NULs after every text. The text is cut into tiles
    of `TILE` code points (the last one NUL-padded); each tile's window sum is mixed with
    the tile's place in the text, and the sum of the mixed tiles is mixed with the length.
    """
    n_tiles = -(-lengths // TILE)
    total = np.empty(len(lengths), dtype=np.uint64)
    for r0, r1 in spans(np.cumsum(n_tiles), _SPAN_CHARS // TILE):
        counts = n_tiles[r0:r1]
        first = np.cumsum(counts) - counts
        place = _ragged_arange(np.zeros_like(first), counts)
        at = np.repeat(starts[r0:r1], counts) + place * TILE
        sums = _window_sums((cps[at + j] for j in range(TILE)), len(at))
        csum = np.zeros(len(sums) + 1, dtype=np.uint64)
        np.cumsum(fmix64(sums ^ (place.astype(np.uint64) * MIX)), out=csum[1:])
        total[r0:r1] = csum[first + counts] - csum[first]
    return fmix64(total ^ (lengths.astype(np.uint64) * MIX))


def string_hashes(texts: pl.Series) -> np.ndarray:
    """Stable 64-bit hash of each text, as persisted (see `codepoint_hashes`)."""
    return codepoint_hashes(*codepoints(texts, TILE - 1))


def set_hashes(lists: pl.Series) -> np.ndarray:
    """Order-independent stable 64-bit hash of each list of distinct strings; 0 when empty."""
    flat = lists.explode().drop_nulls()
    elem = fmix64(string_hashes(flat) ^ MIX)
    csum = np.zeros(len(elem) + 1, dtype=np.uint64)
    np.cumsum(elem, out=csum[1:])
    ends = np.cumsum(lists.list.len().fill_null(0).to_numpy().astype(np.int64))
    starts = np.concatenate(([0], ends[:-1]))
    return fmix64(csum[ends] - csum[starts])


def shingle_counts(lengths: np.ndarray, k: int) -> np.ndarray:
    """Character k-grams per text: a text shorter than k is one shingle (itself, NUL-padded);
    an empty text has none."""
    if k > len(SHINGLE_MULT):
        raise ValueError(f"shingle size {k} exceeds {len(SHINGLE_MULT)}")
    return np.where(lengths >= k, lengths - k + 1, np.minimum(lengths, 1))


def shingles_at(cps: np.ndarray, starts: np.ndarray, counts: np.ndarray, k: int) -> np.ndarray:
    """32-bit hashes of the first `counts[i]` k-grams of the text at `starts[i]` (ascending).

    `cps` must hold at least k-1 NULs after every text. The hash of a shingle c_0..c_{k-1}
    is vector multiply-shift (2-universal): the high 32 bits of its window sum. Sums are
    taken at every position from the first text's start on (contiguous slices are cheaper
    than gathers), then the texts' windows are picked.
    """
    if len(starts) == 0:
        return np.empty(0, dtype=np.uint32)
    lo = starts[0]
    n = starts[-1] + counts[-1] - lo
    sums = _window_sums((cps[lo + j : lo + j + n] for j in range(k)), n)
    return (sums[_ragged_arange(starts - lo, counts)] >> _U64(32)).astype(np.uint32)
