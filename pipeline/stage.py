"""The stage contract: every stage returns what it kept, what it rejected and its counters."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from schemas.records import LINEAGE_SCHEMA, REJECT_SCHEMA


@dataclass(frozen=True)
class StageResult:
    """Output of one stage. `counters` holds `read`, `kept`, `rejected` and one entry per reason."""

    kept: pl.DataFrame
    rejected: pl.DataFrame
    counters: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        read = self.counters.get("read")
        if read is not None and read != self.kept.height + self.rejected.height:
            raise AssertionError(
                f"stage counters do not add up: read={read} kept={self.kept.height} "
                f"rejected={self.rejected.height}"
            )


def empty_rejects() -> pl.DataFrame:
    return pl.DataFrame(schema=REJECT_SCHEMA)


def make_rejects(
    df: pl.DataFrame,
    stage: str,
    reason: str | pl.Expr,
    detail: str | pl.Expr | None = None,
    duplicate_of: pl.Expr | None = None,
) -> pl.DataFrame:
    """Turn rejected rows into the rejects table, keeping the whole row as a JSON payload."""
    if df.height == 0:
        return empty_rejects()
    payload_cols = [c for c in df.columns if not c.startswith("_")]

    def lit_or(expr: str | pl.Expr | None) -> pl.Expr:
        if isinstance(expr, pl.Expr):
            return expr.cast(pl.String)
        return pl.lit(expr, dtype=pl.String)

    lineage = [
        (pl.col(c).cast(t) if c in df.columns else pl.lit(None, dtype=t)).alias(c)
        for c, t in LINEAGE_SCHEMA.items()
    ]
    return df.select(
        *lineage,
        pl.lit(stage, dtype=pl.String).alias("stage"),
        lit_or(reason).alias("reason"),
        lit_or(detail).alias("detail"),
        lit_or(duplicate_of).alias("duplicate_of"),
        pl.struct(payload_cols).struct.json_encode().alias("payload"),
    )


def stage_result(
    kept: pl.DataFrame, rejected: pl.DataFrame, read: int, **extra: int
) -> StageResult:
    """Build a StageResult whose counters include read/kept/rejected and rows per reason."""
    by_reason = Counter(rejected.get_column("reason").to_list()) if rejected.height else Counter()
    counters = {"read": read, "kept": kept.height, "rejected": rejected.height}
    counters.update({f"rejected_{r}": n for r, n in sorted(by_reason.items())})
    counters.update(extra)
    return StageResult(kept=kept, rejected=rejected, counters=counters)
