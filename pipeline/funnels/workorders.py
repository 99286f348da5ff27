"""The work-order funnel, declared in `FUNNEL`:

ingest   per file, in shards of `execution.shard_rows` rows        ingest
clean    per shard                                                 normalize -> filter
dedup    over the run, against the published index (its own      dedup
         per-shard and per-partition steps: pipeline/dedup/)
samples  per shard                                                 structure -> tiers -> render
"""

from __future__ import annotations

import glob
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import polars as pl

from pipeline.core.stage import Stage, StageResult, empty_rejects, run_stages, stage_result
from pipeline.dedup.sharded import dedup_shards
from pipeline.execution.step import Funnel, Out, Step
from pipeline.ingest.files import relative_path
from pipeline.ingest.workorders.reader import read_workorder_parts, source_for
from pipeline.publish.ledger import ledger_row
from pipeline.stages.filters import apply_filters
from pipeline.stages.messages import render_messages
from pipeline.stages.normalize import normalize
from pipeline.stages.structure import structure
from pipeline.stages.tiers import assign_tiers
from pipeline.stages.tokens import count_tokens
from schemas.config import PipelineConfig
from schemas.ingest import SourceMapping
from schemas.manifest import StageOutput
from schemas.records import INGESTED_SCHEMA, NORMALIZED_EXTRA, PARTS, WORKORDER_FIELDS

if TYPE_CHECKING:
    from pipeline.funnels.driver import FunnelRun
    from pipeline.publish.snapshot import SourceRun

T = TypeVar("T")
KIND = "workorder"

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
) -> Iterator[tuple[str, StageResult]]:
    """Read one export in the format its content showed (`layout`) unless a configured source
    names the file, in shards of `execution.shard_rows` records (`part-<n>/ingest`, one at a
    time); the last part's state holds the file's ledger row."""
    ingest_cfg = cfg.ingest
    rel = relative_path(path, root)
    if layout != "auto" and source_for(rel, ingest_cfg).pattern == "*":
        found = SourceMapping(pattern=glob.escape(rel), format=layout)  # type: ignore[arg-type]
        ingest_cfg = ingest_cfg.model_copy(update={"sources": [found]})
    configured = source_for(rel, ingest_cfg).format
    fmt = configured if configured != "auto" else layout
    rows = 0
    parts = read_workorder_parts(path, root, ingest_cfg, cfg.execution.shard_rows)
    for n, (read, last) in enumerate(_with_last(parts)):
        rows += read.rows
        result = read.result
        ledger = ledger_row(
            read.path,
            KIND,
            read.bytes,
            read.sha256,
            read.encoding,
            rows,
            skipped=read.skipped,
            columns=read.columns,
            reader=f"{KIND}:{fmt}",
            warning=read.warning,
        )
        state = {"ledger": ledger} if last else {}
        yield (
            f"part-{n:05d}/ingest",
            StageResult(result.kept, result.rejected, result.counters, state),
        )


def _with_last(items: Iterator[T]) -> Iterator[tuple[T, bool]]:
    """Each item, and whether it is the last one."""
    previous, has = None, False
    for item in items:
        if has:
            yield previous, False
        previous, has = item, True
    if has:
        yield previous, True


def clean(frame: pl.DataFrame, cfg: PipelineConfig, names: Sequence[str]) -> dict[str, StageResult]:
    """The per-shard stages after ingest."""
    return run_stages([normalize_stage(names), FILTER], frame, cfg)


def samples(frame: pl.DataFrame, cfg: PipelineConfig) -> dict[str, StageResult]:
    """The per-shard stages after dedup."""
    return run_stages([STRUCTURE, TIERS, RENDER], frame, cfg)


def technicians(ingested: pl.DataFrame) -> list[str]:
    """Distinct technician values of the files ingested in this run, sorted."""
    return sorted(ingested["technician"].drop_nulls().unique().to_list())


def _clean_params(run: FunnelRun) -> dict[str, list[str]]:
    """`clean` redacts the technicians of every file ingested now in every shard."""
    columns = [pl.DataFrame(schema={"technician": pl.String})] + [
        pl.read_parquet(path, columns=["technician"]).unique()
        for path in run.paths(Out(INGEST.name, "ingest"))
    ]
    return {"names": technicians(pl.concat(columns))}


def dedup(run: FunnelRun) -> list[dict[str, StageOutput]]:
    """The sharded dedup over the cleaned shards, against the carried published index."""
    shards = run.paths(Out(CLEAN.name, "filter"))
    if not shards:
        return []
    index = run.carried_parts("dedup_index")
    base = (*run.plan.refresh.unchanged, *run.ctx.base)
    deduped = dedup_shards(run.ctx.runner, run.ctx.work, shards, index, run.ctx.cfg, base)
    return [{"dedup": d} for d in deduped]


def finish(run: FunnelRun, source: SourceRun) -> None:
    """The dedup index the next refresh reads: the carried rows, then each shard's kept
    records (written part by part)."""
    index = run.carried_parts("dedup_index")
    deduped = run.outputs(DEDUP.name, "dedup")
    if deduped or index:
        source.state = {"dedup_index": index + [d.state["index"] for d in deduped]}


INGEST = Step(
    "workorders.ingest",
    "file",
    lambda cfg, f, p: ingest(Path(p["path"]), Path(p["root"]), cfg, p["layout"]),
    stages=("ingest",),
)
CLEAN = Step(
    "workorders.clean",
    "shard",
    lambda cfg, f, p: clean(f["ingested"], cfg, p["names"]),
    inputs={"ingested": Out(INGEST.name, "ingest")},
    stages=("normalize", "filter"),
    params=_clean_params,
)
DEDUP = Step("workorders.dedup", "driver", stages=("dedup",), drive=dedup)
SAMPLES = Step(
    "workorders.samples",
    "shard",
    lambda cfg, f, p: samples(f["kept"], cfg),
    inputs={"kept": Out(DEDUP.name, "dedup")},
    stages=("structure", "tiers", "render"),
)
FUNNEL = Funnel(
    KIND,
    (INGEST, CLEAN, DEDUP, SAMPLES),
    file_params=lambda entry: {"layout": entry.sniffed.layout or "auto"},
    finish=finish,
    sft=(SAMPLES.name, "render"),
    carries_published=True,
)
