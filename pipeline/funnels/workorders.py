"""The work-order funnel.

Per file:        ingest -> normalize -> filter
Over the run:    dedup (against the published index) -> structure -> tiers -> render
"""

from __future__ import annotations

import glob
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from pipeline.dedup import dedup
from pipeline.filters import apply_filters
from pipeline.ingest.files import relative_path
from pipeline.ingest.workorders import read_workorder_file, source_for
from pipeline.ledger import ledger_row
from pipeline.messages import render_messages
from pipeline.normalize import normalize
from pipeline.stage import Stage, StageResult, empty_rejects, run_stages, stage_result
from pipeline.structure import structure
from pipeline.tiers import assign_tiers
from pipeline.tokens import count_tokens
from schemas.config import PipelineConfig
from schemas.ingest import SourceMapping
from schemas.records import INGESTED_SCHEMA, NORMALIZED_EXTRA, PARTS, WORKORDER_FIELDS

KIND = "workorder"
STAGE_ORDER = ("ingest", "normalize", "filter", "dedup", "structure", "tiers", "render")

_NORMALIZED = (*INGESTED_SCHEMA, *NORMALIZED_EXTRA)


def normalize_stage(names: Sequence[str]) -> Stage:
    """Normalize, redacting `names` (technicians of every file in the run) in this file too."""
    return Stage(
        "normalize",
        needs=tuple(INGESTED_SCHEMA),
        adds=tuple(NORMALIZED_EXTRA),
        fn=lambda df, cfg: normalize(df, cfg.normalize, names),
    )


FILTER = Stage(
    "filter", needs=_NORMALIZED, adds=(), fn=lambda df, cfg: apply_filters(df, cfg.filters)
)


def dedup_stage(index: pl.DataFrame | None) -> Stage:
    """Exact and near duplicates, also against `index` (the published corpus's records, with
    their `source_file`); the result's state holds the index of this run's kept records."""
    previous = index.drop("source_file") if index is not None else None

    def run(df: pl.DataFrame, cfg: PipelineConfig) -> StageResult:
        result, new_index = dedup(df, cfg.dedup, previous)
        files = result.kept.select("record_id", "source_file")
        state = {"index": new_index.join(files, on="record_id")}
        return StageResult(result.kept, result.rejected, result.counters, state)

    return Stage("dedup", needs=_NORMALIZED, adds=(), fn=run)


STRUCTURE = Stage(
    "structure",
    needs=("record_id", "source_kind", "source_file", "source_row", *WORKORDER_FIELDS),
    adds=(*PARTS, "part_origin"),
    fn=lambda df, cfg: structure(df, cfg.structure),
)
TIERS = Stage(
    "tiers",
    needs=("source_kind", *PARTS),
    adds=("tier", "tier_reasons"),
    fn=lambda df, cfg: assign_tiers(df, cfg.tiers),
)


def _render(df: pl.DataFrame, cfg: PipelineConfig) -> StageResult:
    rendered = count_tokens(render_messages(df, cfg.messages), cfg.tokens, "messages")
    return stage_result(rendered, empty_rejects(), read=df.height)


# Chat messages in the record's language, and their token count under the chat template.
RENDER = Stage("render", needs=PARTS, adds=("messages", "n_tokens"), fn=_render)


def ingest(
    path: Path, root: Path, cfg: PipelineConfig, layout: str = "auto"
) -> dict[str, StageResult]:
    """Read one export in the format its content showed (`layout`) unless a configured source
    names the file; the result's state holds the file's ledger row."""
    ingest_cfg = cfg.ingest
    rel = relative_path(path, root)
    if layout != "auto" and source_for(rel, ingest_cfg).pattern == "*":
        found = SourceMapping(pattern=glob.escape(rel), format=layout)  # type: ignore[arg-type]
        ingest_cfg = ingest_cfg.model_copy(update={"sources": [found]})
    read = read_workorder_file(path, root, ingest_cfg)
    configured = source_for(rel, ingest_cfg).format
    fmt = configured if configured != "auto" else layout
    ledger = ledger_row(
        read.path,
        KIND,
        read.bytes,
        read.sha256,
        read.encoding,
        read.rows,
        skipped=read.skipped,
        columns=read.columns,
        reader=f"{KIND}:{fmt}",
    )
    result = read.result
    return {
        "ingest": StageResult(result.kept, result.rejected, result.counters, {"ledger": ledger})
    }


def clean(frame: pl.DataFrame, cfg: PipelineConfig, names: Sequence[str]) -> dict[str, StageResult]:
    """The per-file stages after ingest."""
    return run_stages([normalize_stage(names), FILTER], frame, cfg)


def corpus(
    frame: pl.DataFrame, cfg: PipelineConfig, index: pl.DataFrame | None
) -> dict[str, StageResult]:
    """The stages over all files processed in this run."""
    return run_stages([dedup_stage(index), STRUCTURE, TIERS, RENDER], frame, cfg)


def technicians(ingested: pl.DataFrame) -> list[str]:
    """Distinct technician values of the files ingested in this run, sorted."""
    return sorted(ingested["technician"].drop_nulls().unique().to_list())
