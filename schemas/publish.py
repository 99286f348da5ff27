"""How snapshots are written."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PublishConfig(BaseModel):
    """Parquet part files, retention of snapshots, and the corpus lock."""

    model_config = ConfigDict(extra="forbid")

    max_rows_per_shard: int = Field(200_000, gt=0, description="rows per Parquet part file at most")
    max_bytes_per_shard: int = Field(
        256 * 1024 * 1024,
        gt=0,
        description="bytes of rows per Parquet part file at most, by polars' in-memory estimate "
        "of the rows (the compressed file is smaller); with `max_rows_per_shard`, the smaller "
        "limit wins",
    )
    compression: str = Field(
        "zstd",
        description=(
            "Parquet compression codec of every part file (pyarrow's names: 'zstd', 'snappy', "
            "'gzip', 'lz4', 'brotli', 'none')"
        ),
    )
    keep_snapshots: int = Field(5, ge=1, description="published snapshots kept; older ones pruned")
    lock_wait_s: float = Field(
        0.0,
        ge=0,
        description="seconds a second run on the same corpus waits for the first to finish "
        "before it is refused; 0: refused at once",
    )
