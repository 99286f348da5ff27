"""Read alarm-history files: each file's layout (configured, else by content, see `layouts`),
its events with lineage, the machine it belongs to, and its line-level rejects.

Every physical line of a file is accounted for:

    lines_total = alarm_lines + skipped_non_alarm        read = kept + rejected

`alarm_lines` are the lines that hold an alarm event or look like one; `read` counts the events
they give (a came/went/acknowledged row gives up to three) plus the lines that do not parse.
`skipped_non_alarm`: blank lines, report titles and header blocks above the first entry
(`layouts.parse_lines`), column headers and rulers, the code line of a two-line FANUC entry,
MTConnect samples, `Unavailable` conditions and the `Normal` ones that clear nothing. Rejects
carry file and line: `malformed_line` (looks like an alarm line but does not parse) and
`bad_timestamp` (the date does not exist).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.core.errors import InputFileError
from pipeline.core.stage import StageResult, make_rejects, stage_result
from pipeline.ingest.alarm_logs import mtconnect
from pipeline.ingest.alarm_logs.fields import lines_frame
from pipeline.ingest.alarm_logs.layouts import LAYOUTS, detect_layout, header_end, parse_lines
from pipeline.ingest.encoding import read_text
from pipeline.ingest.files import relative_path
from pipeline.ingest.lineage import record_ids
from pipeline.text.alarm_codes import canonical_code
from schemas.alarm_logs import ALARM_EVENT_SCHEMA, AlarmLogSource

STAGE = "ingest_alarm_logs"
SOURCE_KIND = "alarm_log"
_LINEAGE = ("record_id", "source_kind", "source_file", "source_row")
# Alarm years outside this range are a controller whose clock was never set (1900, 2099).
PLAUSIBLE_YEARS = (1990, 2050)


class AlarmLogError(InputFileError, ValueError):
    """An alarm-log file that cannot be read at all; the message names the file."""


# --- the machine a file belongs to --------------------------------------------------------------
_MACHINE_LABEL = re.compile(
    r"(?i)(?:机床编号|机床号|设备编号|设备号|机台号|机床名称|设备名称|machine\s*(?:no\.?|id|name)?|"
    r"maschine(?:nnummer)?|anlage|device(?:\s*name)?|equipment(?:\s*(?:no\.?|id))?|asset)"
    r"\s*[:：=]\s*([A-Za-z0-9][\w\-./]*)|robot\s+name\s*[:：=]?\s*([A-Za-z0-9][\w\-./]*)"
)
# Names a controller gives itself until someone sets one: not a machine.
_DEFAULT_NAMES = re.compile(r"(?i)^(?:robot|controller|cnc)$")
_GENERIC_NAME_PARTS = re.compile(
    r"(?i)^(?:alarms?|history|hist|log|logs|alarmlog|alarmhistory|export|exports|data|agent|"
    r"shdr|mtconnect|fanuc|sinumerik|siemens|mitsubishi|meldas|haas|heidenhain|okuma|mazak|"
    r"protocol|protokoll|alarmprotokoll|alarmlist|list|report|cnc|nc|controller|control|robot|"
    r"err(?:all|act|hist|curr|mot|sys|app|comm|ext|pwd)|logbook|"
    r"\d{1,2}i(?:-?[a-z]{1,3})?(?:plus)?|8[0-4]\dd(?:sl)?|m[678]\d{1,2}[a-z]?|ngc|i?tnc\d*|"
    r"报警|报警履历|报警记录|报警历史|履历|日志|记录|导出|\d+)$"
)


def machine_from_name(name: str) -> str | None:
    """The first part of a file name that names a machine: parts split at `_` and spaces,
    trailing `-yyyymmdd` dates cut, words like 'alarm', controllers and numbers dropped."""
    stem = Path(name).stem
    for part in re.split(r"[_\s]+", stem):
        part = re.sub(r"(?:-\d{6,8})+$", "", part)
        if part and not _GENERIC_NAME_PARTS.match(part):
            return part
    return None


def _machine(
    path: Path, source: AlarmLogSource, header: list[str], devices: pl.Series
) -> str | None:
    """Configured machine, else one named in the file's header (its report header block, at
    least its first 15 lines: `Machine: VMC-03`, `机床编号: VMC-11`, a robot's `Robot Name`),
    else the MTConnect device, else the file name (the configured `machine_pattern`, or its
    first machine-like part)."""
    if source.machine:
        return source.machine
    if source.machine_pattern:
        found = re.search(source.machine_pattern, path.name)
        if not found or not found.group("machine"):
            raise AlarmLogError(
                f"{path}: file name does not match machine_pattern {source.machine_pattern!r}; "
                "set `machine` or `machine_pattern` for this source"
            )
        return found.group("machine")
    for line in header:
        label = _MACHINE_LABEL.search(line)
        named = label and (label.group(1) or label.group(2))
        if named and not _DEFAULT_NAMES.match(named):
            return named
    named = devices.drop_nulls()
    if named.len():
        return named.mode().sort()[0]
    return machine_from_name(path.name)


@dataclass(frozen=True)
class AlarmLogRead:
    """One file read: events and rejects, and what the manifest says about the file."""

    result: StageResult
    layout: str
    machine: str | None
    encoding: str
    warning: str | None


def _split_lines(text: str) -> list[str]:
    """Physical lines; CR LF, LF and a lone CR (old controllers) all end one."""
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_alarm_log_file(
    path: str | Path,
    source: AlarmLogSource | None = None,
    root: str | Path | None = None,
    controllers: dict[str, str] | None = None,
) -> AlarmLogRead:
    """Read one alarm-log file into events (ALARM_EVENT_SCHEMA) and line-level rejects;
    `controllers` (machine glob -> controller) names an MTConnect device's family."""
    path = Path(path)
    source = source or AlarmLogSource(pattern="*")
    rel = relative_path(path, root)
    text, encoding = read_text(path, source.encoding)
    lines = _split_lines(text)
    layout = _layout_of(path, source, lines)
    frame = lines_frame(lines)
    parsed = parse_lines(layout, frame)
    header = lines[: max(header_end(parsed), 15)]
    machine = _machine(path, source, header, parsed["device"])
    family, family_warning = _family(source, layout, machine, parsed, header, controllers)
    lines_kind = parsed.group_by("source_row").agg(pl.col("kind").first())
    alarm_lines = lines_kind.filter(pl.col("kind") != "skip").height
    parsed = _with_lineage(parsed.filter(pl.col("kind") != "skip"), rel, layout, machine, family)
    rejected = _rejects(parsed, rel)
    kept = parsed.filter(
        (pl.col("kind") == "alarm") & ~_BAD_TIME & ~_IMPLAUSIBLE & ~_UNDECODABLE
    ).select([pl.col(c).cast(t) for c, t in ALARM_EVENT_SCHEMA.items()])
    result = stage_result(
        kept,
        rejected,
        read=parsed.height,
        alarm_lines=alarm_lines,
        skipped_non_alarm=frame.height - alarm_lines,
        lines_total=frame.height,
    )
    warnings = [_warning(rel, layout, kept, rejected)]
    if family_warning and (kept["event"] == "raised").any():
        warnings.append(f"{rel}: {family_warning}")
    warning = "; ".join(w for w in warnings if w) or None
    return AlarmLogRead(result, layout, machine, encoding, warning)


