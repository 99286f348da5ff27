"""The clean-manuals flow: manuals -> pretraining chunks and the fault-code knowledge base."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.tasks import refresh_and_report, with_execution
from pipeline.funnels.refresh import Sources
from schemas.config import load_config

FLOW_NAME = "clean-manuals"


@flow(name=FLOW_NAME, log_prints=True)
def clean_manuals(
    input: str,
    out: str,
    config: str | None = None,
    workers: int | None = None,
    dask_address: str | None = None,
) -> str:
    """Chunk the manuals under `input` and extract their alarm tables; publish under `out`."""
    root = Path(input)
    sources = Sources(root, manuals=root)
    cfg = with_execution(load_config(config), workers, dask_address)
    return refresh_and_report(FLOW_NAME, sources, Path(out), cfg)
