"""The clean-fault-logs flow: alarm histories -> incidents -> four-part samples.

Incidents are joined with the fault-code table of the manuals under `manuals` when given,
else with the one the corpus under `out` already publishes.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.corpus import refresh
from schemas.config import load_config

FLOW_NAME = "clean-fault-logs"


@flow(name=FLOW_NAME, log_prints=True)
def clean_fault_logs(
    input: str = "sample_data/alarm_logs",
    out: str = "out/fault_logs",
    config: str | None = None,
    manuals: str | None = "sample_data/manuals",
) -> str:
    """Clean the alarm histories under `input`; publish a snapshot under `out`."""
    cfg = load_config(config)
    root = Path(input)
    return refresh(
        FLOW_NAME, root, Path(out), cfg, alarm_logs=root, manuals=Path(manuals) if manuals else None
    )
