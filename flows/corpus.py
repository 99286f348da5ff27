"""The corpus refresh every flow runs: sources in, one published snapshot out.

Work orders are incremental: per input file ingest -> normalize -> filter (one task each,
cached by file content, configuration and code); then, over the files processed in this run,
dedup (against the published corpus's index) -> structure -> tiers, messages and tokens.
Unchanged files are carried over from the snapshot LATEST names. Alarm histories and manuals
(flows/sources.py) are parsed per new or changed file too; their incidents, chunks and
fault-code table are rebuilt from the parsed rows each run. Tasks hand Parquet paths to each other
(flows/stage_files.py), never data frames.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
from prefect import get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from flows.caching import by_key, code_fingerprint, task_key
from flows.stage_files import load_kept, load_rejects, save_stage
from flows.versioning import code_version
from pipeline.dedup import dedup
from pipeline.filters import apply_filters
from pipeline.incidents import incident_funnel
from pipeline.ingest.files import relative_path
from pipeline.ingest.workorders import discover_files, read_workorder_file
from pipeline.ledger import COUNTS_SCHEMA, LEDGER_SCHEMA, file_counts, funnel, plan_refresh
from pipeline.locking import corpus_lock
from pipeline.messages import render_messages
from pipeline.normalize import normalize
from pipeline.plan import plan_snapshot, plan_table_rows
from pipeline.publish import SnapshotWriter, latest_snapshot, latest_state, new_snapshot_id
from pipeline.report import funnel_markdown
from pipeline.report_html import render_report, snapshot_history
from pipeline.stage import StageResult
from pipeline.structure import structure
from pipeline.tiers import assign_tiers
from pipeline.tokens import count_tokens
from pipeline.tool_samples import tool_use_samples
from pipeline.trainer_configs import write_trainer_configs
from schemas import arrow
from schemas.config import PipelineConfig
from schemas.manifest import (
    Counts,
    InputFile,
    Manifest,
    RefreshSummary,
    SideOutputs,
    StageOutput,
)
from schemas.plan import Plan

# The SFT funnel per source kind, in pipeline order (manifest counts.stages keys: kind/stage).
STAGES: dict[str, list[str]] = {
    "workorder": ["ingest", "normalize", "filter", "dedup", "structure", "tiers"],
    "alarm_log": ["ingest", "incidents", "samples", "cross_source", "tiers"],
}


def cached(name: str):  # noqa: ANN201 - a Prefect task decorator
    """A task whose result persists under the flow-computed `key` (resume after a crash)."""
    return task(name=name, cache_key_fn=by_key, persist_result=True)


def _stage(result: StageResult, stage: str, work: str, key: str) -> StageOutput:
    return save_stage(result, stage, Path(work) / key)


def ledger_row(
    path: str,
    kind: str,
    size: int,
    sha256: str,
    encoding: str,
    rows: int,
    skipped: int = 0,
    lines: int | None = None,
) -> pl.DataFrame:
    """The ledger entry of one input file."""
    return pl.DataFrame(
        [
            {
                "path": path,
                "source_kind": kind,
                "bytes": size,
                "sha256": sha256,
                "encoding": encoding,
                "rows": rows,
                "skipped_lines": skipped,
                "lines": lines,
            }
        ],
        schema=LEDGER_SCHEMA,
    )


def render(df: pl.DataFrame, cfg: PipelineConfig) -> pl.DataFrame:
    """Messages in the record's language, and their token count under the chat template."""
    return count_tokens(render_messages(df, cfg.messages), cfg.tokens, "messages")


@cached("ingest-file")
def ingest_file(key: str, path: str, root: str, work: str, cfg: PipelineConfig) -> StageOutput:
    read = read_workorder_file(Path(path), Path(root), cfg.ingest)
    out = _stage(read.result, "ingest", work, key)
    row = ledger_row(read.path, "workorder", read.bytes, read.sha256, read.encoding, read.rows)
    row.write_parquet(Path(work) / key / "ledger.parquet")
    return out