def _family(
    source: AlarmLogSource,
    layout: str,
    machine: str | None,
    parsed: pl.DataFrame,
    header: list[str],
    controllers: dict[str, str] | None,
) -> tuple[str, str | None]:
    """The code family (configured, else the layout's; an MTConnect log's from its device,
    `mtconnect.device_family`) and a warning when an MTConnect device names no controller."""
    if layout != "mtconnect" or source.family:
        return source.code_family(layout), None
    devices = parsed["device"].drop_nulls().unique().sort().to_list()
    titles = [line for line in header if not re.match(mtconnect.SHDR_TIME, line)]
    return mtconnect.device_family(machine, devices, titles, controllers or {})


def _layout_of(path: Path, source: AlarmLogSource, lines: list[str]) -> str:
    """The configured layout, else the one detected from the file's first 400 lines."""
    layout = source.format
    if layout == "auto":
        layout = detect_layout(lines[:400], path.name) or ""
        if not layout:
            raise AlarmLogError(f"{path}: no known alarm-log layout ({', '.join(LAYOUTS)})")
    return layout


def _with_lineage(
    parsed: pl.DataFrame, rel: str, layout: str, machine: str | None, family: str
) -> pl.DataFrame:
    """Record ids (from the line, and for SINUMERIK its event: a table row gives up to three),
    source, machine, code family and the canonical alarm code (a condition's item when an
    MTConnect raise has no native code)."""
    raw = parsed["raw"]
    if layout == "sinumerik":
        raw = parsed.select(
            pl.concat_str("raw", pl.lit("\x1f"), pl.col("event").fill_null(""))
        ).to_series()
    parsed = parsed.with_columns(
        record_ids(SOURCE_KIND, rel, parsed["source_row"], raw),
        source_kind=pl.lit(SOURCE_KIND),
        source_file=pl.lit(rel),
        machine=pl.lit(machine, dtype=pl.String),
        family=pl.lit(family),
    )
    code = pl.coalesce(
        pl.col("native_code"), pl.when(pl.col("event") == "raised").then(pl.col("channel"))
    )
    return parsed.with_columns(
        alarm_code=pl.when(code.is_not_null()).then(canonical_code(pl.col("family"), code))
    )


