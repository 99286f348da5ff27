"""The clean-workorders flow: work-order exports in, a published snapshot out."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.refresh import refresh_flow
from pipeline.funnels.refresh import Sources

FLOW_NAME = "clean-workorders"


@flow(name=FLOW_NAME, log_prints=True)
def clean_workorders(
    input: str,
    out: str,
    config: str | None = None,
    strict: bool = False,
    workers: int | None = None,
    dask_address: str | None = None,
) -> str:
    """Clean the work-order exports under `input`; publish a snapshot under `out`.

    `workers` (a local Dask cluster) or `dask_address` (an existing one) override
    `[execution]` of the configuration."""
    root = Path(input)
    sources = Sources(root, workorders=root)
    return refresh_flow(FLOW_NAME, lambda cfg: sources, out, config, strict, workers, dask_address)
