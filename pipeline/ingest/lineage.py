"""Stable record ids: a hash of source kind, file, row and raw content."""

from __future__ import annotations

import polars as pl
import xxhash


def record_ids(kind: str, file: str, rows: pl.Series, raw: pl.Series) -> pl.Series:
    """16-hex-digit xxh3 of `kind`, `file`, row number and raw text, one per row.

    Stable across runs, machines and library versions (polars' own hash is not).
    """
    prefix = f"{kind}\x1f{file}\x1f"
    ids = [
        xxhash.xxh3_64_hexdigest(f"{prefix}{row}\x1f{text}".encode())
        for row, text in zip(rows.to_list(), raw.to_list(), strict=True)
    ]
    return pl.Series("record_id", ids, dtype=pl.String)
