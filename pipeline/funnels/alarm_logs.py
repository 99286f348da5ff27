"""The alarm-log funnel, declared in `FUNNEL`:

    parse    per file: events (malformed lines and bad timestamps rejected)
    funnel   per partition of the machines (one, or more for a run of many events or work
             orders; `split` cuts each file), on parsed and carried events:
             ingest -> incidents (bursts merged; clears and repeats folded into their incident)
             -> cross_source (an incident a work order describes is that work order's)
             -> samples (joined with the fault-code table) -> tiers -> render
             and beside it the incidents table (every incident, with its raises, clear time,
             fault-code entry and related work order), published as `incidents/`.

Counting unit: an alarm log enters the SFT funnel as incidents (`FUNNEL.unit_stage`);
its lines and events are counted in the stages before it and in `manifest.sources`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from pipeline.alarms.incidents import (
    WORKORDER_LINK_COLUMNS,
    drop_described_incidents,
    incident_funnel,
    incident_table,
    machine_partition,
)
from pipeline.alarms.samples import incident_samples
from pipeline.core.stage import Stage, StageResult, empty_rejects, run_stages, stage_result
from pipeline.execution.stage_files import read_frames
from pipeline.execution.step import Carried, Computed, Funnel, Out, Step
from pipeline.funnels.incremental import collect_published, published_pieces
from pipeline.funnels.workorders import RENDER
from pipeline.ingest.alarm_logs.reader import read_alarm_log_file
from pipeline.ingest.files import relative_path, sha256_bytes
from pipeline.publish.ledger import ledger_row
from pipeline.publish.snapshot import empty_sft
from pipeline.stages.tiers import assign_tiers
from schemas.alarm_logs import ALARM_EVENT_SCHEMA, INCIDENT_SCHEMA, AlarmLogSource
from schemas.config import PipelineConfig
from schemas.manuals import FAULT_CODE_SCHEMA
from schemas.records import PARTS

if TYPE_CHECKING:
    from pipeline.funnels.driver import FunnelRun
    from pipeline.publish.snapshot import SourceRun

KIND = "alarm_log"
_EVENTS = ("raised", "cleared", "acknowledged")

INCIDENTS = Stage(
    "incidents",
    needs=tuple(ALARM_EVENT_SCHEMA),
    adds=tuple(INCIDENT_SCHEMA),
    fn=lambda df, cfg: incident_funnel(df, cfg.alarm_logs.incidents),
)


def _table(knowledge_base: pl.DataFrame | None) -> pl.DataFrame:
    return knowledge_base if knowledge_base is not None else pl.DataFrame(schema=FAULT_CODE_SCHEMA)


def samples_stage(knowledge_base: pl.DataFrame | None) -> Stage:
    """Incidents joined with the fault-code table; an incident without an entry is no sample
    (it stays in the incidents table)."""
    table = _table(knowledge_base)
    return Stage(
        "samples",
        needs=tuple(INCIDENT_SCHEMA),
        adds=PARTS,
        fn=lambda df, cfg: incident_samples(df, table),
    )


def cross_source_stage(incidents: pl.DataFrame, workorders: pl.DataFrame) -> Stage:
    """Drop samples of incidents that a work order of the corpus already describes."""
    return Stage(
        "cross_source",
        needs=("record_id",),
        adds=(),
        fn=lambda df, cfg: drop_described_incidents(
            df, incidents, workorders, cfg.alarm_logs.incidents
        ),
    )


TIERS = Stage(
    "tiers",
    needs=("source_kind", "machine", *PARTS),
    adds=("tier", "tier_reasons"),
    fn=lambda df, cfg: assign_tiers(df.with_columns(asset=pl.col("machine")), cfg.tiers),
)


def parse(
    path: Path, source: AlarmLogSource, root: Path, controllers: dict[str, str]
) -> dict[str, StageResult]:
    """One alarm log -> events; the result's state holds the file's ledger row."""
    read = read_alarm_log_file(path, source, root, controllers)
    result = read.result
    data = path.read_bytes()
    ledger = ledger_row(
        relative_path(path, root),
        KIND,
        len(data),
        sha256_bytes(data),
        read.encoding,
        rows=result.counters["read"],
        skipped=result.counters["skipped_non_alarm"],
        lines=result.counters["lines_total"],
        reader=f"{KIND}:{read.layout}",
        warning=read.warning,
    )
    return {
        "ingest": StageResult(result.kept, result.rejected, result.counters, {"ledger": ledger})
    }


def split(frame: pl.DataFrame | None, column: str, parts: int) -> dict[str, StageResult]:
    """The rows of one file by machine (`column`) into `part-<k>/split`, k < `parts`, in order;
    every row of one machine lands in one partition (`machine_partition`)."""
    frame = frame if frame is not None else pl.DataFrame()
    if column not in frame.columns:  # nothing to link on: every row in partition 0
        part = pl.Series([0] * frame.height, dtype=pl.UInt32)
    else:
        part = machine_partition(frame, column, parts)
    return {
        f"part-{k:05d}/split": StageResult(frame.filter(part == k), empty_rejects(), {})
        for k in range(parts)
    }


def funnel(
    events: pl.DataFrame,
    ingest_rejects: pl.DataFrame,
    knowledge_base: pl.DataFrame | None,
    workorders: pl.DataFrame,
    cfg: PipelineConfig,
) -> dict[str, StageResult]:
    """Every stage after ingest, over the events of all alarm logs (parsed and carried), and
    the incidents table (`incident_table`: kept rows only, counters for the manifest)."""
    ingest = stage_result(events, ingest_rejects, read=events.height + ingest_rejects.height)
    incidents = INCIDENTS.run(events, cfg)
    stages = [cross_source_stage(incidents.kept, workorders), samples_stage(knowledge_base)]
    later = run_stages([*stages, TIERS, RENDER], incidents.kept, cfg)
    table = incident_table(
        incidents.kept, events, workorders, _table(knowledge_base), cfg.alarm_logs.incidents
    )
    counters = {
        "events": events.height,
        **{f"events_{e}": int((events["event"] == e).sum()) for e in _EVENTS},
        "incidents": table.height,
        "incidents_linked": int(table["workorder_id"].is_not_null().sum()),
        "incidents_with_fault_code_entry": int(table["fault_code_entry"].sum()),
        "incidents_cleared": int(table["cleared"].sum()),
    }
    published = StageResult(table, empty_rejects(), counters)
    return {"ingest": ingest, "incidents": incidents, **later, "incident_table": published}


def _source(entry: Any) -> dict[str, Any]:
    """The configured source (its layout resolved), or a default one in the sniffed layout."""
    source = entry.source if isinstance(entry.source, AlarmLogSource) else None
    source = source or AlarmLogSource(pattern=entry.path.name)
    return {
        "source": source.model_copy(update={"format": entry.sniffed.layout}).model_dump(mode="json")
    }


def knowledge_base(run: FunnelRun) -> list[str]:
    """The fault-code table this refresh built from the manuals, else the published one."""
    built = [p for r in run.earlier for name, p in r.tables.items() if name == "fault_codes"]
    if built or run.ctx.previous is None:
        return built
    published = sorted((run.ctx.previous / "fault_codes").glob("*.parquet"))
    return [run.ctx.save("published_fault_codes", pl.read_parquet(published))] if published else []


def workorder_links(run: FunnelRun) -> list[str]:
    """The work orders incidents link to (the columns a link reads): an empty table first,
    so that there is always one; the published ones of the carried files, a file and range
    of `execution.shard_rows` rows at a time; then this refresh's new samples."""
    columns = list(WORKORDER_LINK_COLUMNS)
    saved = [run.ctx.save("carried_workorders", empty_sft().select(columns))]
    carrying = [r for r in run.earlier if r.carries_published]
    previous, rows = run.ctx.previous, run.ctx.cfg.execution.shard_rows
    for r in carrying if previous is not None else []:
        for p in published_pieces(previous, "sft", r.kind, r.plan.unchanged, rows):
            piece = collect_published(p.scan.select(columns), previous)
            saved.append(run.ctx.save(f"carried_workorders-{len(saved)}", piece))
    return saved + [p for r in carrying for p in r.sft]


