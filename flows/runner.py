"""The Prefect runner: one generic cached task that runs one declared funnel step by name
(`pipeline.execution.runner.execute_step`), and the task runner the steps go through (this
process, a local Dask cluster or an existing one). The steps themselves are declared in
pipeline/funnels/ and run without Prefect."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import Task, task
from prefect.task_runners import TaskRunner

from pipeline.execution.runner import execute_step
from pipeline.execution.step import Call, Runner
from schemas.config import PipelineConfig
from schemas.execution import ExecutionConfig
from schemas.manifest import StageOutput


def _by_key(_context: Any, parameters: dict[str, Any]) -> str:
    return parameters["key"]


@task(name="funnel-step", task_run_name="{step}", cache_key_fn=_by_key, persist_result=True)
def funnel_step(
    step: str,
    key: str,
    inputs: dict[str, list[str]],
    params: dict[str, Any],
    work: str,
    cfg: PipelineConfig,
) -> dict[str, StageOutput]:
    """Run one funnel step; its result (Parquet paths) persists under `key`, so a re-run
    after a crash finds it `Cached`."""
    return execute_step(step, key, inputs, params, work, cfg)


@dataclass(frozen=True)
class PrefectRunner:
    """Each step as a cached task, results stored beside the corpus (`state/task-results`):
    called in this thread, or submitted to `task_runner` (Dask) so that `map` runs them at once."""

    task: Task
    work: Path
    cfg: PipelineConfig
    task_runner: TaskRunner | None

    def __call__(self, call: Call) -> dict[str, StageOutput]:
        return self.map([call])[0]

    def map(self, calls: Sequence[Call]) -> list[dict[str, StageOutput]]:
        def arguments(c: Call) -> dict[str, Any]:
            return {
                "step": c.step,
                "key": c.key,
                "inputs": c.inputs,
                "params": c.params,
                "work": str(self.work.resolve()),
                "cfg": self.cfg,
            }

        if self.task_runner is None:
            return [self.task(**arguments(c)) for c in calls]
        futures = [self.task_runner.submit(self.task, arguments(c)) for c in calls]
        return [f.result() for f in futures]


def dask_task_runner(execution: ExecutionConfig) -> TaskRunner | None:
    """prefect-dask's runner for `execution`: an existing cluster (`dask_address`), a local
    cluster of `workers` processes, or None (every step in this process)."""
    if not execution.dask_address and not execution.workers:
        return None
    from prefect_dask import DaskTaskRunner

    if execution.dask_address:
        return DaskTaskRunner(address=execution.dask_address)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": execution.workers,
            "threads_per_worker": execution.threads_per_worker,
            "processes": True,
            "dashboard_address": None,
            "host": "127.0.0.1",
        }
    )


@contextmanager
def prefect_runner(cfg: PipelineConfig) -> Iterator[Callable[[Path, PipelineConfig], Runner]]:
    """The runner factory `refresh` takes, with the task runner `cfg.execution` selects
    started for the duration (a local cluster is shut down at the end)."""
    task_runner = dask_task_runner(cfg.execution)

    def factory(work: Path, run_cfg: PipelineConfig) -> Runner:
        cached = funnel_step.with_options(result_storage=work.parent.resolve() / "task-results")
        return PrefectRunner(cached, work, run_cfg, task_runner)

    if task_runner is None:
        yield factory
        return
    with task_runner:
        yield factory