@cached("normalize-file")
def normalize_file(
    key: str, ingested: StageOutput, names: list[str], work: str, cfg: PipelineConfig
) -> StageOutput:
    """`names`: technician names of every file in this run, redacted in this file's text too."""
    result = normalize(load_kept([ingested]), cfg.normalize, names)
    return _stage(result, "normalize", work, key)


@cached("filter-file")
def filter_file(key: str, normalized: StageOutput, work: str, cfg: PipelineConfig) -> StageOutput:
    return _stage(apply_filters(load_kept([normalized]), cfg.filters), "filter", work, key)


@cached("dedup")
def dedup_task(
    key: str, filtered: list[StageOutput], index_path: str | None, work: str, cfg: PipelineConfig
) -> StageOutput:
    index = pl.read_parquet(index_path).drop("source_file") if index_path else None
    result, new_index = dedup(load_kept(filtered), cfg.dedup, index)
    out = _stage(result, "dedup", work, key)
    new_index.join(result.kept.select("record_id", "source_file"), on="record_id").write_parquet(
        Path(work) / key / "dedup_index.parquet"
    )
    return out


@cached("structure")
def structure_task(key: str, deduped: StageOutput, work: str, cfg: PipelineConfig) -> StageOutput:
    return _stage(structure(load_kept([deduped]), cfg.structure), "structure", work, key)


@cached("tiers")
def tiers_task(key: str, structured: StageOutput, work: str, cfg: PipelineConfig) -> StageOutput:
    tiered = assign_tiers(load_kept([structured]), cfg.tiers)
    rendered = StageResult(render(tiered.kept, cfg), tiered.rejected, tiered.counters)
    return _stage(rendered, "tiers", work, key)


@dataclass
class WorkorderRun:
    """What the work-order part of a refresh did: the refresh plan and its stage outputs."""

    refresh: RefreshSummary
    carried: list[str] = field(default_factory=list)  # unchanged work-order files
    stage_outputs: list[StageOutput] = field(default_factory=list)
    ledger_keys: list[str] = field(default_factory=list)
    index_keys: list[str] = field(default_factory=list)


def run_workorders(
    root: Path,
    folder: Path | None,
    out: Path,
    work: Path,
    cfg: PipelineConfig,
    state: Path | None,
) -> WorkorderRun:
    """Plan the refresh of the work orders under `folder` and run the stages that must run."""
    logger = get_run_logger()
    files = discover_files(folder, cfg.ingest) if folder is not None else []
    rel = {relative_path(p, root): p for p in files}
    current = pl.DataFrame(
        {"path": list(rel), "sha256": [_sha256(p) for p in rel.values()]},
        schema={"path": pl.String, "sha256": pl.String},
    )
    ledger_path = state / "ledger.parquet" if state else None
    ledger = (
        pl.read_parquet(ledger_path).filter(pl.col("source_kind") == "workorder")
        if ledger_path and ledger_path.exists()
        else None
    )
    todo = plan_refresh(current, ledger)
    logger.info(
        "work orders: %d files, %d new, %d changed, %d unchanged, %d removed",
        len(files),
        len(todo.new),
        len(todo.changed),
        len(todo.unchanged),
        len(todo.removed),
    )
    run = WorkorderRun(
        RefreshSummary(
            previous_snapshot=state.name if state else None,
            processed=todo.to_process,
            carried=todo.unchanged,
            removed=todo.removed,
        ),
        carried=todo.unchanged,
    )
    base = (cfg.config_hash(), code_fingerprint())
    shas = dict(zip(current["path"], current["sha256"], strict=True))
    options = {"result_storage": out.resolve() / "state" / "task-results"}
    filtered: list[StageOutput] = []
    ingested = {}
    for path in todo.to_process:
        k_ingest = task_key("ingest", path, shas[path], *base)
        ingested[k_ingest] = ingest_file.with_options(**options)(
            k_ingest, str(rel[path]), str(root), str(work), cfg
        )
    names = _technicians(list(ingested.values()))
    for k_ingest, ingest_out in ingested.items():
        k_norm = task_key("normalize", k_ingest, *names)
        normalized = normalize_file.with_options(**options)(
            k_norm, ingest_out, names, str(work), cfg
        )
        kept = filter_file.with_options(**options)(
            task_key("filter", k_norm), normalized, str(work), cfg
        )
        run.ledger_keys.append(k_ingest)
        filtered.append(kept)
        run.stage_outputs += [ingest_out, normalized, kept]
    if not filtered:
        return run
    index_path = state / "dedup_index.parquet" if state else None
    index_arg = (
        str(_carried_index(index_path, todo.unchanged, work))
        if index_path and index_path.exists()
        else None
    )
    previous_id = state.name if state else "none"
    k_dedup = task_key("dedup", *run.ledger_keys, *todo.unchanged, previous_id, *base)
    deduped = dedup_task.with_options(**options)(k_dedup, filtered, index_arg, str(work), cfg)
    structured = structure_task.with_options(**options)(
        task_key("structure", k_dedup), deduped, str(work), cfg
    )
    tiered = tiers_task.with_options(**options)(
        task_key("tiers", k_dedup), structured, str(work), cfg
    )
    run.index_keys.append(k_dedup)
    run.stage_outputs += [deduped, structured, tiered]
    return run


