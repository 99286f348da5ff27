"""Every alarm log under a folder, read at once: the tests' shortcut (the flows read one file
at a time through `pipeline.funnels.alarm_logs`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl

from pipeline.core.stage import StageResult, empty_rejects, stage_result
from pipeline.ingest.alarm_logs.reader import read_alarm_log
from pipeline.ingest.sniff import sniff
from schemas.alarm_logs import ALARM_EVENT_SCHEMA, AlarmLogsConfig, AlarmLogSource
from tests.pipeline.ingest.support import claimed_files


def alarm_log_files(root: str | Path, cfg: AlarmLogsConfig) -> list[tuple[Path, AlarmLogSource]]:
    """Files under `root` that a configured source claims (first match wins), then every other
    file whose content is an alarm log (`sniff`, its encoding detected; format `auto`),
    sorted."""
    claimed = dict(claimed_files(root, cfg.sources)) if "sources" in cfg.model_fields_set else {}
    for path in sorted(Path(root).rglob("*")):
        if path.is_file() and path not in claimed and sniff(path).kind == "alarm_log":
            claimed[path] = AlarmLogSource(pattern=path.name)
    return sorted(claimed.items(), key=lambda item: item[0].as_posix())


def read_alarm_logs(root: str | Path, cfg: AlarmLogsConfig | None = None) -> StageResult:
    """Read every alarm log under `root`; counters add up over files (plus `files`)."""
    cfg = cfg or AlarmLogsConfig()
    results = [read_alarm_log(path, source, root) for path, source in alarm_log_files(root, cfg)]
    keys = ("read", "alarm_lines", "skipped_non_alarm", "lines_total")
    if not results:
        return stage_result(
            pl.DataFrame(schema=ALARM_EVENT_SCHEMA), empty_rejects(), files=0,
            **{k: 0 for k in keys},  # type: ignore[arg-type]
        )  # fmt: skip
    totals: Counter[str] = Counter()
    for result in results:
        totals.update({k: result.counters[k] for k in keys})
    return stage_result(
        pl.concat([r.kept for r in results]),
        pl.concat([r.rejected for r in results]),
        files=len(results),
        **totals,  # type: ignore[arg-type]
    )
