"""Snapshot assembly: what each source kind's part of a refresh produced, carried rows of
unchanged files, counts, plan, manifest and report, published atomically in one snapshot."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from pipeline.core.stage import empty_rejects
from pipeline.funnels.incremental import carried_rows, collect_published, published_pieces
from pipeline.kb.tool_samples import tool_use_samples
from pipeline.publish.ledger import COUNTS_SCHEMA, LEDGER_SCHEMA, RefreshPlan, file_counts, funnel
from pipeline.publish.report import SampleDigest, render_report, snapshot_history
from pipeline.publish.writer import SnapshotWriter, TableStream, new_snapshot_id
from pipeline.text.pii import redact_customers
from pipeline.training.plan import plan_snapshot
from pipeline.training.trainer_configs import write_trainer_configs
from schemas import arrow
from schemas.config import PipelineConfig
from schemas.manifest import (
    Counts,
    InputFile,
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
    """Assemble this refresh's parts with the rows it carries over, and publish one snapshot.

    Headline counts: `read` is the records of every kind at its unit stage (work-order rows,
    alarm-log incidents), `rejected` the rejects from that stage on; the stages before it
    (alarm-log lines and events) are counted per stage and in `sources`."""
    carrying = [r for r in runs if r.carries_published]
    rows = cfg.execution.shard_rows
    sft_pieces = [
        *(p for r in carrying for p in _carried_pieces(previous, "sft", r, rows)),
        *(_path_piece(p) for r in runs for p in r.sft),
    ]
    quarantined = pl.concat([empty_rejects(), *(r.quarantined for r in runs)])
    reject_pieces = [
        *(_path_piece(o.rejected) for r in runs for o in r.outputs),
        *(p for r in carrying for p in _carried_pieces(previous, "rejects", r, rows)),
        _frame_piece(quarantined),
        *(_frame_piece(f) for r in runs for f in r.side_rejects),
    ]
    previous_counts = [carried_rows(state, "counts", r.plan.unchanged) for r in carrying]
    counts_long = pl.concat(
        [
            pl.DataFrame(schema=COUNTS_SCHEMA),
            *(
                f.filter(pl.col("source_kind") == r.kind)
                for r, f in zip(carrying, previous_counts, strict=True)
                if f is not None
            ),
            *(
                file_counts(
                    o.stage,
                    pl.read_parquet(o.kept, columns=["source_kind", "source_file"]),
                    pl.read_parquet(o.rejected, columns=["source_kind", "source_file", "reason"]),
                )
                for r in runs
                for o in r.outputs
            ),
        ]
    )
    counts_long = (  # a file read in several shards has one row per shard and outcome
        counts_long.group_by("source_kind", "source_file", "stage", "outcome")
        .agg(pl.col("rows").sum())
        .sort("source_kind", "source_file", "stage", "outcome")
    )
    stages = funnel(counts_long, {r.kind: list(r.stage_order) for r in runs if r.stage_order})
    headline = {
        f"{r.kind}/{stage}"
        for r in runs
        if r.stage_order
        for stage in r.stage_order[r.stage_order.index(r.unit_stage) :]
    }
    units = {f"{r.kind}/{r.unit_stage}" for r in runs if r.stage_order}
    by_reason = {}
    for name, c in stages.items():
        for reason, n in c.by_reason.items():
            if name in headline:
                by_reason[reason] = by_reason.get(reason, 0) + n
    counts = Counts(
        read=sum(c.read for k, c in stages.items() if k in units),
        kept=sum(p.rows for p in sft_pieces if p is not None),
        rejected=sum(c.rejected for k, c in stages.items() if k in headline),
        by_reason=dict(sorted(by_reason.items())),
        stages=stages,
    )
    ledger = pl.concat(
        [pl.DataFrame(schema=LEDGER_SCHEMA), *(f for r in runs for f in r.ledger)],
        how="diagonal_relaxed",  # ledgers kept by an older version may lack newer columns
    ).sort("path")
    tables = {name: pl.read_parquet(p) for r in runs for name, p in r.tables.items()}
    pretrain = tables.get("pretrain")
    refresh = RefreshSummary(
        previous_snapshot=state.name if state else None,
        processed=sorted(p for r in runs for p in r.plan.to_process),
        carried=sorted(p for r in runs for p in r.plan.unchanged),
        removed=sorted(p for r in runs for p in r.plan.removed),
    )
    with SnapshotWriter(out, cfg.publish, new_snapshot_id()) as writer:
        tools_out = writer.open_stream("sft_tools", arrow.SFT_TOOLS)
        sft = _write_sft(writer, sft_pieces, tables.get("fault_codes"), cfg, tools_out)
        if pretrain is not None:
            writer.write_table("pretrain", pretrain, arrow.PRETRAIN)
        if "fault_codes" in tables:
            writer.write_table("fault_codes", tables["fault_codes"], arrow.FAULT_CODES)
        if "incidents" in tables:
            writer.write_table("incidents", tables["incidents"], arrow.INCIDENTS)
        rejects = (_redacted_rejects(c, cfg) for c in sorted_chunks(reject_pieces, REJECT_ORDER))
        writer.write_stream("rejects", rejects, arrow.REJECTS)
        tools_out.close()
        plan = plan_snapshot(sft.tokens, pretrain, cfg.plan, sft.tool_tokens)
        writer.write_json("plan.json", plan.model_dump(mode="json"))
        write_trainer_configs(writer, plan, cfg.plan, cfg.trainer)
        writer.write_state("ledger", ledger)
        writer.write_state("counts", counts_long)
        for r in runs:
            for name, table in r.state.items():
                writer.write_state(name, table)
        manifest = Manifest(
            snapshot_id=writer.snapshot_id,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            flow=flow_name,
            code_version=code_version,
            config_hash=cfg.config_hash(),
            inputs=[InputFile(**row) for row in ledger.iter_rows(named=True)],
            skipped=skipped or [],
            counts=counts,
            sources={k: v for r in runs for k, v in r.sources.items()}
            | {"sft_tools": sft.tool_counters},
            refresh=refresh,
            quarantined=[
                QuarantinedFile(**row)
                for row in quarantined.select(
                    pl.col("source_file").alias("path"), "source_kind", "reason", "detail"
                ).iter_rows(named=True)
            ],
            outputs=writer.outputs,
        )
        manifest = manifest.model_copy(update={"outputs": writer.outputs})
        pretrain_tokens = pretrain["n_tokens"] if pretrain is not None else None
        report = render_report(
            manifest,
            plan,
            sft.tokens,
            pretrain_tokens,
            history=snapshot_history(out),
            samples=sft.digest,
            incidents=tables.get("incident_stage"),
        )
        writer.write_text("report.html", report)
        manifest = manifest.model_copy(update={"outputs": writer.outputs})
        path = writer.commit(manifest)
    tiers = sft.tokens.group_by("tier").len().sort("tier")
    return Published(path, manifest, plan, dict(zip(tiers["tier"], tiers["len"], strict=True)))


SFT_ORDER = ("source_kind", "source_file", "source_row")
REJECT_ORDER = (*SFT_ORDER, "stage", "record_id")


@dataclass(frozen=True)
class _Piece:
    """Rows to publish in one sort order, loaded only when written: their first and last
    (kind, file, row) and their count."""

    first: tuple
    last: tuple
    rows: int
    load: Callable[[], pl.DataFrame]


def _bounds(keys: pl.DataFrame) -> tuple[tuple, tuple]:
    ordered = keys.select(
        pl.col("source_kind").fill_null(""),
        pl.col("source_file").fill_null(""),
        pl.col("source_row").fill_null(-1),
    ).sort(SFT_ORDER)
    return ordered.row(0), ordered.row(-1)


def _frame_piece(frame: pl.DataFrame) -> _Piece | None:
    if frame.height == 0:
        return None
    return _Piece(*_bounds(frame.select(SFT_ORDER)), frame.height, lambda: frame)


def _path_piece(path: str) -> _Piece | None:
    keys = pl.read_parquet(path, columns=list(SFT_ORDER))
    if keys.height == 0:
        return None
    return _Piece(*_bounds(keys), keys.height, lambda: pl.read_parquet(path))


def _carried_pieces(previous: Path | None, table: str, run: SourceRun, rows: int) -> list[_Piece]:
    """The rows a published `table` holds of the carried files of `run`'s kind: a piece per
    file and range of `rows` source rows (and one for its rows without a source row), each
    read from the published files when written."""
    return [
        _Piece(
            (run.kind, p.file, -1 if p.lo is None else p.lo),
            (run.kind, p.file, -1 if p.hi is None else p.hi),
            p.rows,
            lambda scan=p.scan: collect_published(scan, previous),
        )
        for p in published_pieces(previous, table, run.kind, run.plan.unchanged, rows)
    ]


def sorted_chunks(pieces: list[_Piece | None], order: tuple[str, ...]) -> Iterator[pl.DataFrame]:
    """The pieces' rows sorted by `order`, a chunk at a time: pieces whose (kind, file, row)
    ranges overlap are loaded and sorted together; the others one by one, in order. Shards of
    one file's row ranges (and each carried file) stay apart, so a chunk is about a shard."""
    group: list[_Piece] = []
    last: tuple = ()

    def flush() -> pl.DataFrame:
        return pl.concat([p.load() for p in group], how="diagonal_relaxed").sort(
            order, maintain_order=True
        )

    for piece in sorted((p for p in pieces if p is not None), key=lambda p: (p.first, p.last)):
        if group and piece.first > last:
            yield flush()
            group = []
        group.append(piece)
        last = max(last, piece.last) if len(group) > 1 else piece.last
    if group:
        yield flush()


