"""Per cluster of duplicates, which record is kept: the most complete one, or the
published records of the cluster (never rejected); the others are rejected against it."""

from __future__ import annotations

import polars as pl

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
