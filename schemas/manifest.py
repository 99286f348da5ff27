"""The snapshot manifest and the small records that flows pass between tasks."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, field_validator, model_validator


class InputFile(BaseModel):
    path: str
    source_kind: str
    bytes: int
    sha256: str
    encoding: str
    rows: int
    skipped_lines: int = 0
    lines: int | None = None
    reader: str | None = None  # kind:layout that read it (alarm_log:sinumerik, workorder:csv)
    warning: str | None = None  # most of the file did not parse: the first bad line

    columns: dict[str, str] | None = None
    """Work orders: record field -> source header(s) the reader used (override them with an
    [[ingest.sources]] `columns` entry)."""

    @field_validator("columns", mode="before")
    @classmethod
    def _from_json(cls, value: object) -> object:
        return json.loads(value) if isinstance(value, str) else value


class SkippedFile(BaseModel):
    """An input file no reader read, and why (a warning line is printed for each)."""

    path: str
    bytes: int
    reason: str


class StageCounts(BaseModel):
    """Rows one stage read, kept and rejected; `by_reason` splits the rejected rows."""

    read: int
    kept: int
    rejected: int
    by_reason: dict[str, int] = {}
    other: dict[str, int] = {}

    @model_validator(mode="after")
    def _adds_up(self) -> StageCounts:
        if self.read != self.kept + self.rejected or sum(self.by_reason.values()) != self.rejected:
            raise ValueError(f"counts do not add up: {self.model_dump()}")
        return self

    @classmethod
    def from_counters(cls, counters: dict[str, int]) -> StageCounts:
        by_reason = {
            k.removeprefix("rejected_"): v for k, v in counters.items() if k.startswith("rejected_")
        }
        other = {
            k: v
            for k, v in counters.items()
            if k not in {"read", "kept", "rejected"} and not k.startswith("rejected_")
        }
        return cls(
            read=counters["read"],
            kept=counters["kept"],
            rejected=counters["rejected"],
            by_reason=by_reason,
            other=other,
        )


class Counts(StageCounts):
    """Totals over the run (read = rows read from every input) plus the per-stage funnel."""

    stages: dict[str, StageCounts] = {}


class OutputFile(BaseModel):
    path: str
    rows: int
    bytes: int
    sha256: str


class RefreshSummary(BaseModel):
    """Which input files this run processed and which it carried over from the last snapshot."""

    previous_snapshot: str | None
    processed: list[str]
    carried: list[str]
    removed: list[str]


class QuarantinedFile(BaseModel):
    """An input file the run could not (or must not) read; its rows are not counted anywhere
    else. The rejects table holds the same file as one row (stage `quarantine`)."""

    path: str
    source_kind: str
    reason: str
    detail: str


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    snapshot_id: str
    created_at: str
    flow: str
    code_version: str
    config_hash: str
    inputs: list[InputFile]
    skipped: list[SkippedFile] = []
    counts: Counts
    sources: dict[str, dict[str, int]] = {}
    """Per source kind outside the SFT funnel (manuals, fault tables): lines, sections, chunks,
    rows kept and rejected."""
    refresh: RefreshSummary
    quarantined: list[QuarantinedFile] = []
    outputs: list[OutputFile]


class StageOutput(BaseModel):
    """What a funnel step hands to the next one: Parquet paths and counters, never frames."""

    stage: str
    kept: str
    rejected: str
    counters: dict[str, int]
    state: dict[str, str] = {}  # side tables by name (ledger rows, dedup index), Parquet paths
