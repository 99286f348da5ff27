"""The clean-workorders flow: raw work-order exports in, a published snapshot out.

Per input file: ingest -> normalize -> filter (one task each, cached by file content,
configuration and code). Then, over all files processed in this run: dedup (against the
published corpus's index) -> structure -> tiers -> messages and tokens -> publish. A refresh
processes only new or changed files and carries the rest over from the previous snapshot.
Tasks hand Parquet paths to each other (flows/stage_files.py), never data frames.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from flows.caching import by_key, code_fingerprint, task_key
from flows.stage_files import load_kept, load_rejects, save_stage
from flows.versioning import code_version
from pipeline.dedup import dedup
from pipeline.filters import apply_filters
from pipeline.ingest.workorders import discover_files, read_workorder_file
from pipeline.ledger import COUNTS_SCHEMA, LEDGER_SCHEMA, file_counts, funnel, plan_refresh
from pipeline.locking import corpus_lock
from pipeline.messages import render_messages
from pipeline.normalize import normalize
from pipeline.plan import plan_stages, plan_table_rows
from pipeline.publish import SnapshotWriter, latest_snapshot, latest_state, new_snapshot_id
from pipeline.report import funnel_markdown
from pipeline.stage import StageResult, stage_result
from pipeline.structure import structure
from pipeline.tiers import assign_tiers
from pipeline.tokens import count_tokens
from schemas import arrow
from schemas.config import PipelineConfig, load_config
from schemas.manifest import (
    Counts,
    InputFile,
    Manifest,
    RefreshSummary,
    StageCounts,
    StageOutput,
)
from schemas.plan import Plan

FLOW_NAME = "clean-workorders"
STAGES = ["ingest", "normalize", "filter", "dedup", "structure", "tiers"]


def cached(name: str):  # noqa: ANN201 - a Prefect task decorator
    """A task whose result persists under the flow-computed `key` (resume after a crash)."""
    return task(name=name, cache_key_fn=by_key, persist_result=True)


def _stage(result: StageResult, stage: str, work: str, key: str) -> StageOutput:
    return save_stage(result, stage, Path(work) / key)


@cached("ingest-file")
def ingest_file(key: str, path: str, root: str, work: str, cfg: PipelineConfig) -> StageOutput:
    read = read_workorder_file(Path(path), Path(root), cfg.ingest)
    out = _stage(read.result, "ingest", work, key)
    info = pl.DataFrame(
        [
            {
                "path": read.path,
                "source_kind": "workorder",
                "bytes": read.bytes,
                "sha256": read.sha256,
                "encoding": read.encoding,
                "rows": read.rows,
            }
        ],
        schema=LEDGER_SCHEMA,
    )
    info.write_parquet(Path(work) / key / "ledger.parquet")
    return out


@cached("normalize-file")
def normalize_file(key: str, ingested: StageOutput, work: str, cfg: PipelineConfig) -> StageOutput:
    return _stage(normalize(load_kept([ingested]), cfg.normalize), "normalize", work, key)


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
    rendered = count_tokens(render_messages(tiered.kept, cfg.messages), cfg.tokens, "messages")
    return _stage(
        StageResult(kept=rendered, rejected=tiered.rejected, counters=tiered.counters),
        "tiers",
        work,
        key,
    )


@task(name="publish")
def publish_task(
    out: str,
    work: str,
    keys: dict[str, list[str]],
    refresh: RefreshSummary,
    stage_outputs: list[StageOutput],
    cfg: PipelineConfig,
) -> tuple[str, Counts]:
    """Carry unchanged files over from the previous snapshot, add this run's, publish."""
    previous, prev_state = latest_snapshot(Path(out)), latest_state(Path(out))
    plan_unchanged = refresh.carried

    def carried(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(pl.col("source_file").is_in(plan_unchanged))

    def previous_table(name: str, empty: pl.DataFrame) -> pl.DataFrame:
        files = list((previous / name).rglob("*.parquet")) if previous else []
        return carried(pl.read_parquet(files, hive_partitioning=False)) if files else empty

    def previous_state(name: str, schema: dict) -> pl.DataFrame:
        path = prev_state / f"{name}.parquet" if prev_state else None
        if path is None or not path.exists():
            return pl.DataFrame(schema=schema)
        frame = pl.read_parquet(path)
        column = "path" if name == "ledger" else "source_file"
        return frame.filter(pl.col(column).is_in(plan_unchanged))

    tiered = [s for s in stage_outputs if s.stage == "tiers"]
    sft = (
        pl.concat(
            [previous_table("sft", _empty_sft()), *map(pl.read_parquet, (t.kept for t in tiered))],
            how="diagonal_relaxed",
        )
        .pipe(_as_sft_rows)
        .sort("source_file", "source_row")
    )
    rejects = pl.concat(
        [previous_table("rejects", load_rejects([])), load_rejects(stage_outputs)],
        how="vertical_relaxed",
    ).sort("source_file", "source_row", "stage", "record_id")
    counts_long = pl.concat(
        [previous_state("counts", COUNTS_SCHEMA)]
        + [
            file_counts(s.stage, pl.read_parquet(s.kept), pl.read_parquet(s.rejected))
            for s in stage_outputs
        ]
    ).sort("source_file", "stage", "outcome")
    ledger = pl.concat(
        [previous_state("ledger", LEDGER_SCHEMA)]
        + [pl.read_parquet(Path(work) / k / "ledger.parquet") for k in keys["ingest"]]
    ).sort("path")
    index_parts = [pl.read_parquet(Path(work) / k / "dedup_index.parquet") for k in keys["dedup"]]
    if prev_state and (prev_state / "dedup_index.parquet").exists():
        index_parts.insert(0, previous_state("dedup_index", {}))

    stages = funnel(counts_long, STAGES)
    total = stage_result(sft, rejects, read=stages["ingest"].read)
    counts = Counts(**StageCounts.from_counters(total.counters).model_dump(), stages=stages)
    inputs = [InputFile(**row) for row in ledger.iter_rows(named=True)]
    with SnapshotWriter(Path(out), cfg.publish, new_snapshot_id()) as writer:
        writer.write_table("sft", sft, arrow.SFT, partition_by="tier")
        writer.write_table("rejects", rejects, arrow.REJECTS)
        writer.write_json("plan.json", training_plan(sft, None, cfg).model_dump(mode="json"))
        writer.write_state("ledger", ledger)
        writer.write_state("counts", counts_long)
        if index_parts:
            writer.write_state("dedup_index", pl.concat(index_parts).sort("record_id"))
        manifest = Manifest(
            snapshot_id=writer.snapshot_id,
            created_at=writer.snapshot_id,
            flow=FLOW_NAME,
            code_version=code_version(),
            config_hash=cfg.config_hash(),
            inputs=inputs,
            counts=counts,
            refresh=refresh,
            outputs=writer.outputs,
        )
        path = writer.commit(manifest)
    return str(path), counts


def training_plan(sft: pl.DataFrame, pretrain: pl.DataFrame | None, cfg: PipelineConfig) -> Plan:
    """Per-stage sequence budgets and GPU fit from the token counts of what is published."""
    lengths = {
        f"tier_{tier}": sft.filter(pl.col("tier") == tier)["n_tokens"] for tier in ("A", "B", "C")
    }
    lengths["pretrain"] = (
        pretrain["n_tokens"] if pretrain is not None else pl.Series("n_tokens", [], pl.Int32)
    )
    return plan_stages(lengths, cfg.plan)


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


@flow(name=FLOW_NAME, log_prints=True)
def clean_workorders(
    input: str = "sample_data/workorders", out: str = "out/corpus", config: str | None = None
) -> str:
    """Clean the work-order exports under `input`; publish a snapshot under `out`."""
    logger = get_run_logger()
    cfg = load_config(config)
    root = Path(input)
    files = discover_files(root, cfg.ingest)
    if not files:
        raise FileNotFoundError(f"{root}: no input files match {cfg.ingest.include}")
    with corpus_lock(Path(out), cfg.publish.lock_wait_s):
        rel = {(p.name if root.is_file() else p.relative_to(root).as_posix()): p for p in files}
        current = pl.DataFrame({"path": list(rel), "sha256": [_sha256(p) for p in rel.values()]})
        state = latest_state(Path(out))
        ledger_path = state / "ledger.parquet" if state else None
        ledger = pl.read_parquet(ledger_path) if ledger_path and ledger_path.exists() else None
        todo = plan_refresh(current, ledger)
        logger.info(
            "%d input files: %d new, %d changed, %d unchanged, %d removed",
            len(files),
            len(todo.new),
            len(todo.changed),
            len(todo.unchanged),
            len(todo.removed),
        )

        work_root = Path(out) / "state" / "work"
        work = str(work_root)
        base = (cfg.config_hash(), code_fingerprint())
        shas = dict(zip(current["path"], current["sha256"], strict=True))
        keys: dict[str, list[str]] = {"ingest": [], "dedup": []}
        cached_run = {"result_storage": Path(out).resolve() / "state" / "task-results"}
        filtered: list[StageOutput] = []
        stage_outputs: list[StageOutput] = []
        for path in todo.to_process:
            k_ingest = task_key("ingest", path, shas[path], *base)
            k_norm, k_filter = task_key("normalize", k_ingest), task_key("filter", k_ingest)
            ingested = ingest_file.with_options(**cached_run)(
                k_ingest, str(rel[path]), str(root), work, cfg
            )
            normalized = normalize_file.with_options(**cached_run)(k_norm, ingested, work, cfg)
            kept = filter_file.with_options(**cached_run)(k_filter, normalized, work, cfg)
            keys["ingest"].append(k_ingest)
            filtered.append(kept)
            stage_outputs += [ingested, normalized, kept]

        if filtered:
            index_path = state / "dedup_index.parquet" if state else None
            index_arg = (
                str(_carried_index(index_path, todo.unchanged, Path(work)))
                if index_path and index_path.exists()
                else None
            )
            previous_id = state.name if state else "none"
            k_dedup = task_key("dedup", *keys["ingest"], *todo.unchanged, previous_id, *base)
            deduped = dedup_task.with_options(**cached_run)(k_dedup, filtered, index_arg, work, cfg)
            structured = structure_task.with_options(**cached_run)(
                task_key("structure", k_dedup), deduped, work, cfg
            )
            tiered = tiers_task.with_options(**cached_run)(
                task_key("tiers", k_dedup), structured, work, cfg
            )
            keys["dedup"].append(k_dedup)
            stage_outputs += [deduped, structured, tiered]

        refresh = RefreshSummary(
            previous_snapshot=state.name if state else None,
            processed=todo.to_process,
            carried=todo.unchanged,
            removed=todo.removed,
        )
        snapshot, counts = publish_task(out, work, keys, refresh, stage_outputs, cfg)
        shutil.rmtree(work_root, ignore_errors=True)
        shutil.rmtree(Path(out) / "state" / "task-results", ignore_errors=True)

    tiers = pl.read_parquet(Path(snapshot) / "sft").group_by("tier").len().sort("tier")
    report = funnel_markdown(
        counts,
        {
            "Refresh": {
                "new files": len(todo.new),
                "changed files": len(todo.changed),
                "unchanged files": len(todo.unchanged),
                "removed files": len(todo.removed),
            },
            "Samples per tier": dict(zip(tiers["tier"], tiers["len"], strict=True)),
        },
    )
    create_markdown_artifact(
        key="clean-workorders-funnel",
        markdown=report,
        description=f"Funnel of snapshot {Path(snapshot).name}",
    )
    plan = Plan.model_validate_json((Path(snapshot) / "plan.json").read_text(encoding="utf-8"))
    create_table_artifact(
        key="clean-workorders-plan",
        table=plan_table_rows(plan),
        description="Sequence budget and GPU fit per training stage",
    )
    print(report)
    print(f"snapshot published: {snapshot}")
    return snapshot


def _carried_index(index_path: Path, unchanged: list[str], work: Path) -> Path:
    """The published index restricted to records of unchanged files (a changed file's old
    records no longer exist), written where the dedup task can read it."""
    work.mkdir(parents=True, exist_ok=True)
    target = work / "carried_dedup_index.parquet"
    pl.read_parquet(index_path).filter(pl.col("source_file").is_in(unchanged)).write_parquet(target)
    return target