@dataclass(frozen=True)
class _SftSummary:
    """What the rest of the snapshot reads of the SFT rows once they are written."""

    tokens: pl.DataFrame  # tier, n_tokens of every row
    tool_tokens: pl.DataFrame  # n_tokens of every tool-use sample
    tool_counters: dict[str, int]
    digest: SampleDigest


def _write_sft(
    writer: SnapshotWriter,
    pieces: list[_Piece | None],
    knowledge_base: pl.DataFrame | None,
    cfg: PipelineConfig,
    tools_out: TableStream,
) -> _SftSummary:
    """Write the SFT rows a chunk at a time (a shard, or a carried kind's files), and their
    tool-use samples (a row's sample depends on that row alone) into `tools_out`; only the
    token lengths and the report's digest are kept."""
    sft_out = writer.open_stream("sft", arrow.SFT, partition_by="tier")
    tokens: list[pl.DataFrame] = []
    tool_tokens: list[pl.DataFrame] = []
    counters: list[dict[str, int]] = []
    digests: list[SampleDigest] = []
    for chunk in _sft_chunks(pieces):
        sft_out.write(chunk)
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
        pl.concat(tokens), pl.concat(tool_tokens), summed_counters(counters), digests[0]
    )


def _sft_chunks(pieces: list[_Piece | None]) -> Iterator[pl.DataFrame]:
    """The SFT rows in publish order as SFT columns, a chunk at a time (see `sorted_chunks`);
    one empty chunk when there are none, so every per-chunk result has its empty form."""
    empty = True
    for chunk in sorted_chunks(pieces, SFT_ORDER):
        empty = False
        yield as_sft_rows(chunk)
    if empty:
        yield empty_sft()


