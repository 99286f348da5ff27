"""A corpus refresh: plan each source kind's files, run its funnel steps, publish one snapshot.

`refresh` is what every flow runs. Steps go through a `Runner`: in this process by default,
as cached Prefect tasks from `flows/`. Work orders run per file (ingest, then normalize and
filter) and over the run (dedup to render); manuals and alarm logs are parsed per new or
changed file and their funnels rebuilt over all parsed rows.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.funnels import alarm_logs, manuals, workorders
from pipeline.funnels.incremental import FilePlan, carried_published, carried_rows, plan_files
from pipeline.funnels.keys import code_fingerprint, code_version, step_key
from pipeline.funnels.sharded_dedup import dedup_shards
from pipeline.funnels.snapshot import Published, SourceRun, empty_sft, publish_snapshot
from pipeline.funnels.stage_files import load_state
from pipeline.funnels.steps import Call, Runner, in_process
from pipeline.ingest.alarm_logs import alarm_log_files
from pipeline.ingest.manuals import manual_files
from pipeline.ingest.workorders import discover_files
from pipeline.locking import corpus_lock
from pipeline.publish import latest_snapshot, latest_state
from pipeline.stage import empty_rejects
from schemas.alarm_logs import ALARM_EVENT_SCHEMA
from schemas.config import PipelineConfig
from schemas.manifest import StageOutput
from schemas.manuals import MANUAL_SECTION_SCHEMA


@dataclass(frozen=True)
class Sources:
    """What a refresh reads: the input root, and a folder per source kind (None: not read)."""

    root: Path
    workorders: Path | None = None
    alarm_logs: Path | None = None
    manuals: Path | None = None


@dataclass(frozen=True)
class _Run:
    """What every step of one refresh shares."""

    out: Path
    work: Path
    cfg: PipelineConfig
    runner: Runner
    state: Path | None
    previous: Path | None
    base: tuple[str, ...]  # config hash, code fingerprint, previous snapshot

    def save(self, name: str, frame: pl.DataFrame) -> str:
        """Write a frame a step reads (carried rows) under the work folder."""
        self.work.mkdir(parents=True, exist_ok=True)
        path = self.work / f"{name}.parquet"
        frame.write_parquet(path)
        return str(path)


def lineage_root(folder: Path, root: Path) -> Path:
    """Files are named relative to the run's input root; a folder outside it (a manuals
    folder given to clean-fault-logs, say) names them relative to its own parent."""
    return root if folder.resolve().is_relative_to(root.resolve()) else folder.parent


def refresh(
    flow_name: str,
    sources: Sources,
    out: Path,
    cfg: PipelineConfig,
    runner: Callable[[Path, PipelineConfig], Runner] = in_process,
) -> Published:
    """Refresh the corpus under `out` from `sources` and publish one snapshot."""
    with corpus_lock(out, cfg.publish.lock_wait_s):
        state, work = latest_state(out), out / "state" / "work"
        run = _Run(
            out,
            work,
            cfg,
            runner(work, cfg),
            state,
            latest_snapshot(out),
            (cfg.config_hash(), code_fingerprint(), state.name if state else "none"),
        )
        runs = []
        if sources.workorders is not None:
            runs.append(
                _workorders(run, sources.workorders, lineage_root(sources.workorders, sources.root))
            )
        if sources.manuals is not None:
            runs.append(_manuals(run, sources.manuals, lineage_root(sources.manuals, sources.root)))
        if sources.alarm_logs is not None:
            root = lineage_root(sources.alarm_logs, sources.root)
            runs.append(_alarm_logs(run, sources.alarm_logs, root, runs))
        published = publish_snapshot(flow_name, out, cfg, runs, run.previous, state, code_version())
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(out / "state" / "task-results", ignore_errors=True)
    return published


def _ledger(run: _Run, plan: FilePlan, outputs: list[StageOutput]) -> list[pl.DataFrame]:
    """Ledger rows of the files processed now and of the unchanged ones."""
    carried = carried_rows(run.state, "ledger", plan.refresh.unchanged, column="path")
    if carried is not None:
        carried = carried.filter(pl.col("source_kind") == plan.kind)
    return [f for f in (carried, load_state(outputs, "ledger")) if f is not None]


def _workorders(run: _Run, folder: Path, root: Path) -> SourceRun:
    """Ingest each new or changed file in shards, clean each shard, dedup over the shards,
    then structure, tier and render each shard; shards run concurrently where the runner can."""
    plan = plan_files(workorders.KIND, discover_files(folder, run.cfg.ingest), root, run.state)
    todo = plan.refresh
    shard_rows = str(run.cfg.execution.shard_rows)
    calls = [
        Call(
            "workorders.ingest",
            step_key("workorders.ingest", path, plan.sha256[path], shard_rows, *run.base[:2]),
            {},
            {"path": str(plan.files[path]), "root": str(root)},
        )
        for path in todo.to_process
    ]
    files = run.runner.map(calls)
    ingested = [o for outs in files for o in outs.values()]  # shards, in file and row order
    names = sorted(
        set().union(
            *(
                workorders.technicians(pl.read_parquet(o.kept, columns=["technician"]))
                for o in ingested
            )
        )
    )
    cleaned = run.runner.map(
        [
            Call(
                "workorders.clean",
                step_key("workorders.clean", o.kept, *names),
                {"ingested": [o.kept]},
                {"names": names},
            )
            for o in ingested
        ]
    )
    outputs: list[StageOutput] = ingested + [o for c in cleaned for o in c.values()]
    index = carried_rows(run.state, "dedup_index", todo.unchanged)
    source = SourceRun(
        workorders.KIND,
        workorders.STAGE_ORDER,
        todo,
        carries_published=True,
        state={"dedup_index": [index]} if index is not None else {},
    )
    if ingested:
        previous = index.drop("source_file") if index is not None else None
        filtered = [c["filter"].kept for c in cleaned]
        base = (*todo.unchanged, *run.base)
        deduped = dedup_shards(run.runner, run.work, filtered, previous, run.cfg, base)
        samples = run.runner.map(
            [
                Call(
                    "workorders.samples",
                    step_key("workorders.samples", d.kept),
                    {"kept": [d.kept]},
                    {},
                )
                for d in deduped
            ]
        )
        outputs += deduped + [o for s in samples for o in s.values()]
        source.sft = [s["render"].kept for s in samples]
        source.state = {
            "dedup_index": [
                *([index] if index is not None else []),
                *(d.state["index"] for d in deduped),
            ]
        }
    source.outputs = outputs
    source.ledger = _ledger(run, plan, [o for o in ingested if "ledger" in o.state])
    return source


def _source_index(sources: list, source: object) -> int:
    return next(i for i, s in enumerate(sources) if s is source)


def _parse(
    run: _Run, step: str, plan: FilePlan, claimed: dict[Path, object], sources: list, root: Path
) -> tuple[list[str], list[StageOutput]]:
    """Parse the new and changed files of `plan`: step keys and outputs."""
    keys, outputs = [], []
    for path in plan.refresh.to_process:
        file = plan.files[path]
        key = step_key(step, path, plan.sha256[path], *run.base[:2])
        params = {
            "path": str(file),
            "root": str(root),
            "source": _source_index(sources, claimed[file]),
        }
        result = run.runner(step, key, {}, params)
        keys.append(key)
        outputs += result.values()
    return keys, outputs


def _with_carried(
    run: _Run, name: str, carried: list[str], new: list[str], empty: pl.DataFrame
) -> list[str]:
    """Paths of this run's rows plus the carried rows of state table `name`."""
    rows = carried_rows(run.state, name, carried)
    return [run.save(f"carried_{name}", rows if rows is not None else empty), *new]


