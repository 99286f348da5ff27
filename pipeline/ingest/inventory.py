"""Every file under a run's input folders, and what becomes of it: read by which reader, or
skipped with a reason.

The content decides (`pipeline.ingest.sniff`); file-name patterns set in the configuration win
over it: vendor fault tables (`manuals.vendor_tables`), `alarm_logs.sources`,
`manuals.sources` and `ingest.sources` when set, in that order; `ingest.exclude` skips. A
file under the per-kind sub-folder `[sources]` names (`alarm_logs/`, ...) is expected to be of
that kind. A file of a kind this run does not read is listed as skipped, not dropped, and so
are files that must never be read: a symlink leaving the input, and anything inside a
published corpus (snapshots and state are never input). A broken file (see
`pipeline.ingest.sniff`) is claimed by the first kind its suffix stands for that this run reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.ingest.files import relative_path
from pipeline.ingest.sniff import Sniffed, sniff
from schemas.alarm_logs import AlarmLogSource
from schemas.config import PipelineConfig
from schemas.manuals import ManualSource

KINDS = ("workorder", "alarm_log", "manual")


@dataclass(frozen=True)
class InputEntry:
    """One input file: what it is, and the configured source that claimed it (if any)."""

    path: Path
    sniffed: Sniffed
    source: AlarmLogSource | ManualSource | None = None


def _globbed(root: Path, patterns: list[str]) -> list[set[Path]]:
    return [{p for p in root.glob(pattern) if p.is_file()} for pattern in patterns]


def _under(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def _corpus_root(folder: Path, top: Path) -> Path | None:
    """The published corpus (a folder with LATEST and snapshots/) holding `folder`, if any."""
    for parent in (folder, *folder.parents):
        if (parent / "LATEST").is_file() and (parent / "snapshots").is_dir():
            return parent
        if parent == top or not parent.is_relative_to(top):
            return None
    return None


def never_read(path: Path, top: Path) -> str | None:
    """Why a file under the scan root `top` must not be read: a link leaving it, or a corpus."""
    resolved, top = path.resolve(), top.resolve()
    if top.is_file():
        top = top.parent
    if not resolved.is_relative_to(top):
        return f"links to {resolved}, outside the input folder; not read"
    corpus = _corpus_root(resolved.parent, top)
    if corpus is not None:
        return f"inside the published corpus {corpus}: snapshots and state are never input"
    return None


def _claim(entry: InputEntry, folders: dict[str, Path | None]) -> InputEntry:
    """A broken file, claimed by the first kind it was meant as whose folder holds it."""
    why, meant = entry.sniffed.reason, entry.sniffed.meant
    for kind in meant:
        folder = folders.get(kind)
        if folder is not None and _under(entry.path, folder):
            return InputEntry(entry.path, Sniffed("broken", reason=why, meant=(kind,)))
    reads = ", ".join(k for k, f in folders.items() if f is not None) or "nothing"
    reason = f"{why} ({'/'.join(meant)} file; this run reads: {reads})"
    return InputEntry(entry.path, Sniffed("skip", reason=reason))


class Classifier:
    """Decides each file of one scan root (configured patterns first, then content)."""

    def __init__(self, root: Path, cfg: PipelineConfig) -> None:
        self.root, self.cfg = root, cfg
        self.vendor = _globbed(root, [s.pattern for s in cfg.manuals.vendor_tables])
        alarm_sources = (
            cfg.alarm_logs.sources if "sources" in cfg.alarm_logs.model_fields_set else []
        )
        manual_sources = cfg.manuals.sources if "sources" in cfg.manuals.model_fields_set else []
        self.alarm = list(
            zip(_globbed(root, [s.pattern for s in alarm_sources]), alarm_sources, strict=True)
        )
        self.manual = list(
            zip(_globbed(root, [s.pattern for s in manual_sources]), manual_sources, strict=True)
        )
        self.workorder = _globbed(root, [s.pattern for s in cfg.ingest.sources])
        self.excluded = set().union(*_globbed(root, cfg.ingest.exclude))
        names = cfg.sources
        self.folders = {
            "workorder": root / names.workorders,
            "alarm_log": root / names.alarm_logs,
            "manual": root / names.manuals,
        }

    def classify(self, path: Path) -> InputEntry:
        if path in self.excluded:
            return InputEntry(path, Sniffed("skip", reason="excluded by ingest.exclude"))
        if any(path in files for files in self.vendor):
            return InputEntry(path, Sniffed("fault_table", "vendor_table"))
        for files, source in self.alarm:
            if path in files:
                layout = source.format
                if layout == "auto":
                    layout = sniff(path, source.encoding, "alarm_log").layout
                if layout is None:
                    return InputEntry(path, sniff(path, source.encoding, "alarm_log"))
                return InputEntry(path, Sniffed("alarm_log", layout), source)
        for files, source in self.manual:
            if path in files:
                return InputEntry(path, Sniffed("manual", source.format), source)
        if any(path in files for files in self.workorder):
            found = sniff(path)
            layout = found.layout if found.kind == "workorder" else None
            return InputEntry(path, Sniffed("workorder", layout or "csv"))
        expect = next((k for k, f in self.folders.items() if _under(path, f)), None)
        return InputEntry(path, sniff(path, "auto", expect))


def inventory(root: Path, folders: dict[str, Path | None], cfg: PipelineConfig) -> list[InputEntry]:
    """Every file under `root` and under the kinds' folders, classified; a file of a kind whose
    folder (in `folders`) does not hold it is skipped with that reason. Sorted by path."""
    scan = [root] + [f for f in folders.values() if f is not None and not _under(f, root)]
    entries = []
    for top in dict.fromkeys(scan):
        classifier = Classifier(top, cfg)
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in files:
            rel = relative_path(path, top)
            if any(part.startswith(".") for part in Path(rel).parts):
                entries.append(InputEntry(path, Sniffed("skip", reason="hidden file")))
                continue
            why = never_read(path, top)
            if why is not None:
                entries.append(InputEntry(path, Sniffed("skip", reason=why)))
                continue
            entry = classifier.classify(path)
            if entry.sniffed.kind == "broken":
                entries.append(_claim(entry, folders))
                continue
            kind = "manual" if entry.sniffed.kind == "fault_table" else entry.sniffed.kind
            folder = folders.get(kind)
            if kind in KINDS and (folder is None or not _under(path, folder)):
                reads = ", ".join(k for k, f in folders.items() if f is not None) or "nothing"
                reason = f"{entry.sniffed.reader} file; this run reads: {reads}"
                entry = InputEntry(path, Sniffed("skip", reason=reason))
            entries.append(entry)
    return sorted(entries, key=lambda e: e.path.as_posix())