def summed_counters(parts: list[dict[str, int]]) -> dict[str, int]:
    """Counters of one stage run a chunk at a time, summed, in `stage_result`'s order: read,
    kept, rejected, rows per reason (sorted), then the others in the order first seen."""
    total: dict[str, int] = {}
    for part in parts:
        for name, n in part.items():
            total[name] = total.get(name, 0) + n
    head = [k for k in ("read", "kept", "rejected") if k in total]
    reasons = sorted(k for k in total if k.startswith("rejected_"))
    rest = [k for k in total if k not in head and k not in reasons]
    return {k: total[k] for k in (*head, *reasons, *rest)}


def no_samples_reason(manifest: Manifest) -> str | None:
    """One line saying why a snapshot holds no SFT samples; None when it holds some."""
    counts = manifest.counts
    if counts.kept:
        return None
    if not counts.stages:
        kinds = sorted({i.source_kind for i in manifest.inputs}) or ["none"]
        read = ", ".join(kinds)
        return f"no SFT samples: no work orders or alarm logs among the inputs (read: {read})"
    top = sorted(counts.by_reason.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    reasons = ", ".join(f"{r} {n}" for r, n in top) or "no rows read"
    incidents = manifest.sources.get("alarm_log", {}).get("incidents", 0)
    kept = f"; {incidents} alarm incidents are published in incidents/" if incidents else ""
    return f"no SFT samples: all {counts.read} records read were rejected ({reasons}){kept}"


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
