"""Prefect's part of a refresh: one generic cached task that runs one funnel step, and the
run's report as artifacts. The steps themselves are plain functions in pipeline/funnels/."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)
from prefect.states import Failed, State

from pipeline.errors import PipelineError
from pipeline.funnels.refresh import Sources, refresh
from pipeline.funnels.snapshot import Published, no_samples_reason
from pipeline.funnels.steps import Runner, execute_step
from pipeline.plan import plan_table_rows
from pipeline.report import funnel_markdown
from schemas.config import PipelineConfig, load_config
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


def prefect_runner(work: Path, cfg: PipelineConfig) -> Runner:
    """Each step as a cached task, results stored beside the corpus (`state/task-results`)."""
    cached = funnel_step.with_options(result_storage=work.parent.resolve() / "task-results")

    def run(
        step: str, key: str, inputs: dict[str, list[str]], params: dict[str, Any]
    ) -> dict[str, StageOutput]:
        return cached(step, key, inputs, params, str(work), cfg)

    return run


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
) -> str | State:
    """The body of every flow: refresh, report, return the snapshot's path.

    A known error (`PipelineError`) ends the run Failed with its one-line message (and the
    error as the state's data, so a caller gets it raised) instead of a traceback.
    """
    try:
        cfg = load_config(config)
        if strict:
            cfg = cfg.model_copy(update={"strict": True})
        published = refresh(flow_name, sources(cfg), Path(out), cfg, prefect_runner)
    except PipelineError as exc:
        get_run_logger().error(str(exc))
        return Failed(message=str(exc), data=exc)
    report_run(flow_name, published)
    return str(published.path)
