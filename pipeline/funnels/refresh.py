"""A corpus refresh: list every input file, plan each source kind's files, run its funnel
steps, publish one snapshot.

`refresh` is what every flow runs. Every file under the input is classified first
(`pipeline.ingest.inventory`: content decides, configured patterns win); skipped files are
listed in the manifest with their reason and a warning line is printed for each. Steps go
through a `Runner`: in this process by default, as cached Prefect tasks from `flows/`. Work
orders run per file (ingest, then normalize and filter) and over the run (dedup to render);
manuals and alarm logs are parsed per new or changed file and their funnels rebuilt over all
parsed rows.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.alarms.incidents import WORKORDER_LINK_COLUMNS
from pipeline.core.paths import check_output
from pipeline.core.stage import empty_rejects
from pipeline.dedup.sharded import dedup_shards
from pipeline.execution.keys import code_fingerprint, code_version, step_key
from pipeline.execution.stage_files import load_state
from pipeline.execution.steps import PER_FILE as KINDS
from pipeline.execution.steps import Call, Runner, in_process
from pipeline.funnels import alarm_logs, manuals, workorders
from pipeline.funnels.incremental import (
    FilePlan,
    carried_parts,
    carried_rows,
    collect_published,
    plan_files,
    published_pieces,
)
from pipeline.funnels.quarantine import fail_if_strict, quarantine_rows
from pipeline.ingest.files import relative_path, sha256_file
from pipeline.ingest.inventory import InputEntry, inventory
from pipeline.publish.ledger import ledger_row
from pipeline.publish.locking import corpus_lock
from pipeline.publish.snapshot import Published, SourceRun, empty_sft, publish_snapshot
from pipeline.publish.writer import latest_snapshot, latest_state
from schemas.alarm_logs import ALARM_EVENT_SCHEMA, AlarmLogSource
from schemas.config import PipelineConfig
from schemas.manifest import SkippedFile, StageOutput
from schemas.manuals import MANUAL_SECTION_SCHEMA, ManualSource


@dataclass(frozen=True)
class Sources:
    """What a refresh reads: the input root, and a folder per source kind (None: not read).
    Every file under the root (and under each folder) is listed; a file's content decides its
    kind, and a kind is read from its folder only."""

    root: Path
    workorders: Path | None = None
    alarm_logs: Path | None = None
    manuals: Path | None = None

    @classmethod
    def everything(cls, root: Path) -> Sources:
        """Every kind, from anywhere under `root` (flat or in per-kind sub-folders)."""
        return cls(root, root, root, root)

    def folders(self) -> dict[str, Path | None]:
        return {"workorder": self.workorders, "alarm_log": self.alarm_logs, "manual": self.manuals}


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
    """Refresh the corpus under `out` from `sources` and publish one snapshot.

    Input files that cannot be read are quarantined (a reject row and a manifest entry) and
    the run goes on; with `cfg.strict` they fail it before anything is published.
    """
    folders = [f for f in (sources.workorders, sources.alarm_logs, sources.manuals) if f]
    check_output(out, [sources.root, *folders])
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
        entries = inventory(sources.root, sources.folders(), cfg)
        roots = {
            kind: lineage_root(folder, sources.root)
            for kind, folder in sources.folders().items()
            if folder is not None
        }
        of_kind = lambda kind: [e for e in entries if e.sniffed.kind == kind]  # noqa: E731
        runs = []
        if sources.workorders is not None:
            runs.append(_workorders(run, of_kind("workorder"), roots["workorder"]))
        if sources.manuals is not None:
            vendor = [e.path for e in of_kind("fault_table")]
            runs.append(_manuals(run, of_kind("manual"), vendor, roots["manual"]))
        if sources.alarm_logs is not None:
            runs.append(_alarm_logs(run, of_kind("alarm_log"), roots["alarm_log"], runs))
        for source_run in runs:
            broken = _broken(entries, source_run.kind, roots[source_run.kind])
            source_run.quarantined = pl.concat([source_run.quarantined, broken])
        fail_if_strict(cfg.strict, pl.concat([r.quarantined for r in runs]))
        skipped = _skipped(entries, sources.root)
        published = publish_snapshot(
            flow_name, out, cfg, runs, run.previous, state, code_version(), skipped
        )
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(out / "state" / "task-results", ignore_errors=True)
    for read in published.manifest.inputs:
        if read.warning:
            sys.stderr.write(f"warning: {read.warning}\n")
    return published


def _broken(entries: list[InputEntry], kind: str, root: Path) -> pl.DataFrame:
    """One quarantine row per broken file `kind` claimed (empty, binary, a damaged archive)."""
    files = {}
    for e in entries:
        if e.sniffed.kind == "broken" and e.sniffed.meant == (kind,):
            rel = relative_path(e.path, root)
            files[rel] = ("unreadable_file", f"{rel}: {e.sniffed.reason}")
    return quarantine_rows(kind, files)


def _skipped(entries: list[InputEntry], root: Path) -> list[SkippedFile]:
    """The files no reader reads, each announced on one warning line (written to stderr
    directly: a flow's print capture would turn it into an INFO log line)."""
    skipped = []
    for e in entries:
        if e.sniffed.kind != "skip":
            continue
        rel = relative_path(e.path, root) if e.path.is_relative_to(root) else str(e.path)
        sys.stderr.write(f"warning: {rel}: skipped: {e.sniffed.reason}\n")
        skipped.append(
            SkippedFile(path=rel, bytes=e.path.stat().st_size, reason=e.sniffed.reason or "")
        )
    return skipped


def _ledger(run: _Run, plan: FilePlan, outputs: list[StageOutput]) -> list[pl.DataFrame]:
    """Ledger rows of the files processed now and of the unchanged ones."""
    carried = carried_rows(run.state, "ledger", plan.refresh.unchanged, column="path")
    if carried is not None:
        carried = carried.filter(pl.col("source_kind") == plan.kind)
    return [f for f in (carried, load_state(outputs, "ledger")) if f is not None]


def _workorders(run: _Run, entries: list[InputEntry], root: Path) -> SourceRun:
    """Ingest each new or changed file in shards, clean each shard, dedup over the shards,
    then structure, tier and render each shard; shards run concurrently where the runner can.
    A file that cannot be read is quarantined whole."""
    layouts = {e.path: e.sniffed.layout or "auto" for e in entries}
    plan = plan_files(workorders.KIND, list(layouts), root, run.state)
    todo = plan.refresh
    shard_rows = str(run.cfg.execution.shard_rows)
    calls = []
    for path in todo.to_process:
        file = plan.files[path]
        parts = (path, plan.sha256[path], layouts[file], shard_rows, *run.base[:2])
        params = {"path": str(file), "root": str(root), "layout": layouts[file]}
        calls.append(Call("workorders.ingest", step_key("workorders.ingest", *parts), {}, params))
    ingested: list[StageOutput] = []  # shards, in file and row order
    quarantined = [quarantine_rows(workorders.KIND, plan.skipped)]
    for result in run.runner.map(calls):
        if "quarantine" in result:
            quarantined.append(pl.read_parquet(result["quarantine"].rejected))
        else:
            ingested += result.values()
    names = workorders.technicians(
        pl.concat(
            [pl.DataFrame(schema={"technician": pl.String})]
            + [pl.read_parquet(o.kept, columns=["technician"]).unique() for o in ingested]
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
    index = carried_parts(
        run.state, "dedup_index", todo.unchanged, run.work / "carried", run.cfg.execution.shard_rows
    )
    source = SourceRun(
        workorders.KIND,
        workorders.STAGE_ORDER,
        todo,
        carries_published=True,
        state={"dedup_index": index} if index else {},
        quarantined=pl.concat(quarantined),
    )
    if ingested:
        filtered = [c["filter"].kept for c in cleaned]
        base = (*todo.unchanged, *run.base)
        deduped = dedup_shards(run.runner, run.work, filtered, index, run.cfg, base)
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
        # written part by part: the carried rows, then each shard's kept records
        source.state = {"dedup_index": index + [d.state["index"] for d in deduped]}
    source.outputs = outputs
    source.ledger = _ledger(run, plan, [o for o in ingested if "ledger" in o.state])
    return source


def _parse(
    run: _Run,
    step: str,
    plan: FilePlan,
    claimed: dict[Path, ManualSource | AlarmLogSource],
    root: Path,
) -> tuple[list[str], list[StageOutput], pl.DataFrame]:
    """Parse the new and changed files of `plan`: step keys, outputs, quarantined files."""
    keys, outputs = [], []
    quarantined = [quarantine_rows(KINDS[step], plan.skipped)]
    for path in plan.refresh.to_process:
        file = plan.files[path]
        source = claimed[file].model_dump(mode="json")
        key = step_key(step, path, plan.sha256[path], str(sorted(source.items())), *run.base[:2])
        params = {"path": str(file), "root": str(root), "source": source}
        result = run.runner(step, key, {}, params)
        keys.append(key)
        if "quarantine" in result:
            quarantined.append(pl.read_parquet(result["quarantine"].rejected))
        else:
            outputs += result.values()
    return keys, outputs, pl.concat(quarantined)


def _with_carried(
    run: _Run, name: str, carried: list[str], new: list[str], empty: pl.DataFrame
) -> list[str]:
    """Paths of this run's rows plus the carried rows of state table `name`."""
    rows = carried_rows(run.state, name, carried)
    return [run.save(f"carried_{name}", rows if rows is not None else empty), *new]


def _manual_source(entry: InputEntry) -> ManualSource:
    if isinstance(entry.source, ManualSource):
        return entry.source
    return ManualSource(pattern=entry.path.name, format=entry.sniffed.layout)  # type: ignore[arg-type]


def _alarm_source(entry: InputEntry) -> AlarmLogSource:
    """The configured source (its layout resolved), or a default one in the sniffed layout."""
    source = entry.source if isinstance(entry.source, AlarmLogSource) else None
    source = source or AlarmLogSource(pattern=entry.path.name)
    return source.model_copy(update={"format": entry.sniffed.layout})


def _vendor_ledger(paths: list[Path], root: Path, kept: pl.DataFrame) -> list[pl.DataFrame]:
    """Ledger rows of the vendor fault tables read (rows: entries kept or rejected)."""
    per_file = kept.group_by("source_file").len()
    rows = dict(zip(per_file["source_file"], per_file["len"], strict=True))
    return [
        ledger_row(
            rel := relative_path(path, root),
            "fault_table",
            path.stat().st_size,
            sha256_file(path),
            "auto",
            rows=rows.get(rel, 0),
            reader="fault_table:vendor_table",
        )
        for path in paths
    ]


def _manuals(run: _Run, entries: list[InputEntry], vendor: list[Path], root: Path) -> SourceRun:
    claimed = {e.path: _manual_source(e) for e in entries}
    plan = plan_files(manuals.KIND, list(claimed), root, run.state)
    keys, parsed, quarantined = _parse(run, "manuals.parse", plan, claimed, root)
    carried = plan.refresh.unchanged
    empty_sections = pl.DataFrame(schema=MANUAL_SECTION_SCHEMA)
    sections = _with_carried(
        run, "manual_sections", carried, [o.kept for o in parsed], empty_sections
    )
    section_rejects = _with_carried(
        run, "manual_section_rejects", carried, [o.rejected for o in parsed], empty_rejects()
    )
    source = SourceRun(
        manuals.KIND, (), plan.refresh, ledger=_ledger(run, plan, parsed), quarantined=quarantined
    )
    if not plan.files and not vendor:
        return source
    key = step_key("manuals.funnel", *keys, *carried, *map(sha256_file, vendor), *run.base)
    result = run.runner("manuals.funnel", key, {"sections": sections}, {"root": str(root)})
    all_sections = pl.concat([pl.read_parquet(p) for p in sections], how="vertical_relaxed")
    page_rejects = pl.concat([pl.read_parquet(p) for p in section_rejects], how="vertical_relaxed")
    source.state = {"manual_sections": all_sections, "manual_section_rejects": page_rejects}
    source.tables = {"pretrain": result["chunks"].kept, "fault_codes": result["fault_codes"].kept}
    source.side_rejects = [page_rejects] + [
        pl.read_parquet(result[s].rejected)
        for s in ("chunks", "alarm_tables", "vendor_tables", "fault_codes")
    ]
    vendor_rows = pl.concat(
        [pl.read_parquet(p, columns=["source_file"]) for p in (result["vendor_tables"].kept,
                                                             result["vendor_tables"].rejected)]
    )  # fmt: skip
    source.ledger += _vendor_ledger(vendor, root, vendor_rows)
    ledger = pl.concat(source.ledger).filter(pl.col("source_kind") == manuals.KIND)
    tables, vendor_counts, kb = (
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
            "read": tables["read"] + vendor_counts["read"],
            "kept": kb["kept"],
            "rejected": tables["rejected"] + vendor_counts["rejected"] + kb["rejected"],
        },
    }
    return source


def _alarm_logs(
    run: _Run, entries: list[InputEntry], root: Path, earlier: list[SourceRun]
) -> SourceRun:
    claimed = {e.path: _alarm_source(e) for e in entries}
    plan = plan_files(alarm_logs.KIND, list(claimed), root, run.state)
    keys, parsed, quarantined = _parse(run, "alarm_logs.parse", plan, claimed, root)
    carried = plan.refresh.unchanged
    source = SourceRun(
        alarm_logs.KIND,
        alarm_logs.STAGE_ORDER,
        plan.refresh,
        ledger=_ledger(run, plan, parsed),
        quarantined=quarantined,
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
    fresh_workorders = [p for r in workorder_runs for p in r.sft]
    inputs = {
        "events": events,
        "ingest_rejects": ingest_rejects,
        "fault_codes": fault_codes,
        "workorders": _carried_workorders(run, workorder_runs) + fresh_workorders,
    }
    key = step_key("alarm_logs.funnel", *keys, *carried, *fault_codes, *fresh_workorders, *run.base)
    results = run.runner.map(_alarm_partitions(run, key, inputs))
    tables = [r.pop("incident_table") for r in results]
    source.outputs = [o for r in results for o in r.values()]
    source.sft = [r["render"].kept for r in results]
    source.tables = {
        "incidents": _sorted_union(
            run, "alarm_incidents", [t.kept for t in tables], ["machine", "start", "incident_id"]
        ),
        "incident_stage": _sorted_union(
            run,
            "alarm_incident_stage",
            [r["incidents"].kept for r in results],
            ["machine", "first_at", "record_id"],
        ),
    }
    source.unit_stage = alarm_logs.UNIT_STAGE
    source.state = {
        "alarm_events": _read_all(events),
        "alarm_ingest_rejects": _read_all(ingest_rejects),
    }
    ledger = pl.concat(source.ledger)
    figures = {k: sum(t.counters[k] for t in tables) for k in tables[0].counters}
    folded = sum(r["incidents"].counters["rejected"] for r in results)
    source.sources = {
        "alarm_log": {
            "files": ledger.height,
            "lines": int(ledger["lines"].sum()),
            "skipped_non_alarm_lines": int(ledger["skipped_lines"].sum()),
            "rejected_lines": sum(r["ingest"].counters["rejected"] for r in results),
            "events": figures["events"],
            "raises": figures["events_raised"],
            "clears": figures["events_cleared"],
            "acknowledgements": figures["events_acknowledged"],
            "folded_events": folded,
            "incidents": figures["incidents"],
            "incidents_cleared": figures["incidents_cleared"],
            "incidents_with_fault_code_entry": figures["incidents_with_fault_code_entry"],
            "incidents_linked_to_workorders": figures["incidents_linked"],
        }
    }
    return source


def _read_all(paths: list[str]) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(p) for p in paths], how="diagonal_relaxed")


def _sorted_union(run: _Run, name: str, paths: list[str], by: list[str]) -> str:
    """One partition's table as it is; several partitions' tables as one, sorted as each is."""
    if len(paths) == 1:
        return paths[0]
    return run.save(name, _read_all(paths).sort(by))


def _carried_workorders(run: _Run, workorder_runs: list[SourceRun]) -> list[str]:
    """The published work orders of the carried files that alarm incidents link to (the
    columns a link reads), saved a file and range of `execution.shard_rows` rows at a time;
    an empty table first, so that there is always one."""
    columns = list(WORKORDER_LINK_COLUMNS)
    saved = [run.save("carried_workorders", empty_sft().select(columns))]
    if run.previous is None:
        return saved
    rows = run.cfg.execution.shard_rows
    for r in workorder_runs:
        for p in published_pieces(run.previous, "sft", r.kind, r.plan.unchanged, rows):
            piece = collect_published(p.scan.select(columns), run.previous)
            saved.append(run.save(f"carried_workorders-{len(saved)}", piece))
    return saved


def _alarm_partitions(run: _Run, key: str, inputs: dict[str, list[str]]) -> list[Call]:
    """The alarm funnel over the run's events (`inputs`): one step, or for more events or
    work orders than `execution.shard_rows` one step per partition of the machines, reading
    that partition of every events and work-order file (`alarm_logs.split`); the ingest
    rejects go with the first partition. Incidents, their clears and the work orders they
    link to never span two machines, so the partitions' results together equal the one
    step's."""
    rows = max(
        sum(pl.scan_parquet(p).select(pl.len()).collect().item() for p in inputs[name])
        for name in ("events", "workorders")
    )
    parts = min(-(-rows // run.cfg.execution.shard_rows), 256)
    if parts <= 1:
        return [Call("alarm_logs.funnel", key, inputs, {})]
    columns = {"events": "machine", "workorders": "asset"}
    split: dict[str, list[dict[str, StageOutput]]] = {
        name: run.runner.map(
            [
                Call(
                    "alarm_logs.split",
                    step_key("alarm_logs.split", key, name, str(i), str(parts)),
                    {"frame": [path]},
                    {"column": column, "parts": parts},
                )
                for i, path in enumerate(inputs[name])
            ]
        )
        for name, column in columns.items()
    }
    no_rejects = run.save("alarm_no_ingest_rejects", empty_rejects())
    calls = []
    for k in range(parts):
        label = f"part-{k:05d}/split"
        part = {name: [o[label].kept for o in split[name]] for name in columns}
        part["ingest_rejects"] = inputs["ingest_rejects"] if k == 0 else [no_rejects]
        calls.append(Call("alarm_logs.funnel", step_key(key, label), {**inputs, **part}, {}))
    return calls
