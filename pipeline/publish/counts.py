"""A snapshot's counts: rows per source kind, file, stage and outcome (carried over for the
unchanged files, counted from the step results for the others), the per-stage funnel, and
the headline (`manifest.counts`)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import polars as pl

from pipeline.funnels.incremental import carried_rows
from pipeline.publish.ledger import COUNTS_SCHEMA, RefreshPlan, file_counts, funnel
from schemas.manifest import Counts, Manifest, StageCounts, StageOutput


class CountedRun(Protocol):
    """What the counts read of one source kind's part of a refresh."""

    kind: str
    stage_order: tuple[str, ...]
    plan: RefreshPlan
    outputs: list[StageOutput]
    carries_published: bool
    unit_stage: str


def counts_by_file(runs: list[CountedRun], state: Path | None) -> pl.DataFrame:
    """Rows per (kind, file, stage, outcome): the carried files' rows from the last state,
    the others counted from this refresh's stage outputs (a file read in several shards
    summed over them)."""
    carried = [
        rows.filter(pl.col("source_kind") == r.kind)
        for r in runs
        if r.carries_published
        and (rows := carried_rows(state, "counts", r.plan.unchanged)) is not None
    ]
    counted = [
        file_counts(
            o.stage,
            pl.read_parquet(o.kept, columns=["source_kind", "source_file"]),
            pl.read_parquet(o.rejected, columns=["source_kind", "source_file", "reason"]),
        )
        for r in runs
        for o in r.outputs
    ]
    return (
        pl.concat([pl.DataFrame(schema=COUNTS_SCHEMA), *carried, *counted])
        .group_by("source_kind", "source_file", "stage", "outcome")
        .agg(pl.col("rows").sum())
        .sort("source_kind", "source_file", "stage", "outcome")
    )


def headline_counts(runs: list[CountedRun], by_file: pl.DataFrame, kept: int) -> Counts:
    """`read`: the records of every kind at its unit stage (work-order rows, alarm-log
    incidents); `rejected` and `by_reason`: the rejects from that stage on; `kept`: the SFT
    rows published. The stages before a unit stage (alarm-log lines and events) are counted
    per stage and in `manifest.sources`."""
    counted = [r for r in runs if r.stage_order]
    stages = funnel(by_file, {r.kind: list(r.stage_order) for r in counted})
    headline = {
        f"{r.kind}/{stage}"
        for r in counted
        for stage in r.stage_order[r.stage_order.index(r.unit_stage) :]
    }
    units = {f"{r.kind}/{r.unit_stage}" for r in counted}
    return Counts(
        read=sum(c.read for k, c in stages.items() if k in units),
        kept=kept,
        rejected=sum(c.rejected for k, c in stages.items() if k in headline),
        by_reason=_by_reason(stages, headline),
        stages=stages,
    )


def _by_reason(stages: dict[str, StageCounts], headline: set[str]) -> dict[str, int]:
    by_reason: dict[str, int] = {}
    for name, c in stages.items():
        for reason, n in c.by_reason.items():
            if name in headline:
                by_reason[reason] = by_reason.get(reason, 0) + n
    return dict(sorted(by_reason.items()))


def summed_counters(parts: list[dict[str, int]]) -> dict[str, int]:
    """Counters of one stage run a chunk at a time, summed, in `stage_result`'s order: read,
    kept, rejected, rows per reason (sorted), then the others in the order first seen."""
    total: dict[str, int] = {}
    for part in parts:
        for name, n in part.items():
            total[name] = total.get(name, 0) + n
    head = [k for k in ("read", "kept", "rejected") if k in total]
    reasons = sorted(k for k in total if k.startswith("rejected_"))
    rest = [k for k in total if k not in head and k not in reasons]
    return {k: total[k] for k in (*head, *reasons, *rest)}


def no_samples_reason(manifest: Manifest) -> str | None:
    """One line saying why a snapshot holds no SFT samples; None when it holds some."""
    counts = manifest.counts
    if counts.kept:
        return None
    if not counts.stages:
        kinds = sorted({i.source_kind for i in manifest.inputs}) or ["none"]
        read = ", ".join(kinds)
        return f"no SFT samples: no work orders or alarm logs among the inputs (read: {read})"
    top = sorted(counts.by_reason.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    reasons = ", ".join(f"{r} {n}" for r, n in top) or "no rows read"
    incidents = manifest.sources.get("alarm_log", {}).get("incidents", 0)
    kept = f"; {incidents} alarm incidents are published in incidents/" if incidents else ""
    return f"no SFT samples: all {counts.read} records read were rejected ({reasons}){kept}"
