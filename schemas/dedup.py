"""Configuration of the dedup stage and the schema of the index it persists.

The dedup index holds one row per record kept by a run; a refresh passes the
published corpus's index back to `pipeline.dedup.dedup` so that new records are
checked against old ones. It is plain integer columns, stored as Parquet:

| column         | dtype                  | meaning                                              |
| -------------- | ---------------------- | ---------------------------------------------------- |
| `record_id`    | String                 | the kept record                                      |
| `sig_key`      | String                 | `DedupConfig.sig_key()`: scheme, seed, permutations,  |
|                |                        | shingle size and normalization version; must match   |
| `content_hash` | UInt64                 | stable 64-bit hash of the normalized four parts      |
| `machine_hash` | UInt64                 | stable hash of the machine columns, 0 when empty     |
| `codes`        | List(String)           | distinct alarm codes (lower case), as mentioned      |
| `numbers`      | List(String)           | distinct code-like numbers of the normalized text    |
| `signature`    | Array(UInt32, num_perm)| MinHash values, equal to datasketch's `hashvalues`   |

Two records are different incidents, never merged however similar their text, when their
machine columns differ, or when neither's alarm codes (or code-like numbers: 3+
digits, or digit groups joined by a letter) contain the other's.

Band hashes are not stored: they are recomputed from `signature`, so a change
of `bands`, `rows` or `threshold` between refreshes needs no rebuild, while a
change of anything in `sig_key` is refused with a clear error.
"""

from __future__ import annotations

from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

# Bump when the text normalization or the shingle/content hash functions change.
NORMALIZATION_VERSION = 2


class DedupConfig(BaseModel):
    """Exact + MinHash-LSH near-duplicate removal on character shingles."""

    model_config = ConfigDict(extra="forbid")

    shingle_size: int = Field(5, ge=1, le=32, description="characters per shingle")
    num_perm: int = Field(128, ge=8, le=1024, description="MinHash permutations")
    bands: int = Field(14, ge=1, description="LSH bands")
    rows: int = Field(8, ge=1, description="signature values per band")
    threshold: float = Field(
        0.7,
        gt=0.0,
        le=1.0,
        description="a candidate pair is a near duplicate when at least this share of "
        "signature values agree",
    )
    seed: int = Field(1, ge=0, description="datasketch MinHash seed")
    scheme: Literal["affine32", "legacy"] = Field(
        "affine32",
        description="datasketch permutation scheme: 'affine32' (datasketch >= 2 default) or "
        "'legacy' ((a*h+b) mod 2^61-1, truncated to 32 bits)",
    )
    batch_size: int = Field(
        25_000,
        ge=1,
        description="records normalized and hashed at once; the next batch is normalized "
        "while this one's signatures are computed",
    )
    pair_window: int = Field(
        16,
        ge=1,
        description="in an LSH bucket, each member is paired with the next `pair_window` "
        "members (all pairs when the bucket is smaller)",
    )
    machine_columns: tuple[str, ...] = Field(
        ("asset", "machine_model"),
        description="columns naming the machine: records whose values differ are kept apart",
    )
    threads: int = Field(1, ge=1, le=64, description="threads computing signatures")

    @model_validator(mode="after")
    def _bands_fit(self) -> DedupConfig:
        if self.bands * self.rows > self.num_perm:
            raise ValueError(
                f"bands × rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}"
            )
        return self

    def sig_key(self) -> str:
        """What an index's signatures depend on; indexes with another key are refused."""
        return (
            f"{self.scheme}/seed={self.seed}/perm={self.num_perm}/k={self.shingle_size}"
            f"/norm={NORMALIZATION_VERSION}"
        )


def index_schema(num_perm: int) -> dict[str, pl.DataType]:
    """Columns of a dedup index for signatures of `num_perm` values."""
    return {
        "record_id": pl.String(),
        "sig_key": pl.String(),
        "content_hash": pl.UInt64(),
        "machine_hash": pl.UInt64(),
        "codes": pl.List(pl.String()),
        "numbers": pl.List(pl.String()),
        "signature": pl.Array(pl.UInt32(), num_perm),
    }
