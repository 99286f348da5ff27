"""Stage outputs read back from disk, for the tests and benchmarks that check them."""

from __future__ import annotations

import polars as pl

from pipeline.core.stage import empty_rejects
from schemas.manifest import StageOutput


def load_kept(outputs: list[StageOutput]) -> pl.DataFrame:
    """Kept rows of one or more stage outputs, concatenated in the order given."""
    return pl.concat([pl.read_parquet(o.kept) for o in outputs], how="diagonal_relaxed")


def load_rejects(outputs: list[StageOutput]) -> pl.DataFrame:
    """Rejected rows of the outputs, concatenated (an empty reject table when there are none)."""
    frames = [pl.read_parquet(o.rejected) for o in outputs]
    return pl.concat([empty_rejects(), *frames], how="vertical_relaxed")