def _technicians(ingested: list[StageOutput]) -> list[str]:
    """Distinct technician values of the files ingested in this run, sorted."""
    frames = [pl.read_parquet(o.kept, columns=["technician"]) for o in ingested]
    if not frames:
        return []
    return sorted(pl.concat(frames)["technician"].drop_nulls().unique().to_list())


def _carried_index(index_path: Path, unchanged: list[str], work: Path) -> Path:
    """The published index restricted to records of unchanged files (a changed file's old
    records no longer exist), written where the dedup task can read it."""
    work.mkdir(parents=True, exist_ok=True)
    target = work / "carried_dedup_index.parquet"
    pl.read_parquet(index_path).filter(pl.col("source_file").is_in(unchanged)).write_parquet(target)
    return target


def carried_workorders(out: Path, carried: list[str]) -> pl.DataFrame:
    """SFT rows of the previous snapshot that this refresh keeps (unchanged work-order files)."""
    previous = latest_snapshot(out)
    files = list((previous / "sft").rglob("*.parquet")) if previous else []
    if not files:
        return _empty_sft()
    rows = pl.read_parquet(files, hive_partitioning=False)
    return rows.filter(pl.col("source_file").is_in(carried))


@task(name="publish", cache_policy=NO_CACHE)
def publish_task(
    flow_name: str,
    out: str,
    work: str,
    run: WorkorderRun,
    side: SideOutputs,
    cfg: PipelineConfig,
) -> tuple[str, Counts]:
    """Carry unchanged work orders over from the previous snapshot, add this run's, publish."""
    out_path, prev_state = Path(out), latest_state(Path(out))
    previous = latest_snapshot(out_path)
    carried = run.carried

    def previous_rejects() -> pl.DataFrame:
        files = list((previous / "rejects").rglob("*.parquet")) if previous else []
        frame = pl.read_parquet(files) if files else load_rejects([])
        return frame.filter(pl.col("source_file").is_in(carried))

    def previous_state(name: str, schema: dict, column: str) -> pl.DataFrame:
        path = prev_state / f"{name}.parquet" if prev_state else None
        if path is None or not path.exists():
            return pl.DataFrame(schema=schema)
        return pl.read_parquet(path).filter(pl.col(column).is_in(carried))

    tiered = [s.kept for s in run.stage_outputs if s.stage == "tiers"] + side.sft
    sft = (
        pl.concat(
            [carried_workorders(out_path, carried), *map(pl.read_parquet, tiered)],
            how="diagonal_relaxed",
        )
        .pipe(_as_sft_rows)
        .sort("source_kind", "source_file", "source_row")
    )
    funnel_rejects = pl.concat(
        [previous_rejects(), load_rejects(run.stage_outputs), *map(pl.read_parquet, side.rejects)],
        how="vertical_relaxed",
    )
    side_rejects = [pl.read_parquet(p) for p in side.side_rejects]
    rejects = pl.concat([funnel_rejects, *side_rejects], how="vertical_relaxed").sort(
        "source_kind", "source_file", "source_row", "stage", "record_id"
    )
    counts_long = pl.concat(
        [previous_state("counts", COUNTS_SCHEMA, "source_file")]
        + [
            file_counts(
                s.stage,
                pl.read_parquet(s.kept, columns=["source_kind", "source_file"]),
                pl.read_parquet(s.rejected, columns=["source_kind", "source_file", "reason"]),
            )
            for s in run.stage_outputs
        ]
        + [pl.read_parquet(p) for p in side.counts]
    ).sort("source_kind", "source_file", "stage", "outcome")
    ledger = pl.concat(
        [previous_state("ledger", LEDGER_SCHEMA, "path")]
        + [pl.read_parquet(Path(work) / k / "ledger.parquet") for k in run.ledger_keys]
        + [pl.read_parquet(p) for p in side.ledger]
    ).sort("path")
    index_parts = [pl.read_parquet(Path(work) / k / "dedup_index.parquet") for k in run.index_keys]
    if prev_state and (prev_state / "dedup_index.parquet").exists():
        index_parts.insert(0, previous_state("dedup_index", {}, "source_file"))

    stages = funnel(counts_long, STAGES)
    read = sum(c.read for k, c in stages.items() if k.endswith("/ingest"))
    by_reason: dict[str, int] = {}
    for c in stages.values():
        for reason, n in c.by_reason.items():
            by_reason[reason] = by_reason.get(reason, 0) + n
    counts = Counts(
        read=read,
        kept=sft.height,
        rejected=funnel_rejects.height,
        by_reason=dict(sorted(by_reason.items())),
        stages=stages,
    )
    pretrain = pl.read_parquet(side.pretrain) if side.pretrain else None
    kb = pl.read_parquet(side.fault_codes) if side.fault_codes else None
    tools = tool_use_samples(sft, kb, cfg.tokens, cfg.tool_samples)
    events = side.state.get("alarm_events")
    incidents = (
        incident_funnel(pl.read_parquet(events), cfg.alarm_logs.incidents).kept if events else None
    )
    with SnapshotWriter(out_path, cfg.publish, new_snapshot_id()) as writer:
        writer.write_table("sft", sft, arrow.SFT, partition_by="tier")
        if pretrain is not None:
            writer.write_table("pretrain", pretrain, arrow.PRETRAIN)
        if side.fault_codes:
            writer.write_table("fault_codes", pl.read_parquet(side.fault_codes), arrow.FAULT_CODES)
        writer.write_table("rejects", rejects, arrow.REJECTS)
        writer.write_table("sft_tools", tools.kept, arrow.SFT_TOOLS)
        plan = plan_snapshot(sft, pretrain, cfg.plan, tools.kept)
        writer.write_json("plan.json", plan.model_dump(mode="json"))
        write_trainer_configs(writer, plan, cfg.plan, cfg.trainer)
        writer.write_state("ledger", ledger)
        for name, table in side.state.items():
            writer.write_state(name, pl.read_parquet(table))
        writer.write_state("counts", counts_long)
        if index_parts:
            writer.write_state("dedup_index", pl.concat(index_parts).sort("record_id"))
        manifest = Manifest(
            snapshot_id=writer.snapshot_id,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            flow=flow_name,
            code_version=code_version(),
            config_hash=cfg.config_hash(),
            inputs=[InputFile(**row) for row in ledger.iter_rows(named=True)],
            counts=counts,
            sources=side.sources | {"sft_tools": tools.counters},
            refresh=run.refresh,
            outputs=writer.outputs,
        )
        pretrain_tokens = pretrain["n_tokens"] if pretrain is not None else None
        report = render_report(
            manifest.model_copy(update={"outputs": writer.outputs}),
            plan,
            sft.select("tier", "n_tokens"),
            pretrain_tokens,
            history=snapshot_history(out_path),
            sft=sft,
            incidents=incidents,
        )
        writer.write_text("report.html", report)
        path = writer.commit(manifest.model_copy(update={"outputs": writer.outputs}))
    return str(path), counts


