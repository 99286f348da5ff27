"""Funnel steps by name, and how to run one: inputs and outputs are Parquet paths.

A step is a plain function `(cfg, frames, params) -> {stage: StageResult}`. `execute_step`
loads its input frames, runs it and saves every stage result under `work/<key>/`; a `Runner`
decides where that happens (in this process, or as a cached Prefect task in `flows/`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from pipeline.errors import InputFileError
from pipeline.funnels import alarm_logs, manuals, workorders
from pipeline.funnels.quarantine import quarantine_rows
from pipeline.funnels.stage_files import save_stage
from pipeline.ingest.files import relative_path
from pipeline.stage import StageResult
from schemas.alarm_logs import AlarmLogSource
from schemas.config import PipelineConfig
from schemas.manifest import StageOutput
from schemas.manuals import ManualSource

Frames = dict[str, pl.DataFrame | None]
Step = Callable[[PipelineConfig, Frames, dict[str, Any]], dict[str, StageResult]]

STEPS: dict[str, Step] = {
    "workorders.ingest": lambda cfg, f, p: workorders.ingest(
        Path(p["path"]), Path(p["root"]), cfg, p["layout"]
    ),
    "workorders.clean": lambda cfg, f, p: workorders.clean(f["ingested"], cfg, p["names"]),
    "workorders.corpus": lambda cfg, f, p: workorders.corpus(f["filtered"], cfg, f["index"]),
    "manuals.parse": lambda cfg, f, p: manuals.parse(
        Path(p["path"]), ManualSource.model_validate(p["source"]), Path(p["root"])
    ),
    "manuals.funnel": lambda cfg, f, p: manuals.funnel(f["sections"], Path(p["root"]), cfg),
    "alarm_logs.parse": lambda cfg, f, p: alarm_logs.parse(
        Path(p["path"]), AlarmLogSource.model_validate(p["source"]), Path(p["root"])
    ),
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


class Runner(Protocol):
    def __call__(
        self, step: str, key: str, inputs: dict[str, list[str]], params: dict[str, Any]
    ) -> dict[str, StageOutput]: ...


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
    frames: Frames = {
        name: pl.concat([pl.read_parquet(p) for p in paths], how="diagonal_relaxed")
        if paths
        else None
        for name, paths in inputs.items()
    }
    try:
        results = STEPS[step](cfg, frames, params)
    except InputFileError as exc:
        if step not in PER_FILE:
            raise
        rel = relative_path(params["path"], params["root"])
        detail = str(exc).replace(str(params["path"]), rel)  # no local paths published
        rejected = quarantine_rows(PER_FILE[step], {rel: (exc.reason, detail)})
        results = {"quarantine": StageResult(pl.DataFrame(), rejected, {"files": 1})}
    return {stage: save_stage(r, stage, Path(work) / key) for stage, r in results.items()}


def in_process(work: Path, cfg: PipelineConfig) -> Runner:
    """Run each step here and now (the embedded default)."""

    def run(
        step: str, key: str, inputs: dict[str, list[str]], params: dict[str, Any]
    ) -> dict[str, StageOutput]:
        return execute_step(step, key, inputs, params, str(work), cfg)

    return run
