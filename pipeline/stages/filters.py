"""Coarse rule filters: each rejected record gets exactly one reason code, the first that applies.

Runs after normalization, so PII is already replaced by placeholders such as [PHONE] and alarm
codes are in the `alarm_codes` column.
"""

from __future__ import annotations

import re

import polars as pl

from pipeline.core.stage import StageResult, make_rejects, stage_result
from pipeline.text.regex import any_of
from schemas.filters import FilterConfig

STAGE = "filter"
_PARTS = ("symptom", "cause", "action", "prevention")
_PLACEHOLDER_TOKENS = r"\[(?:PHONE|EMAIL|ID|NAME)\]"


def _content() -> pl.Expr:
    return pl.concat_str([pl.col(c) for c in _PARTS], separator=" ", ignore_nulls=True).fill_null(
        ""
    )


def reason_expr(cfg: FilterConfig) -> pl.Expr:
    """An expression giving each row's reject reason, or null to keep it."""
    content = _content()
    bare = content.str.replace_all(r"[\s\p{P}\p{S}]+", "")
    test = pl.any_horizontal(
        pl.col(c).fill_null("").str.contains(any_of(cfg.test_markers))
        for c in ("order_id", "symptom", "action", "remarks")
    )
    placeholder_values = sorted({p.lower() for p in cfg.placeholders})
    part_is_placeholder = [
        pl.col(c).is_null()
        | pl.col(c).str.to_lowercase().str.strip_chars().is_in(placeholder_values)
        for c in _PARTS
    ]
    placeholder = pl.all_horizontal(part_is_placeholder) & pl.any_horizontal(
        pl.col(c).is_not_null() for c in _PARTS
    )
    without_pii = content.str.replace_all(_PLACEHOLDER_TOKENS, "")
    phone_only = content.str.contains(r"\[PHONE\]") & (
        without_pii.str.replace_all(
            r"(?i)[\s\p{P}\p{S}\d]|电话|手机|联系|tel|phone|call|me", ""
        ).str.len_chars()
        < 2
    )
    has_codes = pl.col("alarm_codes").list.len().fill_null(0) > 0
    technical = has_codes | content.str.to_lowercase().str.contains(
        any_of([re.escape(t.lower()) for t in cfg.technical_terms])
    )
    complaint = content.str.contains(any_of(cfg.complaint_markers))
    unrecoverable = pl.col("repairs").list.contains("unrecoverable").fill_null(False)
    return (
        pl.when(test)
        .then(pl.lit("test_entry"))
        .when(bare.str.len_chars() == 0)
        .then(pl.lit("empty"))
        .when(placeholder)
        .then(pl.lit("placeholder"))
        .when(phone_only)
        .then(pl.lit("phone_only"))
        .when(unrecoverable & ~technical)
        .then(pl.lit("unrecoverable_encoding"))
        .when(bare.str.len_chars() < cfg.min_chars)
        .then(pl.lit("too_short"))
        .when(~technical & complaint)
        .then(pl.lit("complaint_only"))
        .when(~technical)
        .then(pl.lit("no_technical_content"))
    )


def apply_filters(df: pl.DataFrame, cfg: FilterConfig) -> StageResult:
    """Split normalized records into kept and rejected, with a reason per rejected row."""
    marked = df.with_columns(reason_expr(cfg).alias("_reason"))
    rejected_rows = marked.filter(pl.col("_reason").is_not_null())
    kept = marked.filter(pl.col("_reason").is_null()).drop("_reason")
    rejected = make_rejects(
        rejected_rows,
        STAGE,
        pl.col("_reason"),
        detail=pl.concat_str(
            [pl.col("source_file"), pl.col("source_row").cast(pl.String)], separator=":"
        ),
    )
    return stage_result(kept, rejected, read=df.height)
