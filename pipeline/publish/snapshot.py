"""Snapshot assembly: what each source kind's part of a refresh produced, carried rows of
unchanged files, counts, plan, manifest and report, published atomically in one snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from pipeline.core.stage import empty_rejects
from pipeline.kb.coverage import CodeTally, kb_coverage, sample_code_counts
from pipeline.kb.tool_samples import tool_use_samples
from pipeline.publish.counts import counts_by_file, headline_counts, summed_counters
from pipeline.publish.ledger import LEDGER_SCHEMA, RefreshPlan
from pipeline.publish.pieces import (
    REJECT_ORDER,
    SFT_ORDER,
    Piece,
    carried_pieces,
    frame_piece,
    path_piece,
    sorted_chunks,
)
from pipeline.publish.report.data import SampleDigest, snapshot_history
from pipeline.publish.report.page import render_report
from pipeline.publish.writer import SnapshotWriter, TableStream, new_snapshot_id
from pipeline.text.pii import redact_customers
from pipeline.training.plan import plan_snapshot
from pipeline.training.trainer_configs import write_trainer_configs
from schemas import arrow
from schemas.config import PipelineConfig
from schemas.manifest import (
    InputFile,
    KbCoverage,
    Manifest,
    QuarantinedFile,
    RefreshSummary,
    SkippedFile,
    StageOutput,
)
from schemas.plan import Plan


@dataclass
class SourceRun:
    """What one source kind's part of a refresh produced (Parquet paths and small tables)."""

    kind: str
    stage_order: tuple[str, ...]
    plan: RefreshPlan
    outputs: list[StageOutput] = field(default_factory=list)  # counted in the SFT funnel
    sft: list[str] = field(default_factory=list)  # rendered samples
    ledger: list[pl.DataFrame] = field(default_factory=list)  # rows of every current file
    # read by the next refresh; a list is written part after part (frames or Parquet paths)
    state: dict[str, pl.DataFrame | list[pl.DataFrame | str]] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)  # pretrain, fault_codes, incidents
    side_rejects: list[pl.DataFrame] = field(default_factory=list)  # outside the SFT funnel
    sources: dict[str, dict[str, int]] = field(default_factory=dict)  # manifest.sources
    carries_published: bool = False  # unchanged files keep their published samples and rejects
    quarantined: pl.DataFrame = field(default_factory=empty_rejects)  # one reject row per file
    unit_stage: str = "ingest"  # the stage whose rows are the kind's records in the headline


@dataclass(frozen=True)
class Published:
    path: Path
    manifest: Manifest
    plan: Plan
    tiers: dict[str, int]


def empty_sft() -> pl.DataFrame:
    return pl.from_arrow(arrow.SFT.empty_table())  # type: ignore[return-value]


def as_sft_rows(df: pl.DataFrame) -> pl.DataFrame:
    """The SFT columns in schema order; columns a source does not produce are typed nulls."""
    empty = empty_sft()
    return df.select(
        pl.col(c).cast(empty[c].dtype) if c in df.columns else pl.lit(None, empty[c].dtype).alias(c)
        for c in empty.columns
    )


def publish_snapshot(
    flow_name: str,
    out: Path,
    cfg: PipelineConfig,
    runs: list[SourceRun],
    previous: Path | None,
    state: Path | None,
    code_version: str,
    skipped: list[SkippedFile] | None = None,
) -> Published:
    """Assemble this refresh's parts with the rows it carries over, and publish one snapshot
    (counts: `pipeline.publish.counts`)."""
    parts = _Parts.of(runs, previous, state, cfg.execution.shard_rows)
    with SnapshotWriter(out, cfg.publish, new_snapshot_id()) as writer:
        sft, plan, coverage = _write_tables(writer, parts, cfg)
        _write_state(writer, parts, runs)
        manifest = Manifest(
            snapshot_id=writer.snapshot_id,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            flow=flow_name,
            code_version=code_version,
            config_hash=cfg.config_hash(),
            inputs=[InputFile(**row) for row in parts.ledger.iter_rows(named=True)],
            skipped=skipped or [],
            counts=headline_counts(runs, parts.counts, sum(p.rows for p in parts.sft if p)),
            sources={k: v for r in runs for k, v in r.sources.items()}
            | {"sft_tools": sft.tool_counters},
            refresh=_refresh_summary(runs, state),
            quarantined=_quarantined_files(parts.quarantined),
            kb_coverage=coverage,
            outputs=writer.outputs,
        )
        manifest = manifest.model_copy(update={"outputs": writer.outputs})
        writer.write_text("report.html", _report(out, manifest, plan, sft, parts))
        manifest = manifest.model_copy(update={"outputs": writer.outputs})
        path = writer.commit(manifest)
    tiers = sft.tokens.group_by("tier").len().sort("tier")
    return Published(path, manifest, plan, dict(zip(tiers["tier"], tiers["len"], strict=True)))


