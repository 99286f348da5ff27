"""The refresh-corpus flow: every source, one consistent snapshot.

Every file under the input folder is read by the reader its content calls for (work orders,
alarm histories, manuals, configured vendor fault tables) or listed as skipped with a reason;
the folder may be flat or hold one sub-folder per source kind (names in `[sources]`).
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
    sources = Sources.everything(Path(input))
    published = refresh(FLOW_NAME, sources, Path(out), cfg, prefect_runner)
    report_run(FLOW_NAME, published)
    return str(published.path)