PARSE = Step(
    "alarm_logs.parse",
    "file",
    lambda cfg, f, p: parse(
        Path(p["path"]),
        AlarmLogSource.model_validate(p["source"]),
        Path(p["root"]),
        cfg.normalize.asset_controllers,
    ),
    stages=("ingest",),
    counted=False,
)
SPLIT = Step(
    "alarm_logs.split",
    "helper",
    lambda cfg, f, p: split(f["frame"], p["column"], p["parts"]),
    inputs={"frame": Out(PARSE.name, "ingest")},
)
FUNNEL_STEP = Step(
    "alarm_logs.funnel",
    "partition",
    lambda cfg, f, p: funnel(
        f["events"], f["ingest_rejects"], f["fault_codes"], f["workorders"], cfg
    ),
    inputs={
        "events": Carried(
            Out(PARSE.name, "ingest"),
            "alarm_events",
            lambda: pl.DataFrame(schema=ALARM_EVENT_SCHEMA),
        ),
        "ingest_rejects": Carried(
            Out(PARSE.name, "ingest", "rejected"), "alarm_ingest_rejects", empty_rejects
        ),
        "fault_codes": Computed(knowledge_base),
        "workorders": Computed(workorder_links),
    },
    stages=("ingest", "incidents", "cross_source", "samples", "tiers", "render"),
    split_by={"events": "machine", "workorders": "asset"},
    splitter=SPLIT.name,
    first_only=("ingest_rejects",),
)


