"""The clean-manuals flow: manuals -> pretraining chunks and the fault-code knowledge base."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.corpus import refresh
from schemas.config import load_config

FLOW_NAME = "clean-manuals"


@flow(name=FLOW_NAME, log_prints=True)
def clean_manuals(
    input: str = "sample_data/manuals", out: str = "out/manuals", config: str | None = None
) -> str:
    """Chunk the manuals under `input` and extract their alarm tables; publish under `out`."""
    cfg = load_config(config)
    root = Path(input)
    return refresh(FLOW_NAME, root, Path(out), cfg, manuals=root)
