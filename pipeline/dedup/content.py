"""What dedup compares of a record: its normalized content, hashed, with its alarm codes,
code-like numbers, machine and completeness, and the node (content, codes, machine) it is.

The four parts are normalized (NFKC, lower case, whitespace, punctuation and control
characters removed; letters, digits and symbols such as alarm codes are kept) in batches of
`batch_size` records; the next batch is worked in a background thread while the caller
computes this one's signatures. Records with equal node keys are exact duplicates and share
one node (and one MinHash signature, computed for the first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import polars as pl
import pyarrow.compute as pc

from pipeline.dedup.hashing import (
    MIX,
    MIX2,
    TILE,
    codepoint_hashes,
    codepoints,
    fmix64,
    set_hashes,
    string_hashes,
)
from schemas.dedup import DedupConfig

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


def _unique(lists: pl.Series) -> pl.Series:
    """Distinct elements, in order of first mention (polars' list.sort is slow per row)."""
    return lists.fill_null([]).list.unique(maintain_order=True)


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


def _record_features(batch: pl.DataFrame, cfg: DedupConfig) -> dict:
    """Code points, hashes, guard sets (alarm codes, numbers) and completeness features."""
    parts = batch.select(normalized_text(c).alias(c) for c in CONTENT_PARTS)
    content = parts.select(pl.concat_str(CONTENT_PARTS, separator=_PART_SEP)).to_series()
    codes = _unique(
        batch.get_column("alarm_codes").list.eval(pl.element().str.to_lowercase())
        if "alarm_codes" in batch.columns
        else pl.Series([[]] * batch.height, dtype=pl.List(pl.String))
    )
    cps, starts, lengths = codepoints(content, max(cfg.shingle_size, TILE) - 1)
    lens = parts.select(pl.col(c).str.len_chars() for c in CONTENT_PARTS)
    return {
        "cps": cps,
        "starts": starts,
        "lengths": lengths,
        "content_hash": codepoint_hashes(cps, starts, lengths),
        "codes": codes,
        "numbers": _unique(content.str.extract_all(_NUMBER)),
        "codes_hash": set_hashes(codes),
        "machine_hash": _machine_hashes(
            batch, [c for c in cfg.machine_columns if c in batch.columns]
        ),
        "has_codes": (codes.list.len() > 0).to_numpy(),
        "n_parts": lens.select(pl.sum_horizontal(pl.all() > 0)).to_series().to_numpy(),
        "cause_len": lens.get_column("cause").to_numpy(),
        "content_len": lens.select(pl.sum_horizontal(pl.all())).to_series().to_numpy(),
    }


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


def batch_features(df: pl.DataFrame, cfg: DedupConfig) -> Iterator[tuple[int, dict]]:
    """(first row, features) of each batch of `cfg.batch_size` records, in order: code
    points (`cps`, `starts`, `lengths`), `content_hash`, `codes`, `numbers`, `codes_hash`,
    `machine_hash` and the completeness features (`has_codes`, `n_parts`, `cause_len`,
    `content_len`). The next batch is worked in a background thread."""
    starts = range(0, df.height, cfg.batch_size)
    features = _prefetched(lambda lo: _record_features(df.slice(lo, cfg.batch_size), cfg), starts)
    return zip(starts, features, strict=True)


def node_keys(content: np.ndarray, codes: np.ndarray, machine: np.ndarray) -> np.ndarray:
    """Identity of a node: normalized content together with its alarm codes and machine."""
    return fmix64(content ^ (codes * MIX2) ^ fmix64(machine ^ MIX))


def _in_sorted(values: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """Which values occur in the ascending array (binary search, no re-sort)."""
    if len(ascending) == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(ascending, values), len(ascending) - 1)
    return ascending[at] == values


def new_nodes(
    key: np.ndarray, n_parts: np.ndarray, seen: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Which records of a batch introduce a node: the first record with content of each key
    that is not in `seen` (the keys of earlier batches, ascending); and `seen` with theirs."""
    first = np.zeros(len(key), dtype=bool)
    first[np.unique(key, return_index=True)[1]] = True
    rep = first & (n_parts > 0) & ~_in_sorted(key, seen)
    return rep, np.sort(np.concatenate([seen, key[rep]]), kind="stable")  # a merge of two runs