def finish(run: FunnelRun, source: SourceRun) -> None:
    """The incidents tables, the parsed events as state, and the figures of
    `manifest.sources`."""
    results = run.results[FUNNEL_STEP.name]
    if not results:
        return
    tables = [r["incident_table"] for r in results]
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
    inputs = run.inputs[FUNNEL_STEP.name]
    source.state = {
        "alarm_events": read_frames(inputs["events"]),
        "alarm_ingest_rejects": read_frames(inputs["ingest_rejects"]),
    }
    source.sources = {"alarm_log": _figures(pl.concat(source.ledger), results)}


def _figures(ledger: pl.DataFrame, results: list[dict[str, Any]]) -> dict[str, int]:
    tables = [r["incident_table"] for r in results]
    figures = {k: sum(t.counters[k] for t in tables) for k in tables[0].counters}
    return {
        "files": ledger.height,
        "lines": int(ledger["lines"].sum()),
        "skipped_non_alarm_lines": int(ledger["skipped_lines"].sum()),
        "rejected_lines": sum(r["ingest"].counters["rejected"] for r in results),
        "events": figures["events"],
        "raises": figures["events_raised"],
        "clears": figures["events_cleared"],
        "acknowledgements": figures["events_acknowledged"],
        "folded_events": sum(r["incidents"].counters["rejected"] for r in results),
        "incidents": figures["incidents"],
        "incidents_cleared": figures["incidents_cleared"],
        "incidents_with_fault_code_entry": figures["incidents_with_fault_code_entry"],
        "incidents_linked_to_workorders": figures["incidents_linked"],
    }


def _sorted_union(run: FunnelRun, name: str, paths: list[str], by: list[str]) -> str:
    """One partition's table as it is; several partitions' tables as one, sorted as each is."""
    if len(paths) == 1:
        return paths[0]
    return run.ctx.save(name, read_frames(paths).sort(by))


FUNNEL = Funnel(
    KIND,
    (PARSE, SPLIT, FUNNEL_STEP),
    file_params=_source,
    finish=finish,
    sft=(FUNNEL_STEP.name, "render"),
    unit_stage="cross_source",
)
