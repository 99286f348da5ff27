"""Dedup stage: exact duplicates by a hash of normalized content, near duplicates by MinHash LSH.

Pipeline, all columnar:

1. Normalize the four parts (NFKC, lower case, whitespace, punctuation and control
   characters removed; letters, digits and symbols such as alarm codes are kept),
   in batches of `batch_size` records; the next batch is normalized in a background
   thread while this one's signatures are computed.
2. Stable 64-bit content hash per record (`string_hashes`); records with equal hashes are
   exact duplicates and share one MinHash signature (computed once, for the first).
3. MinHash signatures of character shingles, computed in numpy with datasketch's
   permutations: `signatures(...)[i]` equals `MinHash.bulk(...)[i].hashvalues` for
   the same shingle hashes, seed, `num_perm` and scheme. Large arrays are worked a
   block at a time, so temporaries stay in cache and no big buffer is faulted in.
4. LSH: band hashes mixed with the machine (a merge needs one machine), one numpy sort of
   (bucket, node) integers to candidate pairs: by text (20 × 5 bands), and among records
   naming a machine also 16 × 3 (about J >= 0.4). A pair is merged on very similar text
   (signature agreement >= `threshold`), or on moderately similar text when machine, alarm
   codes, reported date and the diagnosis and action columns agree; alarm codes and
   code-like numbers are weighed (a re-typing slip does not block, another code does);
   damaged fields are no evidence (schemas.dedup has the rule).
5. Connected components over the verified pairs (vectorized union-find); in each
   cluster the most complete record is kept, the others are rejected with the
   record_id they duplicate. Records of a previously published index are never
   rejected; new records in their clusters are rejected against them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import polars as pl
import pyarrow.compute as pc
from datasketch import MinHash

from pipeline.core.stage import StageResult, make_rejects, stage_result
from pipeline.stages.normalize import is_unrecoverable
from schemas.dedup import DedupConfig, index_schema

STAGE = "dedup"
T = TypeVar("T")
R = TypeVar("R")
CONTENT_PARTS: tuple[str, ...] = ("symptom", "cause", "action", "prevention")
_PART_SEP = "\x1f"  # joins normalized parts; never inside a part (control characters removed)
# dates and clock times say when, not what: removed before hashing (a re-logged order is a dup)
_DATE = (
    r"\d{4}\s*[-/.年]\s*\d{1,2}\s*[-/.月]\s*\d{1,2}\s*日?(?:\s*\d{1,2}:\d{2}(?::\d{2})?)?"
    r"|\d{1,2}:\d{2}(?::\d{2})?"
)
# whitespace, punctuation, control characters. One pass with the dates gives the same text
# as removing dates first: a date starts with a digit and a run of these holds none.
# 锟斤拷 runs and U+FFFD mark bytes lost before we saw the text: no evidence either way, so they
# are removed too (two damaged records must not look alike for their damage).
_DATE_OR_STRIP = _DATE + r"|[\s\p{P}\p{C}]+|(?:锟斤拷)+|\x{FFFD}+"
# Text made only of these characters is its own NFKC form and lower-cases as ASCII does:
# ASCII, CJK ideographs, CJK brackets and stops, ° and curly quotes (all NFKC-stable and
# uncased), and full-width ！（），；？, whose NFKC forms are ASCII punctuation that neither the
# date pattern uses nor survives `_DATE_OR_STRIP`, just as they do not.
_PLAIN = (
    "\x00-\x7f\u4e00-\u9fff\u3001\u3002\u3008-\u3011\u00b0\u201c\u201d"
    "\uff01\uff08\uff09\uff0c\uff1b\uff1f"
)
# code-like numbers (25080, 0411 of sv0411, 8b40): 3+ digits or digit groups joined by a
# letter. Two records where neither set contains the other are different incidents (another
# alarm code, machine, parameter or part number); counts and durations (1-2 digits) are not.
_NUMBER = r"[0-9]+(?:[a-z][0-9]+)+|[0-9]{3,}"

_U64 = np.uint64
_MERSENNE = _U64((1 << 61) - 1)
_MASK32 = _U64(0xFFFFFFFF)
_MIX = _U64(0x9E3779B97F4A7C15)
_MIX2 = _U64(0xC2B2AE3D27D4EB4F)


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
_CHUNK_SHINGLES = 16384  # shingles per signature block
_PERM_BLOCK = 32  # permutations at a time: 32 × 16384 uint32 = 2 MiB
_SPAN_CHARS = 1 << 18  # code points per block of the string work
_TILE = 8  # code points per tile of a string hash (SHINGLE_MULT[:8])
_BAND_BLOCK = 8192  # records per block of band hashes


def _ascii_lower(texts: pl.Series) -> pl.Series:
    return pl.Series(pc.ascii_lower(texts.to_arrow()))


def normalized_text(column: str) -> pl.Expr:
    """NFKC, lower case, dates/times, whitespace, punctuation and control characters removed;
    null -> ''. Letters, digits and symbols stay: alarm codes and numbers are not flattened.

    Rows of `_PLAIN` characters only skip NFKC and take ASCII lower-casing (the same result,
    several times faster); the others go the full way.
    """
    text = pl.col(column).fill_null("")
    plain = ~text.str.contains(f"[^{_PLAIN}]")
    folded = (
        pl.when(plain)
        .then(pl.when(plain).then(text).map_batches(_ascii_lower, return_dtype=pl.String))
        .otherwise(pl.when(~plain).then(text).str.normalize("NFKC").str.to_lowercase())
    )
    return folded.str.replace_all(_DATE_OR_STRIP, "")


# ---------------------------------------------------------------- hashing primitives


def _fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3 64-bit finalizer (a bijection); fmix64(0) == 0."""
    x = x ^ (x >> _U64(33))
    x *= _U64(0xFF51AFD7ED558CCD)
    x ^= x >> _U64(33)
    x *= _U64(0xC4CEB9FE1A85EC53)
    x ^= x >> _U64(33)
    return x


