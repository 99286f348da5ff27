"""The refresh-corpus flow: every source, one consistent snapshot.

Every file under the input folder is read by the reader its content calls for (work orders,
alarm histories, manuals, configured vendor fault tables) or listed as skipped with a reason;
the folder may be flat or hold one sub-folder per source kind (names in `[sources]`).
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.refresh import refresh_flow
from pipeline.funnels.refresh import Sources

FLOW_NAME = "refresh-corpus"


@flow(name=FLOW_NAME, log_prints=True)
def refresh_corpus(
    input: str,
    out: str,
    config: str | None = None,
    strict: bool = False,
    workers: int | None = None,
    dask_address: str | None = None,
) -> str:
    """Refresh the whole corpus from the source folders under `input`; publish under `out`."""
    root = Path(input)
    return refresh_flow(
        FLOW_NAME, lambda cfg: Sources.everything(root), out, config, strict, workers, dask_address
    )
