"""The clean-workorders flow: work-order exports in, a published snapshot out (flows/corpus.py)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.corpus import refresh
from pipeline.ingest.workorders import discover_files
from schemas.config import load_config

FLOW_NAME = "clean-workorders"


@flow(name=FLOW_NAME, log_prints=True)
def clean_workorders(
    input: str = "sample_data/workorders", out: str = "out/workorders", config: str | None = None
) -> str:
    """Clean the work-order exports under `input`; publish a snapshot under `out`."""
    cfg = load_config(config)
    root = Path(input)
    if not discover_files(root, cfg.ingest):
        raise FileNotFoundError(f"{root}: no input files match {cfg.ingest.include}")
    return refresh(FLOW_NAME, root, Path(out), cfg, workorders=root)
