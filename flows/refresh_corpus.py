"""The refresh-corpus flow: every source, one consistent snapshot.

The input folder holds one sub-folder per source kind (names in `[sources]` of the
configuration): work orders, alarm histories and manuals (with vendor fault tables).
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.tasks import refresh_and_report, with_execution
from pipeline.funnels.refresh import Sources
from schemas.config import load_config

FLOW_NAME = "refresh-corpus"


@flow(name=FLOW_NAME, log_prints=True)
def refresh_corpus(
    input: str,
    out: str,
    config: str | None = None,
    workers: int | None = None,
    dask_address: str | None = None,
) -> str:
    """Refresh the whole corpus from the source folders under `input`; publish under `out`."""
    cfg = with_execution(load_config(config), workers, dask_address)
    root = Path(input)
    folders = {kind: root / sub for kind, sub in cfg.sources.model_dump().items()}
    present = {kind: path if path.is_dir() else None for kind, path in folders.items()}
    if not any(present.values()):
        raise FileNotFoundError(f"{root}: none of the source folders {sorted(folders.values())}")
    return refresh_and_report(FLOW_NAME, Sources(root, **present), Path(out), cfg)