def _manuals(run: _Run, folder: Path, root: Path) -> SourceRun:
    claimed = dict(manual_files(folder, run.cfg.manuals))
    plan = plan_files(manuals.KIND, list(claimed), root, run.state)
    keys, parsed = _parse(run, "manuals.parse", plan, claimed, run.cfg.manuals.sources, root)
    carried = plan.refresh.unchanged
    empty_sections = pl.DataFrame(schema=MANUAL_SECTION_SCHEMA)
    sections = _with_carried(
        run, "manual_sections", carried, [o.kept for o in parsed], empty_sections
    )
    section_rejects = _with_carried(
        run, "manual_section_rejects", carried, [o.rejected for o in parsed], empty_rejects()
    )
    source = SourceRun(manuals.KIND, (), plan.refresh, ledger=_ledger(run, plan, parsed))
    if not plan.files:
        return source
    key = step_key("manuals.funnel", *keys, *carried, *run.base)
    result = run.runner("manuals.funnel", key, {"sections": sections}, {"root": str(root)})
    all_sections = pl.concat([pl.read_parquet(p) for p in sections], how="vertical_relaxed")
    page_rejects = pl.concat([pl.read_parquet(p) for p in section_rejects], how="vertical_relaxed")
    source.state = {"manual_sections": all_sections, "manual_section_rejects": page_rejects}
    source.tables = {"pretrain": result["chunks"].kept, "fault_codes": result["fault_codes"].kept}
    source.side_rejects = [page_rejects] + [
        pl.read_parquet(result[s].rejected)
        for s in ("alarm_tables", "vendor_tables", "fault_codes")
    ]
    ledger = pl.concat(source.ledger)
    tables, vendor, kb = (
        result[s].counters for s in ("alarm_tables", "vendor_tables", "fault_codes")
    )
    source.sources = {
        "manual": {
            "files": ledger.height,
            "lines": int(ledger["lines"].sum()),
            "sections": all_sections.height,
            "rejected_pages": page_rejects.height,
            "chunks": result["chunks"].counters["kept"],
        },
        "fault_table": {
            "read": tables["read"] + vendor["read"],
            "kept": kb["kept"],
            "rejected": tables["rejected"] + vendor["rejected"] + kb["rejected"],
        },
    }
    return source


