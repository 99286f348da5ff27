"""The one language rule: 'zh' or 'en' from the share of Han characters."""

from __future__ import annotations

import polars as pl


def detect_language(expr: pl.Expr, min_han_share: float = 0.2) -> pl.Expr:
    """'zh' when Han characters make up at least `min_han_share` of Han + Latin letters.

    Han is counted as characters of three UTF-8 bytes (CJK ideographs and punctuation), from
    byte and character lengths: no regex pass.
    """
    han = ((expr.str.len_bytes() - expr.str.len_chars()) // 2).fill_null(0)
    latin = expr.str.count_matches(r"[A-Za-z]").fill_null(0)
    is_zh = (han > 0) & (han >= pl.lit(min_han_share) * (han + latin))
    return pl.when(is_zh).then(pl.lit("zh")).otherwise(pl.lit("en"))


def record_language(df: pl.DataFrame, text_cols: list[str], min_han_share: float = 0.2) -> pl.Expr:
    """The record's `language` column where set, else `detect_language` over `text_cols`."""
    text = pl.concat_str([pl.col(c) for c in text_cols], separator=" ", ignore_nulls=True)
    detected = detect_language(text, min_han_share)
    if "language" in df.columns:
        return pl.col("language").fill_null(detected)
    return detected
