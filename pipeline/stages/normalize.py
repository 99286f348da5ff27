"""The normalize stage for work orders: repair, canonicalize and redact; every row is kept.

The text helpers it applies live in `pipeline/text/` and are shared with the other sources.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain

import polars as pl

from pipeline.core.stage import StageResult, empty_rejects, stage_result
from pipeline.text.alarm_codes import extract_alarm_codes
from pipeline.text.language import detect_language
from pipeline.text.mojibake import finish_text, fix_mojibake, is_unrecoverable
from pipeline.text.pii import count_placeholders, known_names, redact_pii
from schemas.ingest import CUSTOMER_COLUMN
from schemas.normalize import NormalizeConfig
from schemas.records import (
    INGESTED_SCHEMA,
    NAME_FIELDS,
    NORMALIZED_EXTRA,
    TEXT_FIELDS,
    WORKORDER_FIELDS,
)

_NO_REPAIRS = pl.lit([], dtype=pl.List(pl.String))


def normalize(
    df: pl.DataFrame, cfg: NormalizeConfig, other_names: Iterable[str] = ()
) -> StageResult:
    """Repair, canonicalize and redact work orders; every row is kept.

    Adds the NORMALIZED_EXTRA columns: language, alarm_codes, pii_redactions, repairs.
    Person names come from the frame's name columns and `other_names` (the name columns of
    the other files in the same run), and are redacted wherever they appear in the text.
    """
    missing = [c for c in INGESTED_SCHEMA if c not in df.columns]
    if missing:
        raise ValueError(f"normalize: input lacks columns {missing}")
    repaired = _repair(df, cfg)
    names = known_names(
        chain(
            (v for f in NAME_FIELDS for v in repaired.get_column(f).unique().to_list()), other_names
        ),
        cfg,
    )
    # Configured customer names, and the values of the file's customer column (never kept).
    customers = [*cfg.customer_names]
    if CUSTOMER_COLUMN in repaired.columns:
        customers += known_names(repaired.get_column(CUSTOMER_COLUMN).unique().to_list(), cfg)
        repaired = repaired.drop(CUSTOMER_COLUMN)
    out = (
        _annotate(repaired, cfg)
        .pipe(_redact, names, customers)
        .select(*[c for c in repaired.columns if c not in NORMALIZED_EXTRA], *NORMALIZED_EXTRA)
        .cast(NORMALIZED_EXTRA)
    )
    return stage_result(out, empty_rejects(), read=df.height, **_counts(out))


def _repair(df: pl.DataFrame, cfg: NormalizeConfig) -> pl.DataFrame:
    """Fix mojibake and finish the text of every work-order field; the repairs made go to a
    `repairs` list column, which also says "unrecoverable" when a field stays garbled."""
    fields = list(WORKORDER_FIELDS)
    fixed = df.with_columns([fix_mojibake(pl.col(f), cfg).alias(f"_fix_{f}") for f in fields])
    unrecoverable = pl.any_horizontal([is_unrecoverable(pl.col(f)) for f in fields])
    return (
        fixed.with_columns(
            *[
                finish_text(
                    pl.coalesce(pl.col(f"_fix_{f}").struct.field("text"), pl.col(f)), cfg
                ).alias(f)
                for f in fields
            ],
            pl.concat_list(
                [pl.col(f"_fix_{f}").struct.field("repairs").fill_null(_NO_REPAIRS) for f in fields]
            ).alias("repairs"),
        )
        .drop([f"_fix_{f}" for f in fields])
        .with_columns(
            pl.col("repairs")
            .list.concat(
                pl.when(unrecoverable).then(pl.lit(["unrecoverable"])).otherwise(_NO_REPAIRS)
            )
            .list.unique(maintain_order=True)
        )
    )


def _annotate(repaired: pl.DataFrame, cfg: NormalizeConfig) -> pl.DataFrame:
    """Add language, alarm codes and the placeholders the text holds before redaction."""
    text = pl.concat_str([pl.col(f) for f in TEXT_FIELDS], separator="\n", ignore_nulls=True)
    return repaired.with_columns(
        detect_language(text, cfg.min_han_share).alias("language"),
        extract_alarm_codes(text, pl.col("machine_model"), cfg, pl.col("asset")).alias(
            "alarm_codes"
        ),
        (-_placeholders()).alias("_pii_before"),
    )


def _redact(df: pl.DataFrame, names: Sequence[str], customers: Sequence[str]) -> pl.DataFrame:
    """Redact names and customers in the text, replace the name fields by "[NAME]", and count
    the redactions per row (`pii_redactions`): new placeholders plus replaced names."""
    return (
        df.with_columns(
            *[redact_pii(pl.col(f), names, customers) for f in TEXT_FIELDS],
            *[
                pl.when(pl.col(f).is_not_null()).then(pl.lit("[NAME]")).alias(f)
                for f in NAME_FIELDS
            ],
            pl.sum_horizontal(
                [
                    (pl.col(f).is_not_null() & (pl.col(f) != "[NAME]")).cast(pl.Int32)
                    for f in NAME_FIELDS
                ]
            ).alias("_pii_names"),
        )
        .with_columns(
            (_placeholders() + pl.col("_pii_before") + pl.col("_pii_names"))
            .cast(pl.Int32)
            .alias("pii_redactions")
        )
        .drop("_pii_before", "_pii_names")
    )


def _placeholders() -> pl.Expr:
    """Placeholders ("[NAME]", "[PHONE]", ...) in a row's text fields."""
    return pl.sum_horizontal([count_placeholders(pl.col(f)) for f in TEXT_FIELDS])


def _counts(out: pl.DataFrame) -> dict[str, int]:
    """The stage's counters: repairs made, rows redacted and rows with alarm codes."""
    counts = out.select(
        pl.col("repairs").list.contains("ftfy").sum().alias("repaired_ftfy"),
        pl.col("repairs").list.contains("gbk_as_utf8").sum().alias("repaired_gbk_as_utf8"),
        pl.col("repairs").list.contains("unrecoverable").sum().alias("unrecoverable"),
        (pl.col("pii_redactions") > 0).sum().alias("pii_redacted"),
        pl.col("pii_redactions").sum().alias("pii_strings_redacted"),
        (pl.col("alarm_codes").list.len() > 0).sum().alias("with_alarm_codes"),
    ).row(0, named=True)
    return {k: int(v or 0) for k, v in counts.items()}
