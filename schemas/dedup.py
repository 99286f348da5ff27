"""Configuration of the dedup stage and the schema of the index it persists.

The dedup index holds one row per record kept by a run; a refresh passes the
published corpus's index back to `pipeline.dedup.sharded.dedup_shards` so that new records are
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
| `reported_at`  | String                 | when the record was reported, as exported            |
| `diagnosis`    | String                 | the cause column; null when absent or damaged        |
| `action`       | String                 | the action column; null when absent or damaged       |

LSH finds candidate pairs from about J 0.55 on (20 bands × 5 rows), and among records naming
a machine from about J 0.4 on (16 × 3); all buckets are split by machine (a merge needs one).
A candidate pair is one incident entered twice when either

- its text is very similar (signature agreement >= `threshold`), or
- its text is moderately similar (>= `moderate_threshold`) and the records agree on the
  machine, the alarm codes and the reported time (within `time_window_days`), and their
  diagnosis and action columns say the same (token Jaccard >= `part_agreement` on each part
  that both have undamaged);

and in both cases nothing contradicts it: machine columns that both name a machine and
differ, an alarm code that is not in the other record and is no re-typing slip of one of its
codes, or a code-like number (3+ digits, or digit groups joined by a letter) of the text with
no counterpart either equal or one slip away. A slip is one inserted, deleted or swapped
character (a substituted one too for numbers of the text: a recognized alarm code with a
substituted digit is another alarm, SV0410 vs SV0411); at most `max_code_slips` per pair, and
only for very similar text. Fields holding `锟斤拷` or U+FFFD, or of records whose `repairs`
name a lossy repair, are no evidence either way.

Band hashes are not stored: they are recomputed from `signature`, so a change
of `bands`, `rows` or `threshold` between refreshes needs no rebuild, while a
change of anything in `sig_key` is refused with a clear error.
"""

from __future__ import annotations

from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

# Bump when the text normalization or the shingle/content hash functions change.
NORMALIZATION_VERSION = 3


class DedupConfig(BaseModel):
    """Exact + MinHash-LSH near-duplicate removal on character shingles."""

    model_config = ConfigDict(extra="forbid")

    shingle_size: int = Field(
        5,
        ge=1,
        le=32,
        description="characters per shingle (character n-gram of the normalized text); part "
        "of the index's `sig_key`: a refresh with another value is refused",
    )
    num_perm: int = Field(
        128,
        ge=8,
        le=1024,
        description="MinHash permutations: values per signature (4 bytes each in the index); "
        "more values estimate similarity more precisely; part of `sig_key`",
    )
    bands: int = Field(
        20,
        ge=1,
        description="LSH bands of the text candidates; with `rows`, candidates come from "
        "about Jaccard (1/bands)^(1/rows) on (0.55 for 20 x 5); bands x rows <= num_perm",
    )
    rows: int = Field(
        5,
        ge=1,
        description="signature values per text band: more rows, fewer and closer candidates",
    )
    moderate_bands: int = Field(
        16,
        ge=1,
        description="LSH bands of the candidates among records naming the same machine (the "
        "moderate rule; about Jaccard 0.4 on for 16 x 3)",
    )
    moderate_rows: int = Field(3, ge=1, description="signature values per moderate band")
    threshold: float = Field(
        0.7,
        gt=0.0,
        le=1.0,
        description="a candidate pair is a near duplicate on its text alone when at least "
        "this share of signature values agree",
    )
    moderate_threshold: float = Field(
        0.4,
        gt=0.0,
        le=1.0,
        description="moderately similar text (this share of signature values agree): a near "
        "duplicate when machine, alarm codes, reported time, diagnosis and action agree",
    )
    time_window_days: int = Field(
        3,
        ge=0,
        description="days: reported dates at most this far apart agree (moderate rule)",
    )
    time_column: str = Field(
        "reported_at",
        description="column with the reported date, compared by the moderate rule and kept in "
        "the index",
    )
    part_agreement: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="diagnosis (or action) texts agree when the Jaccard of their tokens "
        "(Latin words, Han character pairs) reaches this",
    )
    agreement_fillers: list[str] = Field(
        default_factory=lambda: [
            "的", "了", "已经", "已", "经", "被", "将", "把", "又", "再", "也", "都", "就",
            "进行", "一下", "后", "并", "和", "及",
            "the", "a", "an", "was", "were", "is", "are", "it", "to", "of", "and", "then",
            "with", "for", "on", "at", "by", "be", "been", "has", "have", "had", "as",
        ],
        description="words re-typing adds or drops; ignored when diagnosis and action texts "
        "are compared (`part_agreement`)",
    )  # fmt: skip
    max_code_slips: int = Field(
        1,
        ge=0,
        description="re-typing slips (a character inserted, deleted or swapped) in alarm codes "
        "and code-like numbers that a very similar pair may have and still be merged",
    )
    lossy_repairs: tuple[str, ...] = Field(
        ("gbk_lossy",),
        description="`repairs` tags of a lossy repair: the record's diagnosis and action are "
        "no evidence (`锟斤拷`/U+FFFD are found per field)",
    )
    seed: int = Field(1, ge=0, description="datasketch MinHash seed; part of `sig_key`")
    scheme: Literal["affine32", "legacy"] = Field(
        "affine32",
        description="datasketch permutation scheme: 'affine32' (datasketch >= 2 default) or "
        "'legacy' ((a*h+b) mod 2^61-1, truncated to 32 bits); part of `sig_key`",
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
    threads: int = Field(
        1, ge=1, le=64, description="threads computing signatures (results do not depend on it)"
    )

    @model_validator(mode="after")
    def _bands_fit(self) -> DedupConfig:
        if self.moderate_threshold > self.threshold:
            raise ValueError("moderate_threshold must not exceed threshold")
        for bands, rows in ((self.bands, self.rows), (self.moderate_bands, self.moderate_rows)):
            if bands * rows > self.num_perm:
                raise ValueError(
                    f"bands × rows = {bands * rows} exceeds num_perm = {self.num_perm}"
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
        "reported_at": pl.String(),
        "diagnosis": pl.String(),
        "action": pl.String(),
    }
