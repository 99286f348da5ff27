"""The refresh-corpus flow: every source, one consistent snapshot.

The input folder holds one sub-folder per source kind (names in `[sources]` of the
configuration): work orders, alarm histories and manuals (with vendor fault tables).
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.tasks import prefect_runner, report_run
from pipeline.funnels.refresh import Sources, refresh
from schemas.config import load_config

FLOW_NAME = "refresh-corpus"


@flow(name=FLOW_NAME, log_prints=True)
def refresh_corpus(input: str, out: str, config: str | None = None) -> str:
    """Refresh the whole corpus from the source folders under `input`; publish under `out`."""
    cfg = load_config(config)
    root = Path(input)
    folders = {kind: root / sub for kind, sub in cfg.sources.model_dump().items()}
    present = {kind: path if path.is_dir() else None for kind, path in folders.items()}
    if not any(present.values()):
        raise FileNotFoundError(f"{root}: none of the source folders {sorted(folders.values())}")
    published = refresh(FLOW_NAME, Sources(root, **present), Path(out), cfg, prefect_runner)
    report_run(FLOW_NAME, published)
    return str(published.path)
