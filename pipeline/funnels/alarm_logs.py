"""The alarm-log funnel.

Per file:        ingest (events; malformed lines and bad timestamps rejected)
Over the run:    incidents (bursts merged) -> samples (joined with the fault-code table)
                 -> cross_source (an incident a work order describes is that work order's)
                 -> tiers -> render
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.funnels.workorders import RENDER
from pipeline.incident_samples import incident_samples
from pipeline.incidents import drop_described_incidents, incident_funnel
from pipeline.ingest.alarm_logs import read_alarm_log
from pipeline.ingest.encoding import detect_encoding
from pipeline.ingest.files import relative_path, sha256_bytes
from pipeline.ledger import ledger_row
from pipeline.stage import Stage, StageResult, run_stages, stage_result
from pipeline.tiers import assign_tiers
from schemas.alarm_logs import ALARM_EVENT_SCHEMA, INCIDENT_SCHEMA
from schemas.config import PipelineConfig
from schemas.manuals import FAULT_CODE_SCHEMA
from schemas.records import PARTS

KIND = "alarm_log"
STAGE_ORDER = ("ingest", "incidents", "samples", "cross_source", "tiers", "render")

INCIDENTS = Stage(
    "incidents",
    needs=tuple(ALARM_EVENT_SCHEMA),
    adds=tuple(INCIDENT_SCHEMA),
    fn=lambda df, cfg: incident_funnel(df, cfg.alarm_logs.incidents),
)


def samples_stage(knowledge_base: pl.DataFrame | None) -> Stage:
    """Incidents joined with the fault-code table; without one, every incident is rejected."""

    table = knowledge_base if knowledge_base is not None else pl.DataFrame(schema=FAULT_CODE_SCHEMA)
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


def parse(path: Path, source_index: int, root: Path, cfg: PipelineConfig) -> dict[str, StageResult]:
    """One alarm log -> events; the result's state holds the file's ledger row."""
    source = cfg.alarm_logs.sources[source_index]
    result = read_alarm_log(path, source, root)
    data = path.read_bytes()
    ledger = ledger_row(
        relative_path(path, root),
        KIND,
        len(data),
        sha256_bytes(data),
        detect_encoding(data, path),
        rows=result.counters["read"],
        skipped=result.counters.get("skipped_non_alarm", 0),
        lines=result.counters["lines_total"],
    )
    return {
        "ingest": StageResult(result.kept, result.rejected, result.counters, {"ledger": ledger})
    }


def funnel(
    events: pl.DataFrame,
    ingest_rejects: pl.DataFrame,
    knowledge_base: pl.DataFrame | None,
    workorders: pl.DataFrame,
    cfg: PipelineConfig,
) -> dict[str, StageResult]:
    """Every stage after ingest, over the events of all alarm logs (parsed and carried)."""
    ingest = stage_result(events, ingest_rejects, read=events.height + ingest_rejects.height)
    incidents = INCIDENTS.run(events, cfg)
    stages = [samples_stage(knowledge_base), cross_source_stage(incidents.kept, workorders)]
    later = run_stages([*stages, TIERS, RENDER], incidents.kept, cfg)
    return {"ingest": ingest, "incidents": incidents, **later}
