"""The clean-manuals flow: manuals -> pretraining chunks and the fault-code knowledge base."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.tasks import prefect_runner, report_run
from pipeline.funnels.refresh import Sources, refresh
from schemas.config import load_config

FLOW_NAME = "clean-manuals"


@flow(name=FLOW_NAME, log_prints=True)
def clean_manuals(input: str, out: str, config: str | None = None) -> str:
    """Chunk the manuals under `input` and extract their alarm tables; publish under `out`."""
    root = Path(input)
    sources = Sources(root, manuals=root)
    published = refresh(FLOW_NAME, sources, Path(out), load_config(config), prefect_runner)
    report_run(FLOW_NAME, published)
    return str(published.path)
