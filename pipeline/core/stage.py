"""The stage contract: a name, the columns it needs and adds, and
`run(frame, config) -> StageResult(kept, rejected, counters)`.

Stage functions stay plain functions over polars frames; a `Stage` names one for a funnel
(`pipeline/funnels/`), which checks `needs` before running it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import polars as pl

from pipeline.text.pii import redact_pii
from schemas.config import PipelineConfig
from schemas.records import LINEAGE_SCHEMA, REJECT_SCHEMA


class StageInputError(ValueError):
    """A stage was handed a frame without a column it needs."""


@dataclass(frozen=True)
class StageResult:
    """Output of one stage. `counters` holds `read`, `kept`, `rejected` and one entry per reason;
    `state` holds side tables a later refresh needs (e.g. the dedup index)."""

    kept: pl.DataFrame
    rejected: pl.DataFrame
    counters: dict[str, int] = field(default_factory=dict)
    state: dict[str, pl.DataFrame] = field(default_factory=dict)

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
    """Turn rejected rows into the rejects table, keeping the whole row as a JSON payload,
    redacted like kept rows (phones, e-mails, ID numbers, cued names): rejects are published."""
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
        redact_pii(pl.struct(payload_cols).struct.json_encode()).alias("payload"),
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


@dataclass(frozen=True)
class Stage:
    """One step of a funnel: `fn(frame, config)` with the columns it needs and adds."""

    name: str
    needs: tuple[str, ...]
    adds: tuple[str, ...]
    fn: Callable[[pl.DataFrame, PipelineConfig], StageResult]

    def run(self, frame: pl.DataFrame, config: PipelineConfig) -> StageResult:
        missing = [c for c in self.needs if c not in frame.columns]
        if missing:
            raise StageInputError(f"stage {self.name}: input lacks column(s) {', '.join(missing)}")
        return self.fn(frame, config)


def run_stages(
    stages: Sequence[Stage], frame: pl.DataFrame, config: PipelineConfig
) -> dict[str, StageResult]:
    """Run `stages` in order, each on the rows the previous one kept; results by stage name."""
    results: dict[str, StageResult] = {}
    for stage in stages:
        results[stage.name] = stage.run(frame, config)
        frame = results[stage.name].kept
    return results
