"""Which candidate pairs are one incident entered twice: the rules of schemas.dedup.

A pair is merged on very similar text (signature agreement >= `threshold`), or on
moderately similar text when machine, alarm codes, reported date and the diagnosis and
action columns agree. A pair on two machines, or whose alarm codes or code-like numbers
contradict each other, is never merged; a re-typing slip in a code or number is weighed
(at most `max_code_slips`, on very similar text only), another code is not. Damaged fields
are no evidence either way.
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from pipeline.stages.normalize import is_unrecoverable
from schemas.dedup import DedupConfig

EVIDENCE = ("reported_at", "diagnosis", "action")


def evidence(df: pl.DataFrame, rows: np.ndarray, cfg: DedupConfig) -> dict[str, pl.Series]:
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
    return {c: out.get_column(c) for c in EVIDENCE}


def _agreement(sig: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Share of equal signature values per pair (MinHash estimate of Jaccard)."""
    out = np.empty(len(u), dtype=np.float64)
    step = 1 << 15
    for s in range(0, len(u), step):
        eq = sig[u[s : s + step]] == sig[v[s : s + step]]
        out[s : s + step] = np.count_nonzero(eq, axis=1) / sig.shape[1]
    return out


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


def _one_incident(nodes: dict, u: np.ndarray, v: np.ndarray, cfg: DedupConfig) -> np.ndarray:
    """Which pairs of moderately similar text are one incident by what the records say:
    reported within `time_window_days` (under either reading of the dates), and diagnosis
    and action not disagreeing, at least one of them agreeing."""
    days = _days(nodes["reported_at"])
    apart = np.abs(days[u] - days[v])  # per reading of the dates
    near_in_time = np.flatnonzero((apart <= cfg.time_window_days).any(axis=1))  # NaN: False
    u, v = u[near_in_time], v[near_in_time]
    verdicts = [
        _agree(nodes[p].gather(u), nodes[p].gather(v), cfg) for p in ("diagnosis", "action")
    ]
    said = (verdicts[0] >= 0) | (verdicts[1] >= 0)
    out = np.zeros(len(apart), dtype=bool)
    out[near_in_time[said & (verdicts[0] != 0) & (verdicts[1] != 0)]] = True
    return out


def decide_pairs(
    nodes: dict, sig: np.ndarray, u: np.ndarray, v: np.ndarray, cfg: DedupConfig
) -> dict:
    """Which candidate pairs (u, v: rows of `nodes` and `sig`) are one incident: the merged
    pairs `u`, `v` and the PAIR_COUNTERS. `nodes` holds per node its `machine` hash, its
    `codes` and `numbers` (guard sets) and its EVIDENCE columns. Alarm codes agree when
    neither record has one the other lacks, or one names none."""
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
    by_incident = maybe[_one_incident(nodes, u[maybe], v[maybe], cfg)]
    merged = by_text.copy()
    merged[by_incident] = True
    counts = (by_text.sum(), len(by_incident), (by_text & (slips > 0)).sum(), (~clean).sum())
    counters = dict(zip(PAIR_COUNTERS, map(int, counts), strict=True))
    return {"u": u[merged], "v": v[merged], **counters}
