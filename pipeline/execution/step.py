"""The step contract: what a funnel declares, once, and what a runner executes.

A `Funnel` is one source kind's ordered tuple of `Step`s. A step names its scope (how many
times it runs), the frames it reads, the stages whose results it returns and the plain
function that runs them. Everything else derives from the declaration: the stage order the
manifest counts, the registry a runner executes by name (`pipeline.execution.registry`), the
Prefect task run names (`flows/`), and the calls the generic driver makes
(`pipeline.funnels.driver`).

Inputs and outputs of a step are Parquet paths, never frames: a step's function gets the
frames read back (`Frames`) and returns `{label: StageResult}` (or an iterator of
`(label, StageResult)` pairs, saved as they come). A label is a stage name, or `part/stage`
for one part of a file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import polars as pl

from pipeline.core.stage import StageResult
from schemas.config import PipelineConfig
from schemas.manifest import StageOutput

Frames = dict[str, pl.DataFrame | None]
Results = dict[str, StageResult] | Iterable[tuple[str, StageResult]]
StepFn = Callable[[PipelineConfig, Frames, dict[str, Any]], Results]

# file: once per new or changed input file (it reads the file, not frames)
# shard: once per output of the step before it (a file, or a row range of a large one)
# run: once over every output of the steps before it (and the rows carried over)
# partition: like run, split by machine when the run is larger than one shard
# driver: a run-wide step that plans its own per-shard and per-partition sub-steps (dedup)
# helper: a step other steps call (a partition step's split), never called in its own place
Scope = Literal["file", "shard", "run", "partition", "driver", "helper"]


@dataclass(frozen=True)
class Out:
    """The results labelled `stage` of an earlier step of the same funnel: their kept rows
    (or rejects). A shard step runs once per such result; a run step reads them all."""

    step: str
    stage: str
    part: Literal["kept", "rejected"] = "kept"


@dataclass(frozen=True)
class Carried:
    """`rows` after the rows of state table `state` that the unchanged files keep (an empty
    frame of `empty()` when there are none): a run step over parsed and carried rows."""

    rows: Out
    state: str
    empty: Callable[[], pl.DataFrame]


@dataclass(frozen=True)
class Computed:
    """Paths a funnel function computes from the refresh (rows another funnel produced)."""

    paths: Callable[[Any], list[str]]


Input = Out | Carried | Computed


@dataclass(frozen=True)
class Step:
    """One declared step of a funnel: `run(cfg, frames, params)` executed by a runner, or for
    a `driver` step `drive(funnel_run)`, which plans and maps its own sub-steps."""

    name: str  # "<funnel>.<step>": the registry key and the Prefect task run name
    scope: Scope
    run: StepFn | None = None
    inputs: dict[str, Input] = field(default_factory=dict)  # the frames `run` reads, by name
    stages: tuple[str, ...] = ()  # the stages it runs, in order (labels of its results)
    counted: bool = True  # its stage results enter the manifest's per-stage counts
    params: Callable[[Any], dict[str, Any]] | None = None  # from the funnel run so far
    drive: Callable[[Any], list[dict[str, StageOutput]]] | None = None
    split_by: dict[str, str] = field(default_factory=dict)  # partition: input -> machine column
    splitter: str = ""  # partition: the helper step that cuts one input file by machine
    first_only: tuple[str, ...] = ()  # partition: inputs only the first partition reads
    doc: str = ""  # what one call computes


@dataclass(frozen=True)
class Call:
    """One step to run: its name, cache key, input Parquet paths and parameters."""

    step: str
    key: str
    inputs: dict[str, list[str]]
    params: dict[str, Any] = field(default_factory=dict)


class Runner(Protocol):
    """Where steps run: in this process (`pipeline.execution.runner.InProcess`), or as cached
    Prefect tasks on threads or a Dask cluster (`flows/runner.py`)."""

    def __call__(self, call: Call) -> dict[str, StageOutput]: ...

    def map(self, calls: Sequence[Call]) -> list[dict[str, StageOutput]]:
        """Run independent steps (concurrently where the runner can); results in call order."""
        ...


@dataclass(frozen=True)
class Funnel:
    """One source kind's steps, in order, and what the driver makes of their results."""

    kind: str  # the records' `source_kind`
    steps: tuple[Step, ...]
    file_params: Callable[[Any], dict[str, Any]]  # an input entry -> its file step's params
    finish: Callable[[Any, Any], None]  # (funnel run, source run): state, tables, figures
    sft: tuple[str, str] | None = None  # (step, stage) whose kept rows are SFT samples
    unit_stage: str = "ingest"  # the stage whose rows are the kind's records in the headline
    carries_published: bool = False  # unchanged files keep their published samples, rejects
    always_run: Callable[[Any], bool] | None = None  # run the run steps without files too

    @property
    def stage_order(self) -> tuple[str, ...]:
        """The stages the manifest counts for this kind, in funnel order."""
        order: list[str] = []
        for step in self.steps:
            if step.counted:
                order += [s for s in step.stages if s not in order]
        return tuple(order)

    def step(self, name: str) -> Step:
        """The step called `name` (`<funnel>.<step>`)."""
        return next(s for s in self.steps if s.name == name)

    @property
    def file_step(self) -> Step:
        """The step that reads one input file."""
        return next(s for s in self.steps if s.scope == "file")
