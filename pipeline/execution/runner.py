"""How a step runs: the `Runner` protocol, `execute_step`, and the in-process runner.

`execute_step` reads a step's input Parquet files, runs the declared step of that name
(`pipeline.execution.registry.STEPS`) and saves every result under `work/<key>/`. A `Runner`
decides where that happens: here and now (`InProcess`, the embedded default), or as cached
Prefect tasks on threads or a Dask cluster (`flows/runner.py`). `Runner.map` runs independent
steps (one per shard) at once where the runner can.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.errors import InputFileError
from pipeline.core.stage import StageResult
from pipeline.execution.registry import STEPS, kind_of
from pipeline.execution.stage_files import read_frames, save_stage
from pipeline.execution.step import Call, Frames, Runner
from pipeline.funnels.quarantine import quarantine_rows
from pipeline.ingest.files import relative_path
from schemas.config import PipelineConfig
from schemas.manifest import StageOutput


def execute_step(
    step: str,
    key: str,
    inputs: dict[str, list[str]],
    params: dict[str, Any],
    work: str,
    cfg: PipelineConfig,
) -> dict[str, StageOutput]:
    """Run step `step` on the Parquet files `inputs` (name -> paths; no paths gives None).

    A file step whose file cannot be read returns a `quarantine` result instead: the file's
    one reject row, and nothing kept.
    """
    frames: Frames = {name: read_frames(paths) for name, paths in inputs.items()}
    out = Path(work) / key
    saved = {}
    try:
        results = STEPS[step].run(cfg, frames, params)
        del frames
        pairs = results.items() if isinstance(results, dict) else results
        for label, result in pairs:  # a streaming step raises here, part way through a file
            part, _, stage = label.rpartition("/")
            saved[label] = save_stage(result, stage, out / part)
    except InputFileError as exc:
        if STEPS[step].scope != "file":
            raise
        shutil.rmtree(out, ignore_errors=True)  # parts saved before the error are not kept
        return {"quarantine": _quarantined(kind_of(step), exc, params, out)}
    return saved


def _quarantined(kind: str, exc: InputFileError, params: dict[str, Any], out: Path) -> StageOutput:
    """The one reject row of a file that could not be read, its local path left out."""
    rel = relative_path(params["path"], params["root"])
    detail = str(exc).replace(str(params["path"]), rel)  # no local paths published
    rejected = quarantine_rows(kind, {rel: (exc.reason, detail)})
    return save_stage(StageResult(pl.DataFrame(), rejected, {"files": 1}), "quarantine", out)


@dataclass(frozen=True)
class InProcess:
    """Run each step here and now, one after the other (the embedded default)."""

    work: Path
    cfg: PipelineConfig

    def __call__(self, call: Call) -> dict[str, StageOutput]:
        return execute_step(call.step, call.key, call.inputs, call.params, str(self.work), self.cfg)

    def map(self, calls: Sequence[Call]) -> list[dict[str, StageOutput]]:
        return [self(c) for c in calls]


def in_process(work: Path, cfg: PipelineConfig) -> Runner:
    """Run each step here and now (the embedded default)."""
    return InProcess(work, cfg)
