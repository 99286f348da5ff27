"""Alarm histories and manuals as Prefect tasks, feeding one corpus refresh (flows/corpus.py).

Manuals give the pretraining chunks and, with the configured vendor tables, the fault-code
knowledge base. Alarm histories give events -> incidents (bursts merged) -> four-part samples
(incidents joined with the knowledge base) -> cross-source dedup (an incident a work order
already describes is that work order's sample) -> tiers, messages and tokens.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from prefect import task
from prefect.cache_policies import NO_CACHE

from flows.corpus import WorkorderRun, carried_workorders, ledger_row, render
from flows.stage_files import save_stage
from pipeline.fault_codes import extract_alarm_tables, merge_knowledge_base, read_vendor_tables
from pipeline.incident_samples import incident_samples
from pipeline.incidents import drop_described_incidents, incident_funnel
from pipeline.ingest.alarm_logs import alarm_log_files, read_alarm_log
from pipeline.ingest.encoding import detect_encoding
from pipeline.ingest.files import relative_path
from pipeline.ingest.manuals import chunk_sections, manual_files, read_manual
from pipeline.ledger import file_counts
from pipeline.stage import StageResult, empty_rejects, make_rejects, stage_result
from pipeline.tiers import assign_tiers
from pipeline.tokens import count_tokens
from schemas.config import PipelineConfig
from schemas.manifest import SideOutputs


def _concat(frames: list[pl.DataFrame], empty: pl.DataFrame) -> pl.DataFrame:
    return pl.concat([empty.clear(), *frames], how="vertical_relaxed") if frames else empty.clear()


@dataclass
class Parsed:
    """Rows parsed from the files of one source kind, new files parsed, unchanged ones reused."""

    kept: pl.DataFrame
    rejected: pl.DataFrame
    ledger: pl.DataFrame
    processed: list[str]
    carried: list[str]


def parse_incrementally(
    files: list[tuple[Path, Any]],
    root: Path,
    kind: str,
    state: str | None,
    tables: tuple[str, str],
    parse: Callable[[Path, Any, Path], StageResult],
) -> Parsed:
    """Parse new or changed files; take unchanged files' rows from the last state's `tables`
    (kept rows, rejects), as the ledger (path, sha256) says."""
    previous = Path(state) if state else None

    def table(name: str) -> pl.DataFrame | None:
        path = previous / f"{name}.parquet" if previous else None
        return pl.read_parquet(path) if path and path.exists() else None

    old_ledger, old_kept, old_rejected = table("ledger"), table(tables[0]), table(tables[1])
    reusable = old_kept is not None and old_rejected is not None and old_ledger is not None
    kept, rejected, ledger, processed, carried = [], [], [], [], []
    for path, source in files:
        rel, data = relative_path(path, root), path.read_bytes()
        sha256 = hashlib.sha256(data).hexdigest()
        old = (
            old_ledger.filter((pl.col("path") == rel) & (pl.col("sha256") == sha256))
            if reusable
            else None
        )
        if old is not None and old.height == 1:
            kept.append(old_kept.filter(pl.col("source_file") == rel))
            rejected.append(old_rejected.filter(pl.col("source_file") == rel))
            ledger.append(old)
            carried.append(rel)
            continue
        result = parse(path, source, root)
        kept.append(result.kept)
        rejected.append(result.rejected)
        encoding = "binary" if path.suffix.lower() == ".pdf" else detect_encoding(data, path)
        ledger.append(
            ledger_row(
                rel,
                kind,
                len(data),
                sha256,
                encoding,
                rows=result.counters["read"],
                skipped=result.counters.get("skipped_non_alarm", 0),
                lines=result.counters["lines_total"],
            )
        )
        processed.append(rel)
    return Parsed(
        kept=pl.concat(kept, how="vertical_relaxed") if kept else pl.DataFrame(),
        rejected=_concat(rejected, empty_rejects()),
        ledger=pl.concat(ledger) if ledger else pl.DataFrame(),
        processed=processed,
        carried=carried,
    )


@task(name="manuals", cache_policy=NO_CACHE)
def manuals_task(
    root: str, folder: str, work: str, cfg: PipelineConfig, state: str | None
) -> SideOutputs:
    """Manuals -> sections -> pretraining chunks; alarm tables + vendor tables -> fault codes."""
    root_path, target = Path(root), Path(work) / "manuals"
    target.mkdir(parents=True, exist_ok=True)
    parsed = parse_incrementally(
        manual_files(folder, cfg.manuals),
        root_path,
        "manual",
        state,
        ("manual_sections", "manual_section_rejects"),
        read_manual,
    )
    side = SideOutputs()
    if not parsed.processed and not parsed.carried:
        return side
    sections, section_rejects = parsed.kept, parsed.rejected
    chunks = chunk_sections(sections, cfg.manuals.chunks)
    pretrain = count_tokens(chunks.kept, cfg.tokens, column="text")
    tables = extract_alarm_tables(sections)
    vendor = read_vendor_tables(root_path, cfg.manuals)
    kb = merge_knowledge_base(tables.kept, vendor.kept)
    pretrain.write_parquet(target / "pretrain.parquet")
    kb.kept.write_parquet(target / "fault_codes.parquet")
    rejects = pl.concat(
        [section_rejects, tables.rejected, vendor.rejected, kb.rejected], how="vertical_relaxed"
    )
    rejects.write_parquet(target / "rejects.parquet")
    parsed.ledger.write_parquet(target / "ledger.parquet")
    sections.write_parquet(target / "manual_sections.parquet")
    section_rejects.write_parquet(target / "manual_section_rejects.parquet")
    side.state = {
        "manual_sections": str(target / "manual_sections.parquet"),
        "manual_section_rejects": str(target / "manual_section_rejects.parquet"),
    }
    side.processed, side.carried = parsed.processed, parsed.carried
    side.pretrain = str(target / "pretrain.parquet")
    side.fault_codes = str(target / "fault_codes.parquet")
    side.side_rejects = [str(target / "rejects.parquet")]
    side.ledger = [str(target / "ledger.parquet")]
    side.sources = {
        "manual": {
            "files": parsed.ledger.height,
            "lines": int(parsed.ledger["lines"].sum()),
            "sections": sections.height,
            "rejected_pages": section_rejects.height,
            "chunks": pretrain.height,
        },
        "fault_table": {
            "read": tables.counters["read"] + vendor.counters["read"],
            "kept": kb.kept.height,
            "rejected": tables.rejected.height + vendor.rejected.height + kb.rejected.height,
        },
    }
    return side


def run_manuals(
    root: Path, folder: Path, work: Path, cfg: PipelineConfig, state: Path | None
) -> SideOutputs:
    return manuals_task(str(root), str(folder), str(work), cfg, str(state) if state else None)


@task(name="alarm-logs", cache_policy=NO_CACHE)
def alarm_logs_task(
    root: str,
    folder: str,
    work: str,
    cfg: PipelineConfig,
    fault_codes: str | None,
    workorder_paths: list[str],
    carried_path: str,
    state: str | None,
) -> SideOutputs:
    root_path, target = Path(root), Path(work) / "alarm_logs"
    parsed = parse_incrementally(
        alarm_log_files(folder, cfg.alarm_logs),
        root_path,
        "alarm_log",
        state,
        ("alarm_events", "alarm_ingest_rejects"),
        read_alarm_log,
    )
    side = SideOutputs()
    if not parsed.processed and not parsed.carried:
        return side
    events = parsed.kept
    ingest = stage_result(events, parsed.rejected, read=events.height + parsed.rejected.height)
    incidents = incident_funnel(events, cfg.alarm_logs.incidents)
    kb = pl.read_parquet(fault_codes) if fault_codes else None
    samples = (
        incident_samples(incidents.kept, kb)
        if kb is not None
        else stage_result(
            incidents.kept.clear(),
            make_rejects(incidents.kept, "samples", "no_fault_code_entry"),
            read=incidents.kept.height,
        )
    )
    workorders = pl.concat(
        [pl.read_parquet(carried_path), *map(pl.read_parquet, workorder_paths)],
        how="diagonal_relaxed",
    )
    linked = drop_described_incidents(
        samples.kept, incidents.kept, workorders, cfg.alarm_logs.incidents
    )
    tiered = assign_tiers(linked.kept.with_columns(asset=pl.col("machine")), cfg.tiers)
    tiered = StageResult(render(tiered.kept, cfg), tiered.rejected, tiered.counters)
    outputs = {
        "ingest": ingest,
        "incidents": incidents,
        "samples": samples,
        "cross_source": linked,
        "tiers": tiered,
    }
    saved = {name: save_stage(result, name, target) for name, result in outputs.items()}
    counts = pl.concat(
        [file_counts(name, result.kept, result.rejected) for name, result in outputs.items()]
    )
    counts.write_parquet(target / "counts.parquet")
    parsed.ledger.write_parquet(target / "ledger.parquet")
    parsed.rejected.write_parquet(target / "alarm_ingest_rejects.parquet")
    side.state = {
        "alarm_events": saved["ingest"].kept,
        "alarm_ingest_rejects": str(target / "alarm_ingest_rejects.parquet"),
    }
    side.processed, side.carried = parsed.processed, parsed.carried
    side.sft = [saved["tiers"].kept]
    side.rejects = [s.rejected for s in saved.values()]
    side.counts = [str(target / "counts.parquet")]
    side.ledger = [str(target / "ledger.parquet")]
    side.sources = {
        "alarm_log": {
            "files": parsed.ledger.height,
            "lines": int(parsed.ledger["lines"].sum()),
            "skipped_non_alarm_lines": int(parsed.ledger["skipped_lines"].sum()),
            "events": events.height,
            "incidents": incidents.kept.height,
        }
    }
    return side


def run_alarm_logs(
    root: Path,
    folder: Path,
    work: Path,
    cfg: PipelineConfig,
    run: WorkorderRun,
    side: SideOutputs,
    out: Path,
    state: Path | None,
) -> SideOutputs:
    """Alarm histories, joined with this run's fault codes (or the published ones)."""
    carried = work / "carried_workorders.parquet"
    carried.parent.mkdir(parents=True, exist_ok=True)
    carried_workorders(out, run.carried).write_parquet(carried)
    fault_codes = side.fault_codes or _published_fault_codes(out, work)
    alarms = alarm_logs_task(
        str(root),
        str(folder),
        str(work),
        cfg,
        fault_codes,
        [s.kept for s in run.stage_outputs if s.stage == "tiers"],
        str(carried),
        str(state) if state else None,
    )
    return side.model_copy(
        update={
            "sft": side.sft + alarms.sft,
            "rejects": side.rejects + alarms.rejects,
            "counts": side.counts + alarms.counts,
            "ledger": side.ledger + alarms.ledger,
            "sources": side.sources | alarms.sources,
            "state": side.state | alarms.state,
            "processed": side.processed + alarms.processed,
            "carried": side.carried + alarms.carried,
        }
    )


def _published_fault_codes(out: Path, work: Path) -> str | None:
    """The fault-code table of the snapshot LATEST names, when this run reads no manuals."""
    from pipeline.publish import latest_snapshot

    previous = latest_snapshot(out)
    files = list((previous / "fault_codes").glob("*.parquet")) if previous else []
    if not files:
        return None
    target = work / "published_fault_codes.parquet"
    pl.read_parquet(files).write_parquet(target)
    return str(target)
