"""The clean-workorders flow: work-order exports in, a published snapshot out."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.tasks import prefect_runner, report_run
from pipeline.funnels.refresh import Sources, refresh
from schemas.config import load_config

FLOW_NAME = "clean-workorders"


@flow(name=FLOW_NAME, log_prints=True)
def clean_workorders(input: str, out: str, config: str | None = None) -> str:
    """Clean the work-order exports under `input`; publish a snapshot under `out`."""
    root = Path(input)
    sources = Sources(root, workorders=root)
    published = refresh(FLOW_NAME, sources, Path(out), load_config(config), prefect_runner)
    report_run(FLOW_NAME, published)
    return str(published.path)
