"""Stage results on disk: steps hand Parquet paths to each other, never data frames."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline.core.stage import StageResult
from schemas.manifest import StageOutput


def read_frames(paths: list[str]) -> pl.DataFrame | None:
    """The Parquet files `paths` as one frame (None when there are none)."""
    if not paths:
        return None
    return pl.concat([pl.read_parquet(p) for p in paths], how="diagonal_relaxed")


def save_stage(result: StageResult, stage: str, folder: Path) -> StageOutput:
    """Write kept rows, rejects, counters and state tables under `folder/<stage>/`."""
    target = Path(folder) / stage
    target.mkdir(parents=True, exist_ok=True)
    result.kept.write_parquet(target / "kept.parquet")
    result.rejected.write_parquet(target / "rejected.parquet")
    (target / "counters.json").write_text(json.dumps(result.counters, sort_keys=True))
    state = {}
    for name, table in result.state.items():
        table.write_parquet(target / f"{name}.parquet")
        state[name] = str(target / f"{name}.parquet")
    return StageOutput(
        stage=stage,
        kept=str(target / "kept.parquet"),
        rejected=str(target / "rejected.parquet"),
        counters=result.counters,
        state=state,
    )


def load_state(outputs: list[StageOutput], name: str) -> pl.DataFrame | None:
    """State table `name` of the outputs that have one, concatenated; None when none has."""
    frames = [pl.read_parquet(o.state[name]) for o in outputs if name in o.state]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None
