"""Alarm histories and manuals as Prefect tasks, feeding one corpus refresh (flows/corpus.py).

Manuals give the pretraining chunks and, with the configured vendor tables, the fault-code
knowledge base. Alarm histories give events -> incidents (bursts merged) -> four-part samples
(incidents joined with the knowledge base) -> cross-source dedup (an incident a work order
already describes is that work order's sample) -> tiers, messages and tokens.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from prefect import task
from prefect.cache_policies import NO_CACHE

from flows.corpus import WorkorderRun, carried_workorders, ledger_row, render
from flows.stage_files import save_stage
from pipeline.fault_codes import extract_alarm_tables, merge_knowledge_base, read_vendor_tables
from pipeline.incident_samples import incident_samples
from pipeline.incidents import build_incidents, link_workorders
from pipeline.ingest.alarm_logs import alarm_log_files, read_alarm_log
from pipeline.ingest.encoding import detect_encoding
from pipeline.ingest.manuals import chunk_sections, manual_files, read_manual
from pipeline.ledger import file_counts
from pipeline.stage import StageResult, empty_rejects, make_rejects, stage_result
from pipeline.tiers import assign_tiers
from pipeline.tokens import count_tokens
from schemas.config import PipelineConfig
from schemas.manifest import SideOutputs


def _rel(path: Path, root: Path) -> str:
    return path.name if root.is_file() else path.relative_to(root).as_posix()


def _encoding(path: Path) -> str:
    return "binary" if path.suffix.lower() == ".pdf" else detect_encoding(path.read_bytes(), path)


def _concat(frames: list[pl.DataFrame], empty: pl.DataFrame) -> pl.DataFrame:
    return pl.concat([empty.clear(), *frames], how="vertical_relaxed") if frames else empty.clear()


@task(name="manuals", cache_policy=NO_CACHE)
def manuals_task(root: str, folder: str, work: str, cfg: PipelineConfig) -> SideOutputs:
    """Manuals -> sections -> pretraining chunks; alarm tables + vendor tables -> fault codes."""
    root_path, target = Path(root), Path(work) / "manuals"
    target.mkdir(parents=True, exist_ok=True)
    reads, ledger = [], []
    for path, source in manual_files(folder, cfg.manuals):
        result = read_manual(path, source, root_path)
        reads.append(result)
        ledger.append(
            ledger_row(
                _rel(path, root_path), "manual", path, _encoding(path), rows=result.counters["read"]
            )
        )
    sections = pl.concat([r.kept for r in reads]) if reads else None
    section_rejects = _concat([r.rejected for r in reads], empty_rejects())
    side = SideOutputs()
    if sections is None:
        return side
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
    pl.concat(ledger).write_parquet(target / "ledger.parquet")
    side.pretrain = str(target / "pretrain.parquet")
    side.fault_codes = str(target / "fault_codes.parquet")
    side.side_rejects = [str(target / "rejects.parquet")]
    side.ledger = [str(target / "ledger.parquet")]
    side.sources = {
        "manual": {
            "files": len(reads),
            "lines": sum(r.counters["lines_total"] for r in reads),
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


def run_manuals(root: Path, folder: Path, work: Path, cfg: PipelineConfig) -> SideOutputs:
    return manuals_task(str(root), str(folder), str(work), cfg)


def incidents_stage(events: pl.DataFrame, cfg: PipelineConfig) -> StageResult:
    """Events -> incidents. Each incident keeps its first raise's place in the funnel; later
    raises are rejected as `merged_into_incident` (pointing at the incident) and clears and
    acknowledgements, folded into the incident's times, as `state_change`."""
    incidents = build_incidents(events, cfg.alarm_logs.incidents).kept
    members = (
        incidents.select(
            pl.col("record_id").alias("incident_id"), pl.col("event_ids").alias("record_id")
        )
        .explode("record_id")
        .with_columns(first=pl.int_range(pl.len()).over("incident_id") == 0)
    )
    tagged = events.join(members, on="record_id", how="left")
    merged = tagged.filter(pl.col("incident_id").is_not_null() & ~pl.col("first"))
    state_changes = tagged.filter(pl.col("incident_id").is_null())
    rejected = pl.concat(
        [
            make_rejects(
                merged.drop("first"),
                "incidents",
                "merged_into_incident",
                duplicate_of=pl.col("incident_id"),
            ),
            make_rejects(
                state_changes.drop("first", "incident_id"),
                "incidents",
                "state_change",
                detail=pl.col("event"),
            ),
        ]
    )
    return stage_result(incidents, rejected, read=events.height)