@dataclass(frozen=True)
class _Parts:
    """What a snapshot publishes, gathered from the runs and the rows they carry over."""

    sft: list[Piece | None]
    rejects: list[Piece | None]
    quarantined: pl.DataFrame
    counts: pl.DataFrame  # rows per kind, file, stage and outcome
    ledger: pl.DataFrame
    tables: dict[str, pl.DataFrame]  # pretrain, fault_codes, incidents, incident_stage

    @classmethod
    def of(cls, runs: list[SourceRun], previous: Path | None, state: Path | None, rows: int):
        carrying = [r for r in runs if r.carries_published]

        def carried(table: str) -> list[Piece | None]:
            return [
                p
                for r in carrying
                for p in carried_pieces(previous, table, r.kind, r.plan.unchanged, rows)
            ]

        quarantined = pl.concat([empty_rejects(), *(r.quarantined for r in runs)])
        rejects = [
            *(path_piece(o.rejected) for r in runs for o in r.outputs),
            *carried("rejects"),
            frame_piece(quarantined),
            *(frame_piece(f) for r in runs for f in r.side_rejects),
        ]
        ledger = pl.concat(
            [pl.DataFrame(schema=LEDGER_SCHEMA), *(f for r in runs for f in r.ledger)],
            how="diagonal_relaxed",  # ledgers kept by an older version may lack newer columns
        ).sort("path")
        return cls(
            sft=[*carried("sft"), *(path_piece(p) for r in runs for p in r.sft)],
            rejects=rejects,
            quarantined=quarantined,
            counts=counts_by_file(runs, state),
            ledger=ledger,
            tables={name: pl.read_parquet(p) for r in runs for name, p in r.tables.items()},
        )


def _write_tables(
    writer: SnapshotWriter, parts: _Parts, cfg: PipelineConfig
) -> tuple[_SftSummary, Plan, KbCoverage]:
    """The SFT and tool-use samples, the other tables, the rejects, the plan and the
    trainer configurations; the knowledge-base coverage of the work orders they hold and
    of the incidents."""
    tables = parts.tables
    tools_out = writer.open_stream("sft_tools", arrow.SFT_TOOLS)
    sft = _write_sft(writer, parts.sft, tables.get("fault_codes"), cfg, tools_out)
    for name, schema in (
        ("pretrain", arrow.PRETRAIN),
        ("fault_codes", arrow.FAULT_CODES),
        ("incidents", arrow.INCIDENTS),
    ):
        if name in tables:
            writer.write_table(name, tables[name], schema)
    rejects = (_redacted_rejects(c, cfg) for c in sorted_chunks(parts.rejects, REJECT_ORDER))
    workorder_codes = CodeTally()
    writer.write_stream("rejects", workorder_codes.rejects(rejects), arrow.REJECTS)
    tools_out.close()
    plan = plan_snapshot(sft.tokens, tables.get("pretrain"), cfg.plan, sft.tool_tokens)
    writer.write_json("plan.json", plan.model_dump(mode="json"))
    write_trainer_configs(writer, plan, cfg.plan, cfg.trainer)
    workorder_codes.add(sft.workorder_codes)
    coverage = kb_coverage(
        tables.get("fault_codes"), tables.get("incidents"), workorder_codes.counts
    )
    return sft, plan, coverage


def _write_state(writer: SnapshotWriter, parts: _Parts, runs: list[SourceRun]) -> None:
    """What the next refresh reads: the ledger, the counts, each kind's own state."""
    writer.write_state("ledger", parts.ledger)
    writer.write_state("counts", parts.counts)
    for r in runs:
        for name, table in r.state.items():
            writer.write_state(name, table)