def _alarm_logs(run: _Run, folder: Path, root: Path, earlier: list[SourceRun]) -> SourceRun:
    claimed = dict(alarm_log_files(folder, run.cfg.alarm_logs))
    plan = plan_files(alarm_logs.KIND, list(claimed), root, run.state)
    keys, parsed = _parse(run, "alarm_logs.parse", plan, claimed, run.cfg.alarm_logs.sources, root)
    carried = plan.refresh.unchanged
    source = SourceRun(
        alarm_logs.KIND, alarm_logs.STAGE_ORDER, plan.refresh, ledger=_ledger(run, plan, parsed)
    )
    if not plan.files:
        return source
    events = _with_carried(
        run,
        "alarm_events",
        carried,
        [o.kept for o in parsed],
        pl.DataFrame(schema=ALARM_EVENT_SCHEMA),
    )
    ingest_rejects = _with_carried(
        run, "alarm_ingest_rejects", carried, [o.rejected for o in parsed], empty_rejects()
    )
    fault_codes = [p for r in earlier for name, p in r.tables.items() if name == "fault_codes"]
    if not fault_codes and run.previous is not None:
        published = sorted((run.previous / "fault_codes").glob("*.parquet"))
        if published:
            fault_codes = [run.save("published_fault_codes", pl.read_parquet(published))]
    workorder_runs = [r for r in earlier if r.carries_published]
    carried_workorders = [
        carried_published(run.previous, "sft", r.kind, r.plan.unchanged) for r in workorder_runs
    ]
    workorder_rows = pl.concat(
        [empty_sft(), *(f for f in carried_workorders if f is not None)], how="diagonal_relaxed"
    )
    inputs = {
        "events": events,
        "ingest_rejects": ingest_rejects,
        "fault_codes": fault_codes,
        "workorders": [run.save("carried_workorders", workorder_rows)]
        + [p for r in workorder_runs for p in r.sft],
    }
    key = step_key(
        "alarm_logs.funnel",
        *keys,
        *carried,
        *inputs["fault_codes"],
        *inputs["workorders"][1:],
        *run.base,
    )
    result = run.runner("alarm_logs.funnel", key, inputs, {})
    source.outputs = list(result.values())
    source.sft = [result["render"].kept]
    all_events = pl.read_parquet(result["ingest"].kept)
    source.state = {
        "alarm_events": all_events,
        "alarm_ingest_rejects": pl.read_parquet(result["ingest"].rejected),
    }
    ledger = pl.concat(source.ledger)
    source.sources = {
        "alarm_log": {
            "files": ledger.height,
            "lines": int(ledger["lines"].sum()),
            "skipped_non_alarm_lines": int(ledger["skipped_lines"].sum()),
            "events": all_events.height,
            "incidents": result["incidents"].counters["kept"],
        }
    }
    return source
