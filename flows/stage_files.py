"""Stage results on disk: flows hand Parquet paths between tasks, never data frames."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline.stage import StageResult, empty_rejects
from schemas.manifest import StageOutput


def save_stage(result: StageResult, stage: str, work: Path, part: str = "all") -> StageOutput:
    """Write kept rows, rejects and counters under `work/<stage>/` and describe them."""
    folder = Path(work) / stage
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / f"{part}.kept.parquet"
    rejected = folder / f"{part}.rejected.parquet"
    result.kept.write_parquet(kept)
    result.rejected.write_parquet(rejected)
    (folder / f"{part}.counters.json").write_text(json.dumps(result.counters, sort_keys=True))
    return StageOutput(
        stage=stage, kept=str(kept), rejected=str(rejected), counters=result.counters
    )


def load_kept(outputs: list[StageOutput]) -> pl.DataFrame:
    """Kept rows of one or more stage outputs, concatenated in the order given."""
    return pl.concat([pl.read_parquet(o.kept) for o in outputs], how="vertical_relaxed")


def load_rejects(outputs: list[StageOutput]) -> pl.DataFrame:
    frames = [pl.read_parquet(o.rejected) for o in outputs]
    return pl.concat([empty_rejects(), *frames], how="vertical_relaxed")
