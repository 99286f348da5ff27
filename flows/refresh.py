"""The body of every flow: a refresh through the Prefect runner, and its report printed and
published as Prefect artifacts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from prefect import get_run_logger
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)
from prefect.states import Failed, State

from flows.runner import prefect_runner
from pipeline.core.errors import PipelineError
from pipeline.funnels.refresh import Sources, refresh
from pipeline.publish.counts import no_samples_reason
from pipeline.publish.report.markdown import funnel_markdown
from pipeline.publish.snapshot import Published
from pipeline.training.plan import plan_table_rows
from schemas.config import PipelineConfig, load_config, with_execution


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
