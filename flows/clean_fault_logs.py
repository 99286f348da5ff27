"""The clean-fault-logs flow: alarm histories -> incidents -> four-part samples.

Incidents are joined with the fault-code table of the manuals under `manuals` when given,
else with the one the corpus under `out` already publishes, else published without samples.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.refresh import refresh_flow
from pipeline.funnels.refresh import Sources

FLOW_NAME = "clean-fault-logs"


@flow(name=FLOW_NAME, log_prints=True)
def clean_fault_logs(
    input: str,
    out: str,
    config: str | None = None,
    manuals: str | None = None,
    strict: bool = False,
    workers: int | None = None,
    dask_address: str | None = None,
) -> str:
    """Clean the alarm histories under `input`; publish a snapshot under `out`.

    `workers` (a local Dask cluster) or `dask_address` (an existing one) override
    `[execution]` of the configuration."""
    root = Path(input)
    sources = Sources(root, alarm_logs=root, manuals=Path(manuals) if manuals else None)
    return refresh_flow(FLOW_NAME, lambda cfg: sources, out, config, strict, workers, dask_address)
