"""The generic driver: runs any declared funnel (`pipeline.execution.step.Funnel`) step by
step through a `Runner` and returns what the snapshot needs of it (`SourceRun`).

Each step's scope says how it is called: a `file` step once per new or changed file of the
funnel's kind (an unreadable file is quarantined), a `shard` step once per result of the step
it reads, a `run` step once over them all (with the rows the unchanged files carry over), a
`partition` step like a run step but split by machine when the run is larger than a shard,
and a `driver` step plans its own sub-steps (dedup). Keys hash every input path, parameter,
the configuration and the code, so a caching runner reruns only unfinished steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.execution.keys import step_key
from pipeline.execution.stage_files import load_state
from pipeline.execution.step import Call, Carried, Computed, Funnel, Out, Runner, Step
from pipeline.funnels.incremental import FilePlan, carried_parts, carried_rows, plan_files
from pipeline.funnels.quarantine import quarantine_rows
from pipeline.ingest.inventory import InputEntry
from pipeline.publish.ledger import RefreshPlan
from pipeline.publish.snapshot import SourceRun
from schemas.config import PipelineConfig
from schemas.manifest import StageOutput

MAX_PARTITIONS = 256


@dataclass(frozen=True)
class Context:
    """What every step of one refresh shares."""

    out: Path
    work: Path
    cfg: PipelineConfig
    runner: Runner
    inventory: list[InputEntry]  # every input file, with the kind its content showed
    state: Path | None  # the last snapshot's state folder
    previous: Path | None  # the last published snapshot
    base: tuple[str, ...]  # config hash, code fingerprint, previous state

    def save(self, name: str, frame: pl.DataFrame) -> str:
        """Write a frame a step reads (carried rows) under the work folder."""
        self.work.mkdir(parents=True, exist_ok=True)
        path = self.work / f"{name}.parquet"
        frame.write_parquet(path)
        return str(path)


@dataclass
class FunnelRun:
    """One funnel's part of a refresh so far: its files, the results of each step (one
    `{label: StageOutput}` per call, in call order) and the files quarantined."""

    funnel: Funnel
    ctx: Context
    plan: FilePlan
    root: Path
    entries: list[InputEntry]
    earlier: list[SourceRun]  # the funnels that ran before this one
    results: dict[str, list[dict[str, StageOutput]]] = field(default_factory=dict)
    inputs: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # of each run step
    quarantined: list[pl.DataFrame] = field(default_factory=list)
    _parts: dict[str, list[str]] = field(default_factory=dict)

    def outputs(self, step: str, stage: str) -> list[StageOutput]:
        """The results of `step` labelled `stage` (any part), in call order."""
        return [o for r in self.results.get(step, []) for o in r.values() if o.stage == stage]

    def paths(self, ref: Out) -> list[str]:
        return [getattr(o, ref.part) for o in self.outputs(ref.step, ref.stage)]

    @property
    def has_files(self) -> bool:
        return bool(self.plan.files)

    def carried_parts(self, name: str) -> list[str]:
        """The unchanged files' rows of state table `name`, in parts of `shard_rows` rows
        written under the work folder (once per run)."""
        if name not in self._parts:
            folder, rows = self.ctx.work / "carried", self.ctx.cfg.execution.shard_rows
            unchanged = self.plan.refresh.unchanged
            self._parts[name] = carried_parts(self.ctx.state, name, unchanged, folder, rows)
        return self._parts[name]


def run_funnel(
    funnel: Funnel, ctx: Context, entries: list[InputEntry], root: Path, earlier: list[SourceRun]
) -> SourceRun:
    """Run every step of `funnel` over its input `entries` (lineage relative to `root`)."""
    plan = _complete(
        funnel, plan_files(funnel.kind, [e.path for e in entries], root, ctx.state), ctx
    )
    run = FunnelRun(funnel, ctx, plan, root, entries, earlier)
    run.quarantined.append(quarantine_rows(funnel.kind, plan.skipped))
    for step in funnel.steps:
        run.results[step.name] = _SCOPES[step.scope](run, step)
    return _source_run(run)


def _complete(funnel: Funnel, plan: FilePlan, ctx: Context) -> FilePlan:
    """A state written by an older version may lack a table the funnel carries (the blocks
    of its manuals, say) or a column of one: then its unchanged files are read again, as
    changed ones."""
    carried = {
        ref.state: ref.empty
        for s in funnel.steps
        for ref in s.inputs.values()
        if isinstance(ref, Carried)
    }
    if ctx.state is None or all(_has_columns(ctx.state, *c) for c in carried.items()):
        return plan
    todo = plan.refresh
    again = RefreshPlan(todo.new, sorted(todo.changed + todo.unchanged), [], todo.removed)
    return replace(plan, refresh=again)


def _has_columns(state: Path, name: str, empty: Callable[[], pl.DataFrame]) -> bool:
    """Whether state table `name` exists with every column of `empty()`."""
    path = state / f"{name}.parquet"
    return path.exists() and set(empty().columns) <= set(pl.read_parquet_schema(path))


def _file_calls(run: FunnelRun, step: Step) -> list[dict[str, StageOutput]]:
    """Once per new or changed file; a file that cannot be read is quarantined whole."""
    by_path = {e.path: e for e in run.entries}
    calls = []
    for path in run.plan.refresh.to_process:
        file = run.plan.files[path]
        params = {"path": str(file), "root": str(run.root), **run.funnel.file_params(by_path[file])}
        shard_rows = str(run.ctx.cfg.execution.shard_rows)
        parts = (path, run.plan.sha256[path], repr(sorted(params.items())), shard_rows)
        calls.append(Call(step.name, step_key(step.name, *parts, *run.ctx.base[:2]), {}, params))
    results = []
    for result in run.ctx.runner.map(calls):
        if "quarantine" in result:
            run.quarantined.append(pl.read_parquet(result["quarantine"].rejected))
        else:
            results.append(result)
    return results


def _key(run: FunnelRun, step: Step, inputs: dict[str, list[str]], params: dict) -> str:
    unchanged = run.plan.refresh.unchanged
    parts = (repr(sorted(inputs.items())), repr(sorted(params.items())), *unchanged)
    return step_key(step.name, *parts, *run.ctx.base)


def _shard_calls(run: FunnelRun, step: Step) -> list[dict[str, StageOutput]]:
    """Once per result of the step the (one) input names."""
    (name, ref), *others = step.inputs.items()
    assert isinstance(ref, Out) and not others, f"{step.name}: a shard step reads one Out"
    params = step.params(run) if step.params else {}
    calls = []
    for path in run.paths(ref):
        inputs = {name: [path]}
        calls.append(Call(step.name, _key(run, step, inputs, params), inputs, params))
    return run.ctx.runner.map(calls)


def _inputs(run: FunnelRun, step: Step) -> dict[str, list[str]]:
    """The paths of each input of a run step."""
    inputs = {}
    for name, ref in step.inputs.items():
        if isinstance(ref, Out):
            inputs[name] = run.paths(ref)
        elif isinstance(ref, Carried):
            rows = carried_rows(run.ctx.state, ref.state, run.plan.refresh.unchanged)
            if rows is None or rows.is_empty():  # none: the declared columns, not the state's
                rows = ref.empty()
            carried = run.ctx.save(f"carried_{ref.state}", rows)
            inputs[name] = [carried, *run.paths(ref.rows)]
        elif isinstance(ref, Computed):
            inputs[name] = ref.paths(run)
    return inputs


def _runs_now(run: FunnelRun) -> bool:
    always = run.funnel.always_run
    return run.has_files or (always is not None and always(run))


def _run_call(run: FunnelRun, step: Step) -> list[dict[str, StageOutput]]:
    """Once over every result of the steps before it and the carried rows."""
    if not _runs_now(run):
        return []
    inputs = run.inputs[step.name] = _inputs(run, step)
    params = step.params(run) if step.params else {}
    return [run.ctx.runner(Call(step.name, _key(run, step, inputs, params), inputs, params))]


def _partition_calls(run: FunnelRun, step: Step) -> list[dict[str, StageOutput]]:
    """Like a run step; for more rows than `execution.shard_rows` in the inputs `split_by`
    names, once per partition of the machines (every row of one machine in one partition),
    each reading that partition of every such input file (`<funnel>.split`)."""
    if not _runs_now(run):
        return []
    inputs = run.inputs[step.name] = _inputs(run, step)
    key = _key(run, step, inputs, {})
    rows = max(_rows(inputs[name]) for name in step.split_by)
    parts = min(-(-rows // run.ctx.cfg.execution.shard_rows), MAX_PARTITIONS)
    if parts <= 1:
        return [run.ctx.runner(Call(step.name, key, inputs, {}))]
    split = {name: _split(run, step, key, name, inputs[name], parts) for name in step.split_by}
    nothing = {name: [run.ctx.save(f"{step.name}-no-{name}", _empty_like(inputs[name]))]
               for name in step.first_only}  # fmt: skip
    calls = []
    for k in range(parts):
        label = f"part-{k:05d}/split"
        part: dict[str, list[str]] = {name: [o[label].kept for o in split[name]] for name in split}
        part |= {name: inputs[name] if k == 0 else nothing[name] for name in step.first_only}
        calls.append(Call(step.name, step_key(key, label), {**inputs, **part}, {}))
    return run.ctx.runner.map(calls)


def _rows(paths: list[str]) -> int:
    return sum(pl.scan_parquet(p).select(pl.len()).collect().item() for p in paths)


def _empty_like(paths: list[str]) -> pl.DataFrame:
    return pl.read_parquet(paths[0]).clear() if paths else pl.DataFrame()


def _split(
    run: FunnelRun, step: Step, key: str, name: str, paths: list[str], parts: int
) -> list[dict[str, StageOutput]]:
    """Each file of input `name` split by its machine column into `parts` partitions."""
    split = step.splitter  # the helper step the partition step names
    params = {"column": step.split_by[name], "parts": parts}
    return run.ctx.runner.map(
        [
            Call(split, step_key(split, key, name, str(i), str(parts)), {"frame": [p]}, params)
            for i, p in enumerate(paths)
        ]
    )


def _driven(run: FunnelRun, step: Step) -> list[dict[str, StageOutput]]:
    """A step that plans and maps its own sub-steps (the sharded dedup)."""
    assert step.drive is not None, f"{step.name}: a driver step needs `drive`"
    return step.drive(run)


def _helper(run: FunnelRun, step: Step) -> list[dict[str, StageOutput]]:
    """A step other steps call (the partition split): nothing to run in its own place."""
    return []


_SCOPES: dict[str, Any] = {
    "file": _file_calls,
    "shard": _shard_calls,
    "run": _run_call,
    "partition": _partition_calls,
    "driver": _driven,
    "helper": _helper,
}


def _source_run(run: FunnelRun) -> SourceRun:
    """What the snapshot needs of the funnel: counted results, samples, ledger, quarantine;
    the funnel's `finish` adds its state, tables and figures."""
    funnel = run.funnel
    counted = [
        o
        for step in funnel.steps
        if step.counted
        for r in run.results[step.name]
        for o in r.values()
        if o.stage in step.stages
    ]
    sft = [o.kept for o in run.outputs(*funnel.sft)] if funnel.sft else []
    file_outputs = [o for r in run.results[funnel.file_step.name] for o in r.values()]
    source = SourceRun(
        funnel.kind,
        funnel.stage_order,
        run.plan.refresh,
        outputs=counted,
        sft=sft,
        ledger=_ledger(run, file_outputs),
        carries_published=funnel.carries_published,
        quarantined=pl.concat(run.quarantined),
        unit_stage=funnel.unit_stage,
    )
    funnel.finish(run, source)
    return source


def _ledger(run: FunnelRun, outputs: list[StageOutput]) -> list[pl.DataFrame]:
    """Ledger rows of the files processed now and of the unchanged ones."""
    unchanged = run.plan.refresh.unchanged
    carried = carried_rows(run.ctx.state, "ledger", unchanged, column="path")
    if carried is not None:
        carried = carried.filter(pl.col("source_kind") == run.funnel.kind)
    return [f for f in (carried, load_state(outputs, "ledger")) if f is not None]
