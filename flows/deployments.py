"""Deployments of the four flows, served by one long-running process (`cnc-corpus serve`).

One mechanism only: `serve` (no prefect.yaml, no work pool), because `prefect deploy` and
`serve` upsert the same `<flow>/<deployment>` names and overwrite each other. Each deployment
is named after its flow, so the command a user types is

    prefect deployment run clean-workorders/clean-workorders

(Prefect requires `<flow>/<deployment>`; a bare flow name is refused by its CLI).
"""

from __future__ import annotations

from pathlib import Path

from prefect import serve
from prefect.deployments.runner import RunnerDeployment

from flows.clean_fault_logs import clean_fault_logs
from flows.clean_manuals import clean_manuals
from flows.clean_workorders import clean_workorders
from flows.refresh_corpus import refresh_corpus
from schemas.config import load_config

NIGHTLY = "0 2 * * *"


def build_deployments(
    input: Path, out: Path, config: Path | None, cron: str | None = NIGHTLY
) -> list[RunnerDeployment]:
    """refresh-corpus on a schedule (nightly by default); the cleaning flows run on demand.

    Paths are made absolute: a served run starts in a subprocess of its own.
    """
    cfg = load_config(config)
    root, out = input.resolve(), out.resolve()
    settings = {"config": str(config.resolve()) if config else None}
    folders = cfg.sources
    return [
        refresh_corpus.to_deployment(
            name="refresh-corpus",
            cron=cron,
            parameters={"input": str(root), "out": str(out / "corpus"), **settings},
            description="Nightly refresh of the whole corpus: one consistent snapshot.",
        ),
        clean_workorders.to_deployment(
            name="clean-workorders",
            parameters={
                "input": str(root / folders.workorders),
                "out": str(out / "workorders"),
                **settings,
            },
            description="Work-order exports only (incremental).",
        ),
        clean_fault_logs.to_deployment(
            name="clean-fault-logs",
            parameters={
                "input": str(root / folders.alarm_logs),
                "out": str(out / "fault_logs"),
                "manuals": str(root / folders.manuals),
                **settings,
            },
            description="Alarm histories joined with the manuals' fault-code table.",
        ),
        clean_manuals.to_deployment(
            name="clean-manuals",
            parameters={
                "input": str(root / folders.manuals),
                "out": str(out / "manuals"),
                **settings,
            },
            description="Manuals: pretraining chunks and the fault-code table.",
        ),
    ]


def serve_all(input: Path, out: Path, config: Path | None, cron: str | None) -> None:
    """Register the deployments and run their flow runs, one at a time (SQLite-friendly)."""
    serve(*build_deployments(input, out, config, cron), limit=1)
