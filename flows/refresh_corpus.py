"""The refresh-corpus flow: every source, one consistent snapshot.

The input folder holds one sub-folder per source kind (names in `[sources]` of the
configuration): work orders, alarm histories and manuals (with vendor fault tables).
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.tasks import refresh_flow
from pipeline.funnels.refresh import corpus_sources

FLOW_NAME = "refresh-corpus"


@flow(name=FLOW_NAME, log_prints=True)
def refresh_corpus(input: str, out: str, config: str | None = None, strict: bool = False) -> str:
    """Refresh the whole corpus from the source folders under `input`; publish under `out`."""
    return refresh_flow(
        FLOW_NAME, lambda cfg: corpus_sources(Path(input), cfg), out, config, strict
    )
