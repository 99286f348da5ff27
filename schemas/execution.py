"""Where and in what pieces a refresh runs: shard size and the task runner.

Execution settings change how work is split and where it runs, never what is published:
they are left out of the configuration hash, so the same inputs give the same snapshot
whichever way they run.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ExecutionConfig(BaseModel):
    """Shards and task runner of a refresh (`[execution]`)."""

    model_config = ConfigDict(extra="forbid")

    shard_rows: int = Field(
        250_000,
        ge=1,
        description="records per shard: a larger input file is read and processed in row "
        "ranges of this many records; peak memory of a step grows with it",
    )
    dedup_partition_entries: int = Field(
        1 << 25,
        ge=1024,
        description="LSH bucket entries (8 bytes each) per partition of the dedup's candidate "
        "pair step; a run whose distinct records give more is split into 2, 4, ... partitions "
        "(at most 256); peak memory of that step grows with it",
    )
    workers: int = Field(
        0,
        ge=0,
        le=256,
        description="0: run every step in this process (the default); N: start a local Dask "
        "cluster of N worker processes and run the steps there",
    )
    threads_per_worker: int = Field(1, ge=1, le=64, description="threads per Dask worker")
    dask_address: str | None = Field(
        None,
        pattern=r"^(tcp|tls|ucx|inproc)://\S+$",
        description="run the steps on an existing Dask cluster, e.g. tcp://host:8786",
    )

    @model_validator(mode="after")
    def _one_cluster(self) -> ExecutionConfig:
        if self.workers and self.dask_address:
            raise ValueError("give either workers (a local cluster) or dask_address, not both")
        return self
