"""Prefect's part of a refresh: one generic cached task that runs one funnel step, the task
runner the steps go through (this process, a local Dask cluster or an existing one), and the
run's report as artifacts. The steps themselves are plain functions in pipeline/funnels/."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import Task, get_run_logger, task
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)
from prefect.states import Failed, State
from prefect.task_runners import TaskRunner

from pipeline.core.errors import PipelineError
from pipeline.execution.steps import Call, Runner, execute_step
from pipeline.funnels.refresh import Sources, refresh
from pipeline.publish.report import funnel_markdown
from pipeline.publish.snapshot import Published, no_samples_reason
from pipeline.training.plan import plan_table_rows
from schemas.config import PipelineConfig, load_config, with_execution
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

    def __call__(
        self, step: str, key: str, inputs: dict[str, list[str]], params: dict[str, Any]
    ) -> dict[str, StageOutput]:
        return self.map([Call(step, key, inputs, params)])[0]

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


def report_run(flow_name: str, published: Published) -> None:
    """Print the funnel and publish it (and the training plan) as Prefect artifacts."""
    manifest = published.manifest
    counts, refresh = manifest.counts, manifest.refresh
    dedup_removed = {
        reason: n
        for reason, n in counts.by_reason.items()
        if reason in {"exact_dup", "near_dup", "same_incident"}
    }
    report = funnel_markdown(
        counts,
        {
            "Refresh": {
                "files processed": len(refresh.processed),
                "files carried over": len(refresh.carried),
                "files removed": len(refresh.removed),
            },
            "Duplicates removed": dedup_removed or {"none": 0},
            "Samples per tier": published.tiers or {"none": 0},
            **{f"Source {kind}": figures for kind, figures in manifest.sources.items()},
        },
    )
    page = (published.path / "report.html").resolve().as_uri()
    create_markdown_artifact(
        key=f"{flow_name}-funnel",
        markdown=report + f"\nReport: [{page}]({page})\n",
        description=f"Funnel of snapshot {published.path.name}",
    )
    create_link_artifact(
        key=f"{flow_name}-report", link=page, link_text=f"report.html of {published.path.name}"
    )
    create_table_artifact(
        key=f"{flow_name}-plan",
        table=plan_table_rows(published.plan),
        description="Sequence budget and GPU fit per training stage",
    )
    print(report)
    for file in manifest.inputs:
        if file.columns:
            pairs = ", ".join(f"{field} <- {header}" for field, header in file.columns.items())
            print(f"columns {file.path}: {pairs}")
    reason = no_samples_reason(manifest)
    if reason:
        print(reason)
    print(f"snapshot published: {published.path}")
    print(f"report: {page}")


def refresh_flow(
    flow_name: str,
    sources: Callable[[PipelineConfig], Sources],
    out: str,
    config: str | None,
    strict: bool,
    workers: int | None = None,
    dask_address: str | None = None,
) -> str | State:
    """The body of every flow: refresh through the task runner the configuration (or
    `workers` / `dask_address`, from the CLI or a deployment) selects, report, return the
    snapshot's path.

    A known error (`PipelineError`) ends the run Failed with its one-line message (and the
    error as the state's data, so a caller gets it raised) instead of a traceback.
    """
    try:
        cfg = with_execution(load_config(config), workers, dask_address)
        if strict:
            cfg = cfg.model_copy(update={"strict": True})
        with prefect_runner(cfg) as runner:
            published = refresh(flow_name, sources(cfg), Path(out), cfg, runner)
    except PipelineError as exc:
        get_run_logger().error(str(exc))
        return Failed(message=str(exc), data=exc)
    report_run(flow_name, published)
    return str(published.path)
