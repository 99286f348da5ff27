"""The snapshot manifest and the small records that flows pass between tasks."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


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


class MissingCode(BaseModel):
    """An alarm code seen in alarm logs or work orders that the knowledge base has no entry for."""

    code: str = Field(description="canonical FAMILY:CODE")
    incidents: int = Field(description="alarm-log incidents that cite the code")
    workorders: int = Field(
        description="work-order rows read (kept or rejected) that cite the code"
    )
    seen: int = Field(description="incidents + workorders")


class FamilyCoverage(BaseModel):
    """How well the knowledge base covers one code family (the FAMILY of FAMILY:CODE).
    Codes are counted distinct: seen = covered + missing, kb_codes = covered + never_seen."""

    family: str = Field(description="code family; UNKNOWN for codes read without one")
    kb_codes: int = Field(description="distinct codes with a knowledge-base entry")
    seen: int = Field(description="distinct codes cited by an incident or a work order")
    covered: int = Field(description="codes seen that have an entry")
    missing: int = Field(description="codes seen that have no entry: the manual to add")
    never_seen: int = Field(description="codes with an entry that no incident or work order cites")
    incidents: int = Field(description="alarm-log incidents of the family")
    incidents_without_entry: int = Field(
        description="incidents none of whose codes has an entry (no sample is made of them)"
    )
    top_missing: list[MissingCode] = Field(
        description="the missing codes seen most often (at most `KbCoverage.top_n`), most first"
    )
    never_seen_codes: list[str] = Field(
        description="the first codes (in code order, at most `KbCoverage.top_n`) never seen"
    )

    @model_validator(mode="after")
    def _adds_up(self) -> FamilyCoverage:
        if self.covered + self.missing != self.seen or (
            self.covered + self.never_seen != self.kb_codes
        ):
            raise ValueError(f"coverage does not add up: {self.model_dump()}")
        return self


class KbCoverage(BaseModel):
    """Per code family: the alarm codes seen in alarm logs and work orders that the fault-code
    knowledge base (fault_codes/) lacks, the entries never seen, the incidents without an
    entry. Alarm logs count by incident (the incidents table's `codes`); work orders count
    every row read, kept or rejected: kept rows by their `alarm_codes`, rejected rows by the
    `alarm_codes` of their reject payload (a row rejected before normalization, such as
    `malformed_row`, has none); a row citing a code twice counts once."""

    top_n: int = Field(description="most codes listed per family in each list")
    families: list[FamilyCoverage] = Field(
        description="one entry per family seen or in the knowledge base, most missing codes first"
    )


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
    kb_coverage: KbCoverage | None = Field(
        None, description="knowledge-base coverage per code family (None in older manifests)"
    )
    outputs: list[OutputFile]


class StageOutput(BaseModel):
    """What a funnel step hands to the next one: Parquet paths and counters, never frames."""

    stage: str
    kept: str
    rejected: str
    counters: dict[str, int]
    state: dict[str, str] = {}  # side tables by name (ledger rows, dedup index), Parquet paths
