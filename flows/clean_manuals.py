"""The clean-manuals flow: manuals -> pretraining chunks and the fault-code knowledge base."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.refresh import refresh_flow
from pipeline.funnels.refresh import Sources

FLOW_NAME = "clean-manuals"


@flow(name=FLOW_NAME, log_prints=True)
def clean_manuals(
    input: str,
    out: str,
    config: str | None = None,
    strict: bool = False,
    workers: int | None = None,
    dask_address: str | None = None,
) -> str:
    """Chunk the manuals under `input` and extract their alarm tables; publish under `out`."""
    root = Path(input)
    sources = Sources(root, manuals=root)
    return refresh_flow(FLOW_NAME, lambda cfg: sources, out, config, strict, workers, dask_address)