def _refresh_summary(runs: list[SourceRun], state: Path | None) -> RefreshSummary:
    return RefreshSummary(
        previous_snapshot=state.name if state else None,
        processed=sorted(p for r in runs for p in r.plan.to_process),
        carried=sorted(p for r in runs for p in r.plan.unchanged),
        removed=sorted(p for r in runs for p in r.plan.removed),
    )


def _quarantined_files(quarantined: pl.DataFrame) -> list[QuarantinedFile]:
    columns = (pl.col("source_file").alias("path"), "source_kind", "reason", "detail")
    return [QuarantinedFile(**row) for row in quarantined.select(columns).iter_rows(named=True)]


def _report(out: Path, manifest: Manifest, plan: Plan, sft: _SftSummary, parts: _Parts) -> str:
    pretrain = parts.tables.get("pretrain")
    return render_report(
        manifest,
        plan,
        sft.tokens,
        pretrain["n_tokens"] if pretrain is not None else None,
        history=snapshot_history(out),
        samples=sft.digest,
        incidents=parts.tables.get("incident_stage"),
    )


@dataclass(frozen=True)
class _SftSummary:
    """What the rest of the snapshot reads of the SFT rows once they are written."""

    tokens: pl.DataFrame  # tier, n_tokens of every row
    tool_tokens: pl.DataFrame  # n_tokens of every tool-use sample
    tool_counters: dict[str, int]
    digest: SampleDigest
    workorder_codes: pl.DataFrame  # code, workorders: work-order rows citing it


def _write_sft(
    writer: SnapshotWriter,
    pieces: list[Piece | None],
    knowledge_base: pl.DataFrame | None,
    cfg: PipelineConfig,
    tools_out: TableStream,
) -> _SftSummary:
    """Write the SFT rows a chunk at a time (a shard, or a carried kind's files), and their
    tool-use samples (a row's sample depends on that row alone) into `tools_out`; only the
    token lengths, the report's digest and the work orders per alarm code are kept."""
    sft_out = writer.open_stream("sft", arrow.SFT, partition_by="tier")
    tokens: list[pl.DataFrame] = []
    tool_tokens: list[pl.DataFrame] = []
    counters: list[dict[str, int]] = []
    digests: list[SampleDigest] = []
    codes = CodeTally()
    for chunk in _sft_chunks(pieces):
        sft_out.write(chunk)
        codes.add(sample_code_counts(chunk))
        tokens.append(chunk.select("tier", "n_tokens"))
        tools = tool_use_samples(chunk, knowledge_base, cfg.tokens, cfg.tool_samples)
        tools_out.write(tools.kept)
        tool_tokens.append(tools.kept.select("n_tokens"))
        counters.append(tools.counters)
        digests.append(SampleDigest.of(chunk))
        if len(digests) == 2:
            digests = [digests[0].merge(digests[1])]
    sft_out.close()
    return _SftSummary(
        pl.concat(tokens),
        pl.concat(tool_tokens),
        summed_counters(counters),
        digests[0],
        codes.counts,
    )


def _sft_chunks(pieces: list[Piece | None]) -> Iterator[pl.DataFrame]:
    """The SFT rows in publish order as SFT columns, a chunk at a time (see `sorted_chunks`);
    one empty chunk when there are none, so every per-chunk result has its empty form."""
    empty = True
    for chunk in sorted_chunks(pieces, SFT_ORDER):
        empty = False
        yield as_sft_rows(chunk)
    if empty:
        yield empty_sft()


def _redacted_rejects(rejects: pl.DataFrame, cfg: PipelineConfig) -> pl.DataFrame:
    """Payload and detail of every reject (work orders, alarm logs, manuals, fault tables,
    quarantined files) redacted like kept rows before they are published. `make_rejects`
    already redacts contacts and cued names; the configured customer names are added here."""
    customers = cfg.normalize.customer_names
    if not customers:
        return rejects
    return rejects.with_columns(
        redact_customers(pl.col("payload"), customers),
        redact_customers(pl.col("detail"), customers),
    )
