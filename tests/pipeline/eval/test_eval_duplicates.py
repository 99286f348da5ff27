"""Evaluation set, duplicates: re-typed copies of one incident are merged, hard negatives
(same machine and alarm, another cause or action; another alarm; another machine; the same
fault weeks later) stay apart. Runs the real normalize, filter and dedup stages."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import polars as pl
import yaml

from pipeline.dedup.content import normalized_text
from pipeline.stages.filters import apply_filters
from pipeline.stages.normalize import normalize
from schemas.dedup import DedupConfig
from schemas.filters import FilterConfig
from schemas.normalize import NormalizeConfig
from schemas.records import INGESTED_SCHEMA
from tests.pipeline.dedup.oracle import dedup

HERE = Path(__file__).parent


def ingested(records: list[dict]) -> pl.DataFrame:
    """Records as ingest hands them on: lineage and the export's string fields."""
    rows = [
        {
            "record_id": r["id"],
            "source_kind": "workorder",
            "source_file": "eval/orders.csv",
            "source_row": i + 2,
            **{
                f: r.get(f)
                for f in INGESTED_SCHEMA
                if f not in {"record_id", "source_kind"} and f not in {"source_file", "source_row"}
            },
        }
        for i, r in enumerate(records)
    ]
    return pl.DataFrame(rows, schema=INGESTED_SCHEMA)


def jaccard(a: str, b: str, k: int = 5) -> float:
    sa = {a[i : i + k] for i in range(max(len(a) - k + 1, 1))}
    sb = {b[i : i + k] for i in range(max(len(b) - k + 1, 1))}
    return len(sa & sb) / len(sa | sb)


def test_retyped_duplicates_merge_and_hard_negatives_stay_apart() -> None:
    records = yaml.safe_load((HERE / "duplicates.yaml").read_text(encoding="utf-8"))["records"]
    incident = {r["id"]: r["incident"] for r in records}
    normalized = normalize(ingested(records), NormalizeConfig()).kept
    filtered = apply_filters(normalized, FilterConfig())
    assert filtered.rejected.height == 0
    result, _ = dedup(filtered.kept, DedupConfig())

    # each record's cluster: the record it was merged into, or itself
    kept_as = dict(result.rejected.select("record_id", "duplicate_of").iter_rows())
    cluster = {rid: kept_as.get(rid, rid) for rid in incident}
    true_pairs = {p for p in combinations(sorted(incident), 2) if incident[p[0]] == incident[p[1]]}
    merged = {p for p in combinations(sorted(incident), 2) if cluster[p[0]] == cluster[p[1]]}
    false_merges = merged - true_pairs
    recall = len(true_pairs & merged) / len(true_pairs)
    assert not false_merges
    assert recall >= 0.95, sorted(true_pairs - merged)

    # the set is what it claims: most true pairs are re-typed copies at J 0.5-0.8 or below
    text = normalized.select(
        "record_id",
        pl.concat_str([normalized_text(c) for c in ("symptom", "cause", "action", "prevention")]),
    )
    by_id = dict(text.iter_rows())
    similarity = [jaccard(by_id[a], by_id[b]) for a, b in true_pairs]
    assert sum(j < 0.8 for j in similarity) >= len(true_pairs) * 0.8