# What keeps a parsed alarm line out of the events.
_BAD_TIME = (pl.col("kind") == "alarm") & pl.col("occurred_at").is_null()
_IMPLAUSIBLE = (
    (pl.col("kind") == "alarm")
    & ~_BAD_TIME
    & ~pl.col("occurred_at").dt.year().is_between(*PLAUSIBLE_YEARS)
)
_UNDECODABLE = pl.col("raw").str.contains("\ufffd", literal=True)


def _rejects(parsed: pl.DataFrame, rel: str) -> pl.DataFrame:
    """The lines that do not parse, and the alarm lines whose time is missing or implausible
    or whose bytes did not decode, each with its file and line; in line order."""
    where = pl.concat_str(pl.lit(f"{rel}:"), pl.col("source_row").cast(pl.String))
    malformed = parsed.filter(pl.col("kind") == "malformed")
    rows = (*_LINEAGE, "machine", "raw")
    return pl.concat(
        [
            make_rejects(
                malformed.select(*rows, "_layout"),
                STAGE,
                "malformed_line",
                pl.concat_str(where, pl.lit(": not in the layout "), pl.col("_layout")),
            ),
            make_rejects(
                parsed.filter(_BAD_TIME & ~_UNDECODABLE).select(*rows),
                STAGE,
                "bad_timestamp",
                pl.concat_str(where, pl.lit(": no such date or time")),
            ),
            make_rejects(
                parsed.filter(_IMPLAUSIBLE & ~_UNDECODABLE).select(*rows),
                STAGE,
                "implausible_timestamp",
                pl.concat_str(
                    where,
                    pl.lit(f": year outside {PLAUSIBLE_YEARS[0]}-{PLAUSIBLE_YEARS[1]} "),
                    pl.lit("(controller clock not set?)"),
                ),
            ),
            make_rejects(
                parsed.filter(_UNDECODABLE & (pl.col("kind") != "malformed")).select(*rows),
                STAGE,
                "undecodable_line",
                pl.concat_str(where, pl.lit(": bytes not valid in the file's encoding")),
            ),
        ]
    ).sort("source_row")


def _warning(rel: str, layout: str, kept: pl.DataFrame, rejected: pl.DataFrame) -> str | None:
    """One line when most alarm lines of a file do not parse (or none does)."""
    bad = rejected.height
    if bad <= kept.height and kept.height:
        return None
    if not bad:
        return f"{rel}: no alarm event found in the {layout} layout"
    first = rejected.row(0, named=True)
    raw = first["payload"]
    line = re.search(r'"raw":("(?:[^"\\]|\\.)*")', raw)
    shown = line.group(1) if line else ""
    return (
        f"{rel}: {bad} of {bad + kept.height} alarm lines do not parse in the {layout} layout; "
        f"first bad line {first['source_row']}: {shown}"
    )


def read_alarm_log(
    path: str | Path, source: AlarmLogSource | None = None, root: str | Path | None = None
) -> StageResult:
    """`read_alarm_log_file`'s events and rejects."""
    return read_alarm_log_file(path, source, root).result
