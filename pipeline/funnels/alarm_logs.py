"""The alarm-log funnel.

Per file:        ingest (events; malformed lines and bad timestamps rejected)
Per partition of the machines (one, or more for a run of many events; `split` per file):
                 incidents (bursts merged; clears and repeats folded into their incident)
                 -> cross_source (an incident a work order describes is that work order's)
                 -> samples (joined with the fault-code table) -> tiers -> render
Beside it:       the incidents table (every incident, with its raises, clear time, fault-code
                 entry and related work order), published as `incidents/`.

Counting unit: an alarm log enters the SFT funnel as incidents (`UNIT_STAGE` reads them);
its lines and events are counted in the stages before it and in `manifest.sources`.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.alarms.incidents import (
    drop_described_incidents,
    incident_funnel,
    incident_table,
    machine_partition,
)
from pipeline.alarms.samples import incident_samples
from pipeline.core.stage import Stage, StageResult, empty_rejects, run_stages, stage_result
from pipeline.funnels.workorders import RENDER
from pipeline.ingest.alarm_logs.reader import read_alarm_log_file
from pipeline.ingest.files import relative_path, sha256_bytes
from pipeline.publish.ledger import ledger_row
from pipeline.stages.tiers import assign_tiers
from schemas.alarm_logs import ALARM_EVENT_SCHEMA, INCIDENT_SCHEMA, AlarmLogSource
from schemas.config import PipelineConfig
from schemas.manuals import FAULT_CODE_SCHEMA
from schemas.records import PARTS

KIND = "alarm_log"
_EVENTS = ("raised", "cleared", "acknowledged")
STAGE_ORDER = ("ingest", "incidents", "cross_source", "samples", "tiers", "render")
UNIT_STAGE = "cross_source"

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


def parse(path: Path, source: AlarmLogSource, root: Path) -> dict[str, StageResult]:
    """One alarm log -> events; the result's state holds the file's ledger row."""
    read = read_alarm_log_file(path, source, root)
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
