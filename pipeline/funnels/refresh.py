"""A corpus refresh: list every input file, run each source kind's funnel, publish one
snapshot.

`refresh` is what every flow runs. Every file under the input is classified first
(`pipeline.ingest.inventory`: content decides, configured patterns win); skipped files are
listed in the manifest with their reason and a warning line is printed for each. Each
funnel (`pipeline.funnels.workorders`, `manuals`, `alarm_logs`: one declared list of steps
each) runs through the generic driver (`pipeline.funnels.driver.run_funnel`), its steps
through a `Runner`: in this process by default, as cached Prefect tasks from `flows/`.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.core.paths import check_output
from pipeline.execution.keys import code_fingerprint, code_version
from pipeline.execution.runner import in_process
from pipeline.execution.step import Funnel, Runner
from pipeline.funnels import alarm_logs, manuals, workorders
from pipeline.funnels.driver import Context, run_funnel
from pipeline.funnels.quarantine import fail_if_strict, quarantine_rows
from pipeline.ingest.files import relative_path
from pipeline.ingest.inventory import InputEntry, inventory
from pipeline.publish.locking import corpus_lock
from pipeline.publish.snapshot import Published, SourceRun, publish_snapshot
from pipeline.publish.writer import latest_snapshot, latest_state
from schemas.config import PipelineConfig
from schemas.manifest import SkippedFile


@dataclass(frozen=True)
class Sources:
    """What a refresh reads: the input root, and a folder per source kind (None: not read).
    Every file under the root (and under each folder) is listed; a file's content decides its
    kind, and a kind is read from its folder only."""

    root: Path
    workorders: Path | None = None
    alarm_logs: Path | None = None
    manuals: Path | None = None

    @classmethod
    def everything(cls, root: Path) -> Sources:
        """Every kind, from anywhere under `root` (flat or in per-kind sub-folders)."""
        return cls(root, root, root, root)

    def folders(self) -> dict[str, Path | None]:
        return {"workorder": self.workorders, "alarm_log": self.alarm_logs, "manual": self.manuals}

    def funnels(self) -> list[Funnel]:
        """The funnels this refresh runs, in order: work orders and manuals before the alarm
        logs, whose incidents link to work orders and join the manuals' fault codes."""
        chosen = (
            (self.workorders, workorders.FUNNEL),
            (self.manuals, manuals.FUNNEL),
            (self.alarm_logs, alarm_logs.FUNNEL),
        )
        return [funnel for folder, funnel in chosen if folder is not None]


def lineage_root(folder: Path, root: Path) -> Path:
    """Files are named relative to the run's input root; a folder outside it (a manuals
    folder given to clean-fault-logs, say) names them relative to its own parent."""
    return root if folder.resolve().is_relative_to(root.resolve()) else folder.parent


def refresh(
    flow_name: str,
    sources: Sources,
    out: Path,
    cfg: PipelineConfig,
    runner: Callable[[Path, PipelineConfig], Runner] = in_process,
) -> Published:
    """Refresh the corpus under `out` from `sources` and publish one snapshot.

    Input files that cannot be read are quarantined (a reject row and a manifest entry) and
    the run goes on; with `cfg.strict` they fail it before anything is published.
    """
    folders = [f for f in (sources.workorders, sources.alarm_logs, sources.manuals) if f]
    check_output(out, [sources.root, *folders])
    with corpus_lock(out, cfg.publish.lock_wait_s):
        state, work = latest_state(out), out / "state" / "work"
        entries = inventory(sources.root, sources.folders(), cfg)
        ctx = Context(
            out,
            work,
            cfg,
            runner(work, cfg),
            entries,
            state,
            latest_snapshot(out),
            (cfg.config_hash(), code_fingerprint(), state.name if state else "none"),
        )
        runs = _run_funnels(ctx, sources, entries)
        fail_if_strict(cfg.strict, pl.concat([r.quarantined for r in runs]))
        skipped = _skipped(entries, sources.root)
        published = publish_snapshot(
            flow_name, out, cfg, runs, ctx.previous, state, code_version(), skipped
        )
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(out / "state" / "task-results", ignore_errors=True)
    for read in published.manifest.inputs:
        if read.warning:
            sys.stderr.write(f"warning: {read.warning}\n")
    return published


def _run_funnels(ctx: Context, sources: Sources, entries: list[InputEntry]) -> list[SourceRun]:
    """Each chosen funnel over the files of its kind; the broken files it claimed are
    quarantined with its own."""
    folders = sources.folders()
    runs: list[SourceRun] = []
    for funnel in sources.funnels():
        root = lineage_root(folders[funnel.kind], sources.root)  # type: ignore[arg-type]
        mine = [e for e in entries if e.sniffed.kind == funnel.kind]
        source = run_funnel(funnel, ctx, mine, root, runs)
        source.quarantined = pl.concat([source.quarantined, _broken(entries, funnel.kind, root)])
        runs.append(source)
    return runs


def _broken(entries: list[InputEntry], kind: str, root: Path) -> pl.DataFrame:
    """One quarantine row per broken file `kind` claimed (empty, binary, a damaged archive)."""
    files = {}
    for e in entries:
        if e.sniffed.kind == "broken" and e.sniffed.meant == (kind,):
            rel = relative_path(e.path, root)
            files[rel] = ("unreadable_file", f"{rel}: {e.sniffed.reason}")
    return quarantine_rows(kind, files)


def _skipped(entries: list[InputEntry], root: Path) -> list[SkippedFile]:
    """The files no reader reads, each announced on one warning line (written to stderr
    directly: a flow's print capture would turn it into an INFO log line)."""
    skipped = []
    for e in entries:
        if e.sniffed.kind != "skip":
            continue
        rel = relative_path(e.path, root) if e.path.is_relative_to(root) else str(e.path)
        sys.stderr.write(f"warning: {rel}: skipped: {e.sniffed.reason}\n")
        skipped.append(
            SkippedFile(path=rel, bytes=e.path.stat().st_size, reason=e.sniffed.reason or "")
        )
    return skipped
