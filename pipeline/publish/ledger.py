"""The ledger of processed inputs and per-file funnel counts, for incremental refreshes.

A refresh compares the input files (path, size, sha256) with the ledger of the snapshot LATEST
names: only new or changed files are processed; unchanged files' records are carried over from
that snapshot; a changed or removed file's old records are dropped. Funnel counts are kept per
file and stage (long format), so a snapshot's totals add up over carried and new files alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import polars as pl

from schemas.manifest import StageCounts

LEDGER_SCHEMA: dict[str, pl.DataType] = {
    "path": pl.String(),
    "source_kind": pl.String(),
    "bytes": pl.Int64(),
    "sha256": pl.String(),
    "encoding": pl.String(),
    "rows": pl.Int64(),
    "skipped_lines": pl.Int64(),  # lines that hold no record (alarm logs: non-alarm lines)
    "lines": pl.Int64(),  # physical lines of a text source (alarm logs, manuals); else null
    "reader": pl.String(),  # kind:layout that read it (alarm_log:fanuc, workorder:csv, ...)
    "warning": pl.String(),  # one line when most of the file did not parse; else null
    "columns": pl.String(),  # work orders: JSON {field: header} of the column mapping used
}

# One row per (file, stage, outcome): outcome is "kept" or a reject reason.
COUNTS_SCHEMA: dict[str, pl.DataType] = {
    "source_kind": pl.String(),
    "source_file": pl.String(),
    "stage": pl.String(),
    "outcome": pl.String(),
    "rows": pl.Int64(),
}


@dataclass(frozen=True)
class RefreshPlan:
    new: list[str]
    changed: list[str]
    unchanged: list[str]
    removed: list[str]

    @property
    def to_process(self) -> list[str]:
        return sorted(self.new + self.changed)


def ledger_row(
    path: str,
    kind: str,
    size: int,
    sha256: str,
    encoding: str,
    rows: int,
    skipped: int = 0,
    lines: int | None = None,
    reader: str | None = None,
    warning: str | None = None,
    columns: dict[str, str] | None = None,
) -> pl.DataFrame:
    """The ledger entry of one input file."""
    row = {
        "path": path,
        "source_kind": kind,
        "bytes": size,
        "sha256": sha256,
        "encoding": encoding,
        "rows": rows,
        "skipped_lines": skipped,
        "lines": lines,
        "reader": reader,
        "warning": warning,
        "columns": None if columns is None else json.dumps(columns, ensure_ascii=False),
    }
    return pl.DataFrame([row], schema=LEDGER_SCHEMA)


def plan_refresh(current: pl.DataFrame, ledger: pl.DataFrame | None) -> RefreshPlan:
    """Classify `current` input files (path, sha256) against the previous ledger."""
    if ledger is None or ledger.height == 0:
        return RefreshPlan(new=sorted(current["path"]), changed=[], unchanged=[], removed=[])
    old = dict(zip(ledger["path"], ledger["sha256"], strict=True))
    now = dict(zip(current["path"], current["sha256"], strict=True))
    return RefreshPlan(
        new=sorted(p for p in now if p not in old),
        changed=sorted(p for p in now if p in old and old[p] != now[p]),
        unchanged=sorted(p for p in now if p in old and old[p] == now[p]),
        removed=sorted(p for p in old if p not in now),
    )


def file_counts(stage: str, kept: pl.DataFrame, rejected: pl.DataFrame) -> pl.DataFrame:
    """Rows kept and rejected (by reason) per source file at one stage."""
    kept_counts = kept.group_by("source_kind", "source_file").agg(
        pl.lit("kept").alias("outcome"), pl.len().cast(pl.Int64).alias("rows")
    )
    rejected_counts = rejected.group_by(
        "source_kind", "source_file", pl.col("reason").alias("outcome")
    ).agg(pl.len().cast(pl.Int64).alias("rows"))
    columns = ["source_kind", "source_file", pl.lit(stage).alias("stage"), "outcome", "rows"]
    return pl.concat([kept_counts.select(columns), rejected_counts.select(columns)]).cast(
        COUNTS_SCHEMA
    )  # type: ignore[arg-type]


def funnel(counts: pl.DataFrame, stage_order: dict[str, list[str]]) -> dict[str, StageCounts]:
    """`kind/stage` -> read/kept/rejected/by_reason summed over files, in pipeline order."""
    result: dict[str, StageCounts] = {}
    for kind, stage in ((k, s) for k, stages in stage_order.items() for s in stages):
        rows = counts.filter((pl.col("source_kind") == kind) & (pl.col("stage") == stage))
        if rows.height:
            result[f"{kind}/{stage}"] = _stage_counts(rows)
    return result


def _stage_counts(rows: pl.DataFrame) -> StageCounts:
    """One stage's rows per outcome (`kept` or a reason) summed into its counts."""
    totals = rows.group_by("outcome").agg(pl.col("rows").sum())
    by_outcome = dict(zip(totals["outcome"], totals["rows"], strict=True))
    kept = int(by_outcome.pop("kept", 0))
    by_reason = {k: int(v) for k, v in sorted(by_outcome.items())}
    rejected = sum(by_reason.values())
    return StageCounts(read=kept + rejected, kept=kept, rejected=rejected, by_reason=by_reason)