def cross_source_stage(
    samples: pl.DataFrame, incidents: pl.DataFrame, workorders: pl.DataFrame, cfg: PipelineConfig
) -> StageResult:
    """An incident that a published work order already describes (same machine, a shared code,
    close in time) is that work order's sample: reject it as `same_incident`."""
    _, links = link_workorders(incidents, workorders, cfg.alarm_logs.incidents)
    first_link = links.group_by("incident_id").agg(pl.col("workorder_id").sort().first())
    tagged = samples.join(first_link, left_on="record_id", right_on="incident_id", how="left")
    duplicate = pl.col("workorder_id").is_not_null()
    rejected = make_rejects(
        tagged.filter(duplicate),
        "cross_source",
        "same_incident",
        duplicate_of=pl.col("workorder_id"),
    )
    return stage_result(
        tagged.filter(~duplicate).drop("workorder_id"), rejected, read=samples.height
    )


@task(name="alarm-logs", cache_policy=NO_CACHE)
def alarm_logs_task(
    root: str,
    folder: str,
    work: str,
    cfg: PipelineConfig,
    fault_codes: str | None,
    workorder_paths: list[str],
    carried_path: str,
) -> SideOutputs:
    root_path, target = Path(root), Path(work) / "alarm_logs"
    reads, ledger = [], []
    for path, source in alarm_log_files(folder, cfg.alarm_logs):
        result = read_alarm_log(path, source, root_path)
        reads.append(result)
        ledger.append(
            ledger_row(
                _rel(path, root_path),
                "alarm_log",
                path,
                _encoding(path),
                rows=result.counters["read"],
                skipped=result.counters["skipped_non_alarm"],
            )
        )
    side = SideOutputs()
    if not reads:
        return side
    events = pl.concat([r.kept for r in reads])
    ingest = stage_result(
        events,
        _concat([r.rejected for r in reads], empty_rejects()),
        read=sum(r.counters["read"] for r in reads),
    )
    incidents = incidents_stage(events, cfg)
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
    linked = cross_source_stage(samples.kept, incidents.kept, workorders, cfg)
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
    pl.concat(ledger).write_parquet(target / "ledger.parquet")
    side.sft = [saved["tiers"].kept]
    side.rejects = [s.rejected for s in saved.values()]
    side.counts = [str(target / "counts.parquet")]
    side.ledger = [str(target / "ledger.parquet")]
    side.sources = {
        "alarm_log": {
            "files": len(reads),
            "lines": sum(r.counters["lines_total"] for r in reads),
            "skipped_non_alarm_lines": sum(r.counters["skipped_non_alarm"] for r in reads),
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
) -> SideOutputs:
    """Alarm histories, joined with this run's fault codes (or the published ones)."""
    carried = work / "carried_workorders.parquet"
    carried.parent.mkdir(parents=True, exist_ok=True)
    carried_workorders(out, run.refresh).write_parquet(carried)
    fault_codes = side.fault_codes or _published_fault_codes(out, work)
    alarms = alarm_logs_task(
        str(root),
        str(folder),
        str(work),
        cfg,
        fault_codes,
        [s.kept for s in run.stage_outputs if s.stage == "tiers"],
        str(carried),
    )
    return side.model_copy(
        update={
            "sft": side.sft + alarms.sft,
            "rejects": side.rejects + alarms.rejects,
            "counts": side.counts + alarms.counts,
            "ledger": side.ledger + alarms.ledger,
            "sources": side.sources | alarms.sources,
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