def _empty_sft() -> pl.DataFrame:
    return pl.from_arrow(arrow.SFT.empty_table())  # type: ignore[return-value]


def _as_sft_rows(df: pl.DataFrame) -> pl.DataFrame:
    """The SFT columns in schema order; columns a source does not produce are typed nulls."""
    empty = _empty_sft()
    return df.select(
        pl.col(c).cast(empty[c].dtype) if c in df.columns else pl.lit(None, empty[c].dtype).alias(c)
        for c in empty.columns
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def refresh(
    flow_name: str,
    root: Path,
    out: Path,
    cfg: PipelineConfig,
    *,
    workorders: Path | None = None,
    alarm_logs: Path | None = None,
    manuals: Path | None = None,
) -> str:
    """Refresh the corpus under `out` from the given source folders and publish one snapshot."""
    from flows.sources import run_alarm_logs, run_manuals

    with corpus_lock(out, cfg.publish.lock_wait_s):
        state = latest_state(out)
        work = out / "state" / "work"
        run = run_workorders(root, workorders, out, work, cfg, state)
        side = SideOutputs()
        if manuals is not None:
            side = run_manuals(root, manuals, work, cfg, state)
        if alarm_logs is not None:
            side = run_alarm_logs(root, alarm_logs, work, cfg, run, side, out, state)
        run.refresh.processed = sorted(run.refresh.processed + side.processed)
        run.refresh.carried = sorted(run.refresh.carried + side.carried)
        snapshot, counts = publish_task(flow_name, str(out), str(work), run, side, cfg)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(out / "state" / "task-results", ignore_errors=True)
    report_run(flow_name, Path(snapshot), counts, run.refresh, side)
    return snapshot


def report_run(
    flow_name: str,
    snapshot: Path,
    counts: Counts,
    refresh_summary: RefreshSummary,
    side: SideOutputs,
) -> None:
    """Log the funnel and publish it (and the training plan) as Prefect artifacts."""
    tiers = pl.read_parquet(snapshot / "sft", columns=["tier"]).group_by("tier").len().sort("tier")
    dedup_removed = {
        reason: n
        for reason, n in counts.by_reason.items()
        if reason in {"exact_dup", "near_dup", "same_incident"}
    }
    report = funnel_markdown(
        counts,
        {
            "Refresh": {
                "files processed": len(refresh_summary.processed),
                "files carried over": len(refresh_summary.carried),
                "files removed": len(refresh_summary.removed),
            },
            "Duplicates removed": dedup_removed or {"none": 0},
            "Samples per tier": dict(zip(tiers["tier"], tiers["len"], strict=True)),
            **{f"Source {kind}": figures for kind, figures in side.sources.items()},
        },
    )
    create_markdown_artifact(
        key=f"{flow_name}-funnel",
        markdown=report,
        description=f"Funnel of snapshot {snapshot.name}",
    )
    plan = Plan.model_validate_json((snapshot / "plan.json").read_text(encoding="utf-8"))
    create_table_artifact(
        key=f"{flow_name}-plan",
        table=plan_table_rows(plan),
        description="Sequence budget and GPU fit per training stage",
    )
    page = (snapshot / "report.html").resolve().as_uri()
    create_link_artifact(
        key=f"{flow_name}-report", link=page, link_text=f"report.html of {snapshot.name}"
    )
    print(report)
    print(f"snapshot published: {snapshot}")
    print(f"report: {page}")
