"""Funnel steps by name, and how to run one: inputs and outputs are Parquet paths (a step
that reads groups of inputs one after the other, such as `dedup.verify`, gets their paths
in its parameters).

A step is a plain function `(cfg, frames, params) -> {label: StageResult}` (or an iterator
of `(label, StageResult)` pairs, saved as they come: a step that streams a large file writes
one part at a time). A label is a stage name, or `part/stage` for one part of a file.
`execute_step` loads its input frames, runs it and saves every result under `work/<key>/`; a
`Runner` decides where that happens (in this process, or as cached Prefect tasks in `flows/`,
on threads or on a Dask cluster). `Runner.map` runs independent steps (one per shard) at once
where the runner can.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from pipeline.core.errors import InputFileError
from pipeline.core.stage import StageResult
from pipeline.dedup import steps as dedup_shards
from pipeline.execution.stage_files import save_stage
from pipeline.funnels import alarm_logs, manuals, workorders
from pipeline.funnels.quarantine import quarantine_rows
from pipeline.ingest.files import relative_path
from schemas.alarm_logs import AlarmLogSource
from schemas.config import PipelineConfig
from schemas.manifest import StageOutput
from schemas.manuals import ManualSource

Frames = dict[str, pl.DataFrame | None]
Results = dict[str, StageResult] | Iterable[tuple[str, StageResult]]
Step = Callable[[PipelineConfig, Frames, dict[str, Any]], Results]

STEPS: dict[str, Step] = {
    "workorders.ingest": lambda cfg, f, p: workorders.ingest(
        Path(p["path"]), Path(p["root"]), cfg, p["layout"]
    ),
    "workorders.clean": lambda cfg, f, p: workorders.clean(f["ingested"], cfg, p["names"]),
    "workorders.samples": lambda cfg, f, p: workorders.samples(f["kept"], cfg),
    "dedup.nodes": lambda cfg, f, p: dedup_shards.shard_nodes(f["records"], cfg.dedup),
    "dedup.index": lambda cfg, f, p: dedup_shards.index_nodes(f["index"], cfg.dedup),
    "dedup.buckets": lambda cfg, f, p: dedup_shards.node_buckets(
        f["nodes"], f["signatures"], f["ids"], p["bits"], p["parts"], cfg.dedup
    ),
    "dedup.pairs": lambda cfg, f, p: dedup_shards.partition_pairs(
        f["buckets"], p["bits"], p["starts"], p["n_new"], cfg.dedup
    ),
    "dedup.export": lambda cfg, f, p: dedup_shards.export_nodes(
        f["nodes"], f["signatures"], f["ids"], f["requests"], cfg.dedup
    ),
    "dedup.verify": lambda cfg, f, p: dedup_shards.verify_pairs(
        f["nodes"],
        f["signatures"],
        f["ids"],
        f["pairs"],
        (
            (g["sources"], read_frames(g["imported"]), read_frames(g["imported_signatures"]))
            for g in p["groups"]
        ),
        p["starts"],
        cfg.dedup,
    ),
    "dedup.apply": lambda cfg, f, p: dedup_shards.apply_decisions(
        f["records"],
        f["features"],
        f["nodes"],
        f["signatures"],
        f["foreign"],
        f["foreign_signatures"],
        f["decisions"],
        cfg.dedup,
        p["counters"],
    ),
    "manuals.parse": lambda cfg, f, p: manuals.parse(
        Path(p["path"]), ManualSource.model_validate(p["source"]), Path(p["root"])
    ),
    "manuals.funnel": lambda cfg, f, p: manuals.funnel(f["sections"], Path(p["root"]), cfg),
    "alarm_logs.parse": lambda cfg, f, p: alarm_logs.parse(
        Path(p["path"]), AlarmLogSource.model_validate(p["source"]), Path(p["root"])
    ),
    "alarm_logs.split": lambda cfg, f, p: alarm_logs.split(f["frame"], p["column"], p["parts"]),
    "alarm_logs.funnel": lambda cfg, f, p: alarm_logs.funnel(
        f["events"], f["ingest_rejects"], f["fault_codes"], f["workorders"], cfg
    ),
}


# Steps that read one input file, by the source kind they read.
PER_FILE = {
    "workorders.ingest": workorders.KIND,
    "manuals.parse": manuals.KIND,
    "alarm_logs.parse": alarm_logs.KIND,
}


@dataclass(frozen=True)
class Call:
    """One step to run: its name, cache key, input Parquet paths and parameters."""

    step: str
    key: str
    inputs: dict[str, list[str]]
    params: dict[str, Any]


class Runner(Protocol):
    def __call__(
        self, step: str, key: str, inputs: dict[str, list[str]], params: dict[str, Any]
    ) -> dict[str, StageOutput]: ...

    def map(self, calls: Sequence[Call]) -> list[dict[str, StageOutput]]:
        """Run independent steps (concurrently where the runner can); results in call order."""
        ...


def read_frames(paths: list[str]) -> pl.DataFrame | None:
    """The Parquet files `paths` as one frame (None when there are none)."""
    if not paths:
        return None
    return pl.concat([pl.read_parquet(p) for p in paths], how="diagonal_relaxed")


def execute_step(
    step: str,
    key: str,
    inputs: dict[str, list[str]],
    params: dict[str, Any],
    work: str,
    cfg: PipelineConfig,
) -> dict[str, StageOutput]:
    """Run step `step` on the Parquet files `inputs` (name -> paths; no paths gives None).

    A per-file step whose file cannot be read returns a `quarantine` result instead: the
    file's one reject row, and nothing kept.
    """
    frames: Frames = {name: read_frames(paths) for name, paths in inputs.items()}
    out = Path(work) / key
    saved = {}
    try:
        results = STEPS[step](cfg, frames, params)
        del frames
        pairs = results.items() if isinstance(results, dict) else results
        for label, result in pairs:  # a streaming step raises here, part way through a file
            part, _, stage = label.rpartition("/")
            saved[label] = save_stage(result, stage, out / part)
    except InputFileError as exc:
        if step not in PER_FILE:
            raise
        shutil.rmtree(out, ignore_errors=True)  # parts saved before the error are not kept
        rel = relative_path(params["path"], params["root"])
        detail = str(exc).replace(str(params["path"]), rel)  # no local paths published
        rejected = quarantine_rows(PER_FILE[step], {rel: (exc.reason, detail)})
        result = StageResult(pl.DataFrame(), rejected, {"files": 1})
        return {"quarantine": save_stage(result, "quarantine", out)}
    return saved


@dataclass(frozen=True)
class InProcess:
    """Run each step here and now, one after the other (the embedded default)."""

    work: Path
    cfg: PipelineConfig

    def __call__(
        self, step: str, key: str, inputs: dict[str, list[str]], params: dict[str, Any]
    ) -> dict[str, StageOutput]:
        return execute_step(step, key, inputs, params, str(self.work), self.cfg)

    def map(self, calls: Sequence[Call]) -> list[dict[str, StageOutput]]:
        return [self(c.step, c.key, c.inputs, c.params) for c in calls]


def in_process(work: Path, cfg: PipelineConfig) -> Runner:
    """Run each step here and now (the embedded default)."""
    return InProcess(work, cfg)
