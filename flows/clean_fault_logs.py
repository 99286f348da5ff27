"""The clean-fault-logs flow: alarm histories -> incidents -> four-part samples.

Incidents are joined with the fault-code table of the manuals under `manuals` when given,
else with the one the corpus under `out` already publishes, else published without samples.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.tasks import prefect_runner, report_run
from pipeline.funnels.refresh import Sources, refresh
from schemas.config import load_config

FLOW_NAME = "clean-fault-logs"


@flow(name=FLOW_NAME, log_prints=True)
def clean_fault_logs(
    input: str, out: str, config: str | None = None, manuals: str | None = None
) -> str:
    """Clean the alarm histories under `input`; publish a snapshot under `out`."""
    root = Path(input)
    sources = Sources(root, alarm_logs=root, manuals=Path(manuals) if manuals else None)
    published = refresh(FLOW_NAME, sources, Path(out), load_config(config), prefect_runner)
    report_run(FLOW_NAME, published)
    return str(published.path)
