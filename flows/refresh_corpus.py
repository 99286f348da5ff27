"""The refresh-corpus flow: every source, one consistent snapshot.

The input folder holds one sub-folder per source kind (names in `[sources]` of the
configuration): work orders, alarm histories and manuals (with vendor fault tables).
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.corpus import refresh
from schemas.config import load_config

FLOW_NAME = "refresh-corpus"


@flow(name=FLOW_NAME, log_prints=True)
def refresh_corpus(
    input: str = "sample_data", out: str = "out/corpus", config: str | None = None
) -> str:
    """Refresh the whole corpus from the source folders under `input`; publish under `out`."""
    cfg = load_config(config)
    root = Path(input)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: input folder does not exist")
    folders = {kind: root / sub for kind, sub in cfg.sources.model_dump().items()}
    present = {kind: path if path.is_dir() else None for kind, path in folders.items()}
    if not any(present.values()):
        raise FileNotFoundError(f"{root}: none of the source folders {sorted(folders.values())}")
    return refresh(FLOW_NAME, root, Path(out), cfg, **present)