def _fmix32(x: np.ndarray) -> np.ndarray:
    """MurmurHash3 32-bit finalizer, as datasketch applies it before affine32 permutations."""
    x = x ^ (x >> np.uint32(16))
    x *= np.uint32(0x85EBCA6B)
    x ^= x >> np.uint32(13)
    x *= np.uint32(0xC2B2AE35)
    x ^= x >> np.uint32(16)
    return x


def _spans(ends: np.ndarray, size: int) -> list[tuple[int, int]]:
    """Consecutive row ranges [r0, r1) covering all rows, each adding about `size` to the
    running total `ends` (ascending). Large arrays are processed a span at a time: small
    temporaries stay in cache and reuse memory instead of faulting in fresh pages."""
    cuts = np.searchsorted(ends, np.arange(size, ends[-1], size)) if len(ends) else []
    bounds = np.unique(np.concatenate(([0], cuts, [len(ends)]))).tolist()
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _codepoints(texts: pl.Series, pad: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate `texts`, each followed by `pad` NULs, as uint32 code points.

    Returns (code points, start of each text, length of each text in characters).
    """
    lengths = texts.str.len_chars().to_numpy().astype(np.int64)
    ends = np.cumsum(lengths + pad)
    starts = ends - lengths - pad
    padded = texts + "\0" * pad if pad else texts
    cps = np.empty(ends[-1] if len(ends) else 0, dtype=np.uint32)
    for r0, r1 in _spans(ends, _SPAN_CHARS):
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


def _string_hashes(cps: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Stable 64-bit hash of each text (0 for the empty text), from its code points.

    `cps` must hold at least `_TILE` - 1 NULs after every text. The text is cut into tiles
    of `_TILE` code points (the last one NUL-padded); each tile's window sum is mixed with
    the tile's place in the text, and the sum of the mixed tiles is mixed with the length.
    """
    n_tiles = -(-lengths // _TILE)
    total = np.empty(len(lengths), dtype=np.uint64)
    for r0, r1 in _spans(np.cumsum(n_tiles), _SPAN_CHARS // _TILE):
        counts = n_tiles[r0:r1]
        first = np.cumsum(counts) - counts
        place = _ragged_arange(np.zeros_like(first), counts)
        at = np.repeat(starts[r0:r1], counts) + place * _TILE
        sums = _window_sums((cps[at + j] for j in range(_TILE)), len(at))
        csum = np.zeros(len(sums) + 1, dtype=np.uint64)
        np.cumsum(_fmix64(sums ^ (place.astype(np.uint64) * _MIX)), out=csum[1:])
        total[r0:r1] = csum[first + counts] - csum[first]
    return _fmix64(total ^ (lengths.astype(np.uint64) * _MIX))


def string_hashes(texts: pl.Series) -> np.ndarray:
    """Stable 64-bit hash of each text, as persisted (see `_string_hashes`)."""
    return _string_hashes(*_codepoints(texts, _TILE - 1))


def _shingle_counts(lengths: np.ndarray, k: int) -> np.ndarray:
    """Character k-grams per text: a text shorter than k is one shingle (itself, NUL-padded);
    an empty text has none."""
    if k > len(SHINGLE_MULT):
        raise ValueError(f"shingle size {k} exceeds {len(SHINGLE_MULT)}")
    return np.where(lengths >= k, lengths - k + 1, np.minimum(lengths, 1))


def _shingles_at(cps: np.ndarray, starts: np.ndarray, counts: np.ndarray, k: int) -> np.ndarray:
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


def shingle_hashes(texts: pl.Series, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Shingle hashes of already-normalized texts and per-text offsets into them.

    Text i owns `hashes[offsets[i]:offsets[i+1]]` (see `_shingle_counts`, `_shingles_at`).
    """
    cps, starts, lengths = _codepoints(texts, k - 1)
    counts = _shingle_counts(lengths, k)
    return _shingles_at(cps, starts, counts, k), np.concatenate(([0], np.cumsum(counts)))


# ---------------------------------------------------------------- MinHash signatures


def permutations(cfg: DedupConfig) -> tuple[np.ndarray, np.ndarray]:
    """datasketch's permutation parameters (a, b) for the configured seed, size and scheme."""
    a, b = MinHash(num_perm=cfg.num_perm, seed=cfg.seed, scheme=cfg.scheme).permutations
    dtype = np.uint32 if cfg.scheme == "affine32" else np.uint64
    return a.astype(dtype), b.astype(dtype)


def _signatures(
    offsets: np.ndarray,
    cfg: DedupConfig,
    shingles: Callable[[int, int], np.ndarray],
    out: np.ndarray | None = None,
) -> np.ndarray:
    """MinHash signatures (n_texts × num_perm, uint32, into `out` when given) of texts r0..r1
    at a time, whose shingle hashes, in order, are `shingles(r0, r1)`; text i has
    offsets[i+1] - offsets[i]."""
    n = len(offsets) - 1
    if n and np.any(np.diff(offsets) == 0):
        raise ValueError("every text needs at least one shingle")
    a, b = permutations(cfg)
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
                    buf &= _MASK32
                out[r0:r1, p : p + _PERM_BLOCK] = np.minimum.reduceat(buf, local, axis=1).T

    chunks = _spans(offsets[1:], _CHUNK_SHINGLES)
    if cfg.threads == 1 or len(chunks) < 2:
        work(chunks)
    else:
        with ThreadPoolExecutor(cfg.threads) as pool:
            list(pool.map(work, [chunks[i :: cfg.threads] for i in range(cfg.threads)]))
    return out


def signatures(hashes: np.ndarray, offsets: np.ndarray, cfg: DedupConfig) -> np.ndarray:
    """MinHash signatures (n_texts × num_perm, uint32) of per-text shingle hashes.

    Text i owns `hashes[offsets[i]:offsets[i+1]]`, which must not be empty. Values equal
    datasketch's `MinHash(num_perm, seed, scheme, hashfunc=identity).update_batch(hashes)`.
    """
    return _signatures(offsets, cfg, lambda r0, r1: hashes[offsets[r0] : offsets[r1]])


def _text_signatures(
    cps: np.ndarray, starts: np.ndarray, lengths: np.ndarray, cfg: DedupConfig, out: np.ndarray
) -> None:
    """`signatures` of the texts' shingles into `out`, hashed a block at a time."""
    k = cfg.shingle_size
    counts = _shingle_counts(lengths, k)
    _signatures(
        np.concatenate(([0], np.cumsum(counts))),
        cfg,
        lambda r0, r1: _shingles_at(cps, starts[r0:r1], counts[r0:r1], k),
        out,
    )


def band_hashes(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One 64-bit hash per (record, band) of `rows` consecutive signature values."""
    x = sig[:, : bands * rows].reshape(len(sig), bands, rows)
    h = np.full((len(sig), bands), SHINGLE_ADD, dtype=np.uint64)
    for j in range(rows):
        h += x[:, :, j] * SHINGLE_MULT[j % len(SHINGLE_MULT)]  # uint32 × uint64 -> uint64
    return _fmix64(h)


# ---------------------------------------------------------------- candidate pairs and clusters


def _pair_keys(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Distinct pairs as ascending 64-bit keys u << 32 | v (a hash set, then a sort of the
    few distinct ones: numpy's unique sorts all the repeats)."""
    key = (u.astype(np.uint64) << _U64(32)) | v.astype(np.uint64)
    return pl.Series(key).unique().sort().to_numpy()


def _bucket_entries(
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
    ids = np.arange(first_id, first_id + count, dtype=np.uint64) * _MIX
    for r0 in range(0, len(at), _BAND_BLOCK):
        block = at[r0 : r0 + _BAND_BLOCK]
        h = band_hashes(sig[block], count, rows) ^ ids ^ salt[block, None]
        out[r0 : r0 + _BAND_BLOCK] = ((h >> bits) << bits) | block.astype(np.uint64)[:, None]


def _candidate_pairs(
    packed: np.ndarray, bits: np.uint64, window: int, n_new: int
) -> tuple[np.ndarray, np.ndarray]:
    """Node pairs (u < v) sharing a bucket; only pairs with at least one new node (< n_new).

    `packed` holds bucket << bits | node entries (`_bucket_entries`), sorted here in place:
    each bucket's nodes come together, ascending; each member is paired with the next
    `window`. Two buckets whose hashes share the kept high bits (rare) only add candidates,
    which are verified.
    """
    packed.sort()
    same_next = (packed[1:] ^ packed[:-1]) >> bits == 0
    paired = np.zeros(len(packed), dtype=bool)  # singletons dropped before any other work
    paired[1:] = same_next
    paired[:-1] |= same_next
    packed = packed[paired]
    if len(packed) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    keys = packed >> bits
    nodes = (packed & ((_U64(1) << bits) - _U64(1))).astype(np.int64)
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
    key = _pair_keys(u[u < n_new], v[u < n_new])
    return (key >> _U64(32)).astype(np.int64), (key & _MASK32).astype(np.int64)


def _candidates(
    sig: np.ndarray, machine: np.ndarray, n_new: int, cfg: DedupConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs: by text (`bands` × `rows`, about J >= 0.55 on), and among the nodes
    naming a machine also by moderately similar text (`moderate_bands` × `moderate_rows`,
    about J >= 0.4 on). Every merge needs equal machine hashes (`_decide`), so all buckets are
    split by machine: a pair on two machines is never a candidate. One sort of all buckets."""
    if len(sig) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    salt = _fmix64(machine ^ _MIX2)
    bits = _U64(max((len(sig) - 1).bit_length(), 1))
    named = np.flatnonzero(machine != 0)
    n_text = len(sig) * cfg.bands
    entries = np.empty(n_text + len(named) * cfg.moderate_bands, dtype=np.uint64)
    text = entries[:n_text].reshape(len(sig), cfg.bands)
    moderate = entries[n_text:].reshape(len(named), cfg.moderate_bands)
    _bucket_entries(sig, np.arange(len(sig)), salt, (cfg.bands, cfg.rows, 0), bits, text)
    bands = (cfg.moderate_bands, cfg.moderate_rows, cfg.bands)
    _bucket_entries(sig, named, salt, bands, bits, moderate)
    return _candidate_pairs(entries, bits, cfg.pair_window, n_new)


def _agreement(sig: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Share of equal signature values per pair (MinHash estimate of Jaccard)."""
    out = np.empty(len(u), dtype=np.float64)
    step = 1 << 15
    for s in range(0, len(u), step):
        eq = sig[u[s : s + step]] == sig[v[s : s + step]]
        out[s : s + step] = np.count_nonzero(eq, axis=1) / sig.shape[1]
    return out


def _components(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
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


# ---------------------------------------------------------------- the stage


def _unique(lists: pl.Series) -> pl.Series:
    """Distinct elements, in order of first mention (polars' list.sort is slow per row)."""
    return lists.fill_null([]).list.unique(maintain_order=True)


def _set_hashes(lists: pl.Series) -> np.ndarray:
    """Order-independent stable 64-bit hash of each list of distinct strings; 0 when empty."""
    flat = lists.explode().drop_nulls()
    elem = _fmix64(string_hashes(flat) ^ _MIX)
    csum = np.zeros(len(elem) + 1, dtype=np.uint64)
    np.cumsum(elem, out=csum[1:])
    ends = np.cumsum(lists.list.len().fill_null(0).to_numpy().astype(np.int64))
    starts = np.concatenate(([0], ends[:-1]))
    return _fmix64(csum[ends] - csum[starts])


def _machine_hashes(batch: pl.DataFrame, columns: list[str]) -> np.ndarray:
    """Hash of the normalized, concatenated machine columns per row (0 when all are empty),
    computed once per distinct combination of values."""
    if not columns:
        return np.zeros(batch.height, dtype=np.uint64)
    keys = batch.select(columns)
    distinct = keys.unique(maintain_order=True)
    text = distinct.select(pl.concat_str([normalized_text(c) for c in columns])).to_series()
    return (
        keys.join(
            distinct.with_columns(pl.Series("_hash", string_hashes(text))),
            on=columns,
            how="left",
            nulls_equal=True,
            maintain_order="left",
        )
        .get_column("_hash")
        .to_numpy()
    )


def _features(batch: pl.DataFrame, cfg: DedupConfig) -> dict:
    """Code points, hashes, guard sets (alarm codes, numbers) and completeness features."""
    parts = batch.select(normalized_text(c).alias(c) for c in CONTENT_PARTS)
    content = parts.select(pl.concat_str(CONTENT_PARTS, separator=_PART_SEP)).to_series()
    codes = _unique(
        batch.get_column("alarm_codes").list.eval(pl.element().str.to_lowercase())
        if "alarm_codes" in batch.columns
        else pl.Series([[]] * batch.height, dtype=pl.List(pl.String))
    )
    cps, starts, lengths = _codepoints(content, max(cfg.shingle_size, _TILE) - 1)
    lens = parts.select(pl.col(c).str.len_chars() for c in CONTENT_PARTS)
    return {
        "cps": cps,
        "starts": starts,
        "lengths": lengths,
        "content_hash": _string_hashes(cps, starts, lengths),
        "codes": codes,
        "numbers": _unique(content.str.extract_all(_NUMBER)),
        "codes_hash": _set_hashes(codes),
        "machine_hash": _machine_hashes(
            batch, [c for c in cfg.machine_columns if c in batch.columns]
        ),
        "has_codes": (codes.list.len() > 0).to_numpy(),
        "n_parts": lens.select(pl.sum_horizontal(pl.all() > 0)).to_series().to_numpy(),
        "cause_len": lens.get_column("cause").to_numpy(),
        "content_len": lens.select(pl.sum_horizontal(pl.all())).to_series().to_numpy(),
    }


def _in_sorted(values: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """Which values occur in the ascending array (binary search, no re-sort)."""
    if len(ascending) == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(ascending, values), len(ascending) - 1)
    return ascending[at] == values


def _prefetched(fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """fn(item) for each item, in order; the next one is computed in a background thread
    while the caller works on the current one (polars and numpy mostly run without the GIL)."""
    with ThreadPoolExecutor(1) as pool:
        pending = None
        for item in items:
            submitted = pool.submit(fn, item)
            if pending is not None:
                yield pending.result()
            pending = submitted
        if pending is not None:
            yield pending.result()


def _node_key(content: np.ndarray, codes: np.ndarray, machine: np.ndarray) -> np.ndarray:
    """Identity of a node: normalized content together with its alarm codes and machine."""
    return _fmix64(content ^ (codes * _MIX2) ^ _fmix64(machine ^ _MIX))


def _slips(a: pl.Series, b: pl.Series, substitution: bool) -> np.ndarray:
    """Whether each b differs from its a (both 3+ characters) by one re-typing slip: one or
    two adjacent characters inserted or deleted, two adjacent ones swapped, and with
    `substitution` (numbers of the text) one replaced or a stray letter joining the number
    to its neighbour."""
    width = 24
    la = a.str.len_chars().to_numpy().astype(np.int64)
    lb = b.str.len_chars().to_numpy().astype(np.int64)

    def grid(s: pl.Series, end: bool) -> np.ndarray:
        fixed = (s.str.pad_end if end else s.str.pad_start)(width, "\0").str.slice(0, width)
        raw = fixed.str.join("").item().encode("utf-32-le") if len(s) else b""
        return np.frombuffer(raw, np.uint32).reshape(len(s), width)

    shortest = np.minimum(la, lb)
    left_a, left_b = grid(a, True), grid(b, True)
    differ = left_a != left_b
    prefix = np.where(differ.any(axis=1), differ.argmax(axis=1), width)
    differ = (grid(a, False) != grid(b, False))[:, ::-1]
    suffix = np.where(differ.any(axis=1), differ.argmax(axis=1), width)
    prefix, suffix = np.minimum(prefix, shortest), np.minimum(suffix, shortest)
    same_len = la == lb
    at = np.minimum(prefix, width - 2)
    rows = np.arange(len(la))
    swapped = (left_a[rows, at] == left_b[rows, at + 1]) & (
        left_a[rows, at + 1] == left_b[rows, at]
    )
    swap = same_len & (prefix + suffix == la - 2) & swapped
    replace = same_len & (prefix + suffix == la - 1) & substitution
    gap = np.abs(la - lb)
    indel = (gap >= 1) & (gap <= 2) & (prefix + suffix >= shortest)
    # a stray letter joined the number with the next (or previous) one: 1234 -> 1234c05
    longer = np.where((la > lb)[:, None], left_a, left_b)
    after = longer[rows, np.minimum(shortest, width - 1)]
    before = longer[rows, np.clip(np.maximum(la, lb) - shortest - 1, 0, width - 1)]
    letter = (after >= ord("a")) & (after <= ord("z")), (before >= ord("a")) & (before <= ord("z"))
    joined = (
        substitution
        & (gap >= 2)
        & (((prefix >= shortest) & letter[0]) | ((suffix >= shortest) & letter[1]))
    )
    fits = (np.maximum(la, lb) <= width) & (shortest >= 3)
    return fits & (swap | replace | indel | joined)


def _contradictions(
    sets: pl.Series, u: np.ndarray, v: np.ndarray, substitution: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: whether the two sets contradict each other (neither contains the other and
    some element has no counterpart one slip away), and how many slips they differ by."""
    a, b = sets.gather(u), sets.gather(v)
    only_a, only_b = a.list.set_difference(b), b.list.set_difference(a)
    both = ((only_a.list.len() > 0) & (only_b.list.len() > 0)).to_numpy()
    far = np.zeros(len(u), dtype=bool)
    slips = np.zeros(len(u), dtype=np.int64)
    if not both.any():
        return far, slips
    pair = np.flatnonzero(both)
    left = pl.DataFrame({"pair": pair, "x": only_a.filter(both)}).explode("x")
    right = pl.DataFrame({"pair": pair, "y": only_b.filter(both)}).explode("y")
    cross = left.join(right, on="pair")
    cross = cross.with_columns(
        pl.Series("slip", _slips(cross.get_column("x"), cross.get_column("y"), substitution))
    )
    matched = (
        pl.concat(
            [
                cross.group_by("pair", "x").agg(pl.col("slip").any()).select("pair", "slip"),
                cross.group_by("pair", "y").agg(pl.col("slip").any()).select("pair", "slip"),
            ]
        )
        .group_by("pair")
        .agg(pl.col("slip").all().alias("all"), pl.len().alias("n"))
    )
    at = matched.get_column("pair").to_numpy()
    far[at] = ~matched.get_column("all").to_numpy()
    slips[at] = np.maximum(
        only_a.filter(both).list.len().to_numpy(), only_b.filter(both).list.len().to_numpy()
    )[np.searchsorted(pair, at)]
    return far, slips


_YMD = r"(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})"
_XXY = r"(\d{1,2})[-/.](\d{1,2})[-/.](\d{4})"  # 07/02/2024: month or day first


def _days(texts: pl.Series) -> np.ndarray:
    """(n, 2) day numbers of each reported date: year-month-day in both columns; for
    `07/02/2024` month-first, then day-first (an export may use either). NaN: unknown."""
    frame = pl.DataFrame({"t": texts.cast(pl.String)}).with_columns(
        pl.col("t").str.extract_groups(_YMD).alias("ymd"),
        pl.col("t").str.extract_groups(_XXY).alias("xxy"),
    )
    ymd, xxy = pl.col("ymd").struct.field, pl.col("xxy").struct.field

    def day(y: pl.Expr, m: pl.Expr, d: pl.Expr) -> pl.Expr:
        text = pl.format("{}-{}-{}", y, m.str.zfill(2), d.str.zfill(2))
        return text.str.strptime(pl.Date, "%Y-%m-%d", strict=False).cast(pl.Int32)

    first = day(ymd("1"), ymd("2"), ymd("3"))
    out = frame.select(
        pl.coalesce(first, day(xxy("3"), xxy("1"), xxy("2"))).alias("a"),
        pl.coalesce(first, day(xxy("3"), xxy("2"), xxy("1"))).alias("b"),
    )
    return out.cast(pl.Float64).fill_null(np.nan).to_numpy()


def _tokens(texts: pl.Series, fillers: list[str]) -> pl.DataFrame:
    """Distinct (id, token) of each text: Latin words and digit runs, and pairs of adjacent
    Han characters (a lone Han character stands for itself); fillers removed first."""
    han_fillers = [re.escape(f) for f in fillers if not f.isascii()]
    latin_fillers = [f for f in fillers if f.isascii()]
    runs = (
        pl.DataFrame({"id": np.arange(len(texts)), "t": texts})
        .with_columns(
            pl.col("t")
            .str.normalize("NFKC")
            .str.to_lowercase()
            .str.replace_all("|".join(han_fillers) or "^$", "")
            .str.extract_all(r"[a-z0-9]+|\p{Han}+")
        )
        .explode("t")
        .drop_nulls("t")
        .filter(~pl.col("t").is_in(latin_fillers))
    )
    han = pl.col("t").str.contains(r"^\p{Han}")
    pairs = (pl.col("t").str.len_chars() - 1).clip(1)
    return (
        runs.with_columns(pl.int_ranges(0, pl.when(han).then(pairs).otherwise(1)).alias("at"))
        .explode("at")
        .select("id", pl.when(han).then(pl.col("t").str.slice("at", 2)).otherwise("t"))
        .unique()
    )


def _agree(a: pl.Series, b: pl.Series, cfg: DedupConfig) -> np.ndarray:
    """Per pair of texts: 1 agree, 0 disagree, -1 no evidence (either null or tokenless)."""
    ta, tb = _tokens(a, cfg.agreement_fillers), _tokens(b, cfg.agreement_fillers)
    size_a = ta.group_by("id").len("na")
    size_b = tb.group_by("id").len("nb")
    common = ta.join(tb, on=["id", "t"]).group_by("id").len("nc")
    nc = pl.col("nc").fill_null(0)
    score = (
        pl.DataFrame({"id": np.arange(len(a))})
        .join(size_a, on="id", how="left")
        .join(size_b, on="id", how="left")
        .join(common, on="id", how="left")
        .select(
            pl.when(pl.col("na").is_null() | pl.col("nb").is_null())
            .then(-1)
            .when(nc / (pl.col("na") + pl.col("nb") - nc) >= cfg.part_agreement)
            .then(1)
            .otherwise(0)
        )
    )
    return score.to_series().to_numpy()


PAIR_COUNTERS = ("verified_pairs", "incident_pairs", "slip_pairs", "contradicted_pairs")


def _decide(nodes: dict, sig: np.ndarray, u: np.ndarray, v: np.ndarray, cfg: DedupConfig) -> dict:
    """Which candidate pairs are one incident (see schemas.dedup); pairs and counters.
    Alarm codes agree when neither record has one the other lacks, or one names none."""
    share = _agreement(sig, u, v)
    keep = share >= cfg.moderate_threshold
    u, v, share = u[keep], v[keep], share[keep]
    machine = nodes["machine"]
    same_machine = machine[u] == machine[v]  # unknown on one side only is not the same: no
    # bridge through a record without a machine between two machines' clusters
    far_codes, slip_codes = _contradictions(nodes["codes"], u, v, substitution=False)
    far_numbers, slip_numbers = _contradictions(nodes["numbers"], u, v, substitution=True)
    slips = np.maximum(slip_codes, slip_numbers)
    clean = same_machine & ~far_codes & ~far_numbers
    by_text = clean & (share >= cfg.threshold) & (slips <= cfg.max_code_slips)
    maybe = np.flatnonzero(clean & ~by_text & (slips == 0) & (machine[u] != 0))
    days = nodes["days"]
    apart = np.abs(days[u[maybe]] - days[v[maybe]])  # per reading of the dates
    near_in_time = (apart <= cfg.time_window_days).any(axis=1)
    maybe = maybe[near_in_time]  # NaN (unknown date) compares False
    verdicts = [
        _agree(nodes[p].gather(u[maybe]), nodes[p].gather(v[maybe]), cfg)
        for p in ("diagnosis", "action")
    ]
    evidence = (verdicts[0] >= 0) | (verdicts[1] >= 0)
    by_incident = maybe[evidence & (verdicts[0] != 0) & (verdicts[1] != 0)]
    merged = by_text.copy()
    merged[by_incident] = True
    counts = (by_text.sum(), len(by_incident), (by_text & (slips > 0)).sum(), (~clean).sum())
    counters = dict(zip(PAIR_COUNTERS, map(int, counts), strict=True))
    return {"u": u[merged], "v": v[merged], **counters}


_EVIDENCE = ("reported_at", "diagnosis", "action")


def _evidence(df: pl.DataFrame, rows: np.ndarray, cfg: DedupConfig) -> dict[str, pl.Series]:
    """Reported time, diagnosis and action of the given rows; a part is null when damaged
    (锟斤拷 or U+FFFD in it, or a lossy repair of the record): no evidence either way."""
    picked = df.select(
        pl.col(c).gather(rows) if c in df.columns else pl.lit(None, pl.String).alias(c)
        for c in (cfg.time_column, "cause", "action", "repairs")
    )
    lossy = pl.col("repairs").list.set_intersection(list(cfg.lossy_repairs)).list.len() > 0
    lossy = lossy.fill_null(False) if "repairs" in df.columns else pl.lit(False)
    out = picked.select(
        pl.col(cfg.time_column).cast(pl.String).alias("reported_at"),
        *[
            pl.when(~lossy & ~is_unrecoverable(pl.col(c))).then(pl.col(c)).alias(name)
            for c, name in (("cause", "diagnosis"), ("action", "action"))
        ],
    )
    return {c: out.get_column(c) for c in _EVIDENCE}


def _check_index(index: pl.DataFrame, cfg: DedupConfig) -> None:
    expected = index_schema(cfg.num_perm)
    problems = [
        f"{c}: expected {t}, got {index.schema.get(c)}"
        for c, t in expected.items()
        if index.schema.get(c) != t
    ]
    if problems:
        raise ValueError("dedup index does not match this configuration: " + "; ".join(problems))
    keys = index.get_column("sig_key").unique().to_list()
    if index.height and keys != [cfg.sig_key()]:
        raise ValueError(
            f"dedup index was built with {keys}, this configuration needs {cfg.sig_key()!r}; "
            "rebuild the index or restore the signature settings"
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
        _check_index(index, cfg)
    n = df.height
    content_hash = np.empty(n, dtype=np.uint64)
    codes_hash = np.empty(n, dtype=np.uint64)
    machine_hash = np.empty(n, dtype=np.uint64)
    rep_codes: list[pl.Series] = []
    rep_numbers: list[pl.Series] = []
    n_parts = np.empty(n, dtype=np.int64)
    cause_len = np.empty(n, dtype=np.int64)
    content_len = np.empty(n, dtype=np.int64)
    has_codes = np.empty(n, dtype=bool)
    is_rep = np.zeros(n, dtype=bool)
    seen = np.empty(0, dtype=np.uint64)  # node keys of earlier batches, ascending
    old = index if index is not None else pl.DataFrame(schema=index_schema(cfg.num_perm))
    # new nodes' signatures, then the old index's; pages are touched only where written
    sig = np.empty((n + old.height, cfg.num_perm), dtype=np.uint32)
    n_new = 0
    starts = range(0, n, cfg.batch_size)
    batch_features = _prefetched(lambda lo: _features(df.slice(lo, cfg.batch_size), cfg), starts)
    for lo, f in zip(starts, batch_features, strict=True):
        hi = lo + len(f["lengths"])
        content_hash[lo:hi] = f["content_hash"]
        codes_hash[lo:hi] = f["codes_hash"]
        machine_hash[lo:hi] = f["machine_hash"]
        n_parts[lo:hi] = f["n_parts"]
        cause_len[lo:hi] = f["cause_len"]
        content_len[lo:hi] = f["content_len"]
        has_codes[lo:hi] = f["has_codes"]
        key = _node_key(f["content_hash"], f["codes_hash"], f["machine_hash"])
        first = np.zeros(hi - lo, dtype=bool)
        first[np.unique(key, return_index=True)[1]] = True
        rep = first & (f["n_parts"] > 0) & ~_in_sorted(key, seen)
        seen = np.sort(np.concatenate([seen, key[rep]]), kind="stable")  # a merge of two runs
        is_rep[lo:hi] = rep
        rep_codes.append(f["codes"].filter(rep))
        rep_numbers.append(f["numbers"].filter(rep))
        n_rep = int(rep.sum())
        out = sig[n_new : n_new + n_rep]
        _text_signatures(f["cps"], f["starts"][rep], f["lengths"][rep], cfg, out)
        n_new += n_rep

    # nodes: distinct (content, alarm codes) of the new records, then the old index's records
    rep_rows = np.flatnonzero(is_rep)
    sig = sig[: n_new + old.height]
    sig[n_new:] = old.get_column("signature").to_numpy().reshape(old.height, cfg.num_perm)
    node_codes = pl.concat([*rep_codes, old.get_column("codes")])
    node_numbers = pl.concat([*rep_numbers, old.get_column("numbers")])
    node_machine = np.concatenate(
        [machine_hash[rep_rows], old.get_column("machine_hash").to_numpy()]
    )
    node_content = np.concatenate(
        [content_hash[rep_rows], old.get_column("content_hash").to_numpy()]
    )
    node_codes_hash = np.concatenate([codes_hash[rep_rows], _set_hashes(old.get_column("codes"))])
    node_key = _node_key(node_content, node_codes_hash, node_machine)

    # near-duplicate edges, decided; exact edges to the old index
    u, v = _candidates(sig, node_machine, n_new, cfg)
    n_candidates = len(u)
    evidence = _evidence(df, rep_rows, cfg)
    nodes = {
        "machine": node_machine,
        "codes": node_codes,
        "numbers": node_numbers,
        "codes_hash": node_codes_hash,
        **{c: pl.concat([evidence[c], old.get_column(c)]) for c in _EVIDENCE},
    }
    nodes["days"] = _days(nodes["reported_at"])
    decided_pairs = _decide(nodes, sig, u, v, cfg)
    u, v = decided_pairs.pop("u"), decided_pairs.pop("v")
    if old.height:
        exact = (
            pl.DataFrame({"key": node_key[:n_new], "u": np.arange(n_new)})
            .join(
                pl.DataFrame({"key": node_key[n_new:], "v": n_new + np.arange(old.height)}),
                on="key",
            )
            .sort("u", "v")
        )
        u = np.concatenate([u, exact.get_column("u").to_numpy()])
        v = np.concatenate([v, exact.get_column("v").to_numpy()])
    labels = _components(len(sig), u, v)

    # per record: node -> cluster; pick the most complete member per cluster
    node_of = pl.DataFrame(
        {"key": node_key[:n_new], "node": np.arange(n_new), "cluster": labels[:n_new]}
    )
    rec = (
        pl.DataFrame(
            {
                "row": np.arange(n),
                "record_id": df.get_column("record_id"),
                "key": _node_key(content_hash, codes_hash, machine_hash),
                "content_hash": content_hash,
                "n_parts": n_parts,
                "has_codes": has_codes,
                "cause_len": cause_len,
                "content_len": content_len,
            }
        )
        .filter(pl.col("n_parts") > 0)
        .join(node_of, on="key", how="left")
    )
    old_nodes = pl.DataFrame(
        {
            "old_id": old.get_column("record_id"),
            "content_hash": node_content[n_new:],
            "cluster": labels[n_new:],
        }
    )
    decided = decide_clusters(rec, old_nodes, ("row", "node"))
    rejected_rows = decided.filter(pl.col("_reason").is_not_null()).sort("row")
    kept_rows = decided.filter(pl.col("_reason").is_null()).sort("row")

    is_rejected = np.zeros(n, dtype=bool)
    is_rejected[rejected_rows.get_column("row").to_numpy()] = True
    kept = df.filter(pl.Series(~is_rejected))
    rej_df = df.select(pl.all().gather(rejected_rows.get_column("row"))).with_columns(
        rejected_rows.get_column("_reason"), rejected_rows.get_column("_duplicate_of")
    )
    rejects = make_rejects(
        rej_df, STAGE, reason=pl.col("_reason"), duplicate_of=pl.col("_duplicate_of")
    )

    kept_nodes = kept_rows.get_column("node").to_numpy()
    new_index = pl.DataFrame(
        {
            "record_id": df.get_column("record_id")[kept_rows.get_column("row").to_numpy()],
            "sig_key": pl.Series([cfg.sig_key()] * len(kept_nodes), dtype=pl.String),
            "content_hash": node_content[kept_nodes],
            "machine_hash": node_machine[kept_nodes],
            "codes": node_codes.gather(kept_nodes),
            "numbers": node_numbers.gather(kept_nodes),
            "signature": sig[kept_nodes],
            "reported_at": nodes["reported_at"].gather(kept_nodes),
            "diagnosis": nodes["diagnosis"].gather(kept_nodes),
            "action": nodes["action"].gather(kept_nodes),
        },
        schema=index_schema(cfg.num_perm),
    )
    result = stage_result(
        kept,
        rejects,
        read=n,
        empty_content=int(n - rec.height),
        candidate_pairs=int(n_candidates),
        **decided_pairs,
    )
    return result, new_index


RANK = ("n_parts", "has_codes", "cause_len", "content_len")  # the most complete record first


def decide_clusters(
    records: pl.DataFrame, old: pl.DataFrame, keep: tuple[str, ...]
) -> pl.DataFrame:
    """Per record of a cluster (`row`, `cluster`, `record_id`, `content_hash` and the RANK
    columns) its `_duplicate_of` and `_reason` (null: kept), with the `keep` columns. A
    cluster holding published records (`old`: old_id, content_hash, cluster) points every
    new record to its smallest old id (`exact_dup` where the content is the same); else the
    most complete record is kept and the others point to it."""
    anchors = old.group_by("cluster").agg(pl.col("old_id").min().alias("anchor"))
    exact_old = old.group_by("cluster", "content_hash").agg(
        pl.col("old_id").min().alias("exact_old")
    )
    rec = (
        records.join(anchors, on="cluster", how="left")
        .join(exact_old, on=["cluster", "content_hash"], how="left")
        .sort(["cluster", *RANK, "record_id"], descending=[False, True, True, True, True, False])
        .with_columns(
            pl.col("row").first().over("cluster").alias("best_row"),
            pl.col("record_id").first().over("cluster").alias("best_id"),
            pl.col("content_hash").first().over("cluster").alias("best_hash"),
        )
    )
    to_old = pl.col("anchor").is_not_null()
    return rec.select(
        *keep,
        pl.when(to_old)
        .then(pl.coalesce("exact_old", "anchor"))
        .when(pl.col("row") != pl.col("best_row"))
        .then(pl.col("best_id"))
        .alias("_duplicate_of"),
        pl.when(to_old)
        .then(pl.when(pl.col("exact_old").is_not_null()).then(pl.lit("exact_dup")))
        .when(pl.col("row") != pl.col("best_row"))
        .then(pl.when(pl.col("content_hash") == pl.col("best_hash")).then(pl.lit("exact_dup")))
        .otherwise(pl.lit(None, dtype=pl.String))
        .alias("_reason"),
    ).with_columns(
        pl.when(pl.col("_duplicate_of").is_not_null())
        .then(pl.col("_reason").fill_null("near_dup"))
        .alias("_reason")
    )
