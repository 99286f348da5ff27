"""Alarm-history readers: FANUC alarm-history exports, SINUMERIK alarm logs, MTConnect SHDR.

Every physical line of a file is accounted for:

    lines_total = read + skipped_non_alarm        read = kept + rejected

`read` counts the lines that are alarm events or look like one (a FANUC or SINUMERIK line that
starts with a date, an MTConnect condition line). `skipped_non_alarm` counts the others: blank
lines, headers and rulers, MTConnect samples and events, and MTConnect `Unavailable` conditions
(the adapter lost the data item; no alarm). Rejects carry file and line: `malformed_line` (looks
like an alarm line but does not parse) and `bad_timestamp` (parses, but the date does not exist).

Events: FANUC entries and SINUMERIK `came` lines and MTConnect Warning/Fault conditions are
`raised`; SINUMERIK `went` and MTConnect Normal are `cleared` (an MTConnect Normal without a
native code clears every alarm of its data item: `alarm_code` is null); SINUMERIK
`acknowledged` is `acknowledged`.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import polars as pl

from pipeline.errors import InputFileError
from pipeline.ingest.encoding import read_text
from pipeline.ingest.files import claimed_files, relative_path
from pipeline.ingest.lineage import record_ids
from pipeline.stage import StageResult, empty_rejects, make_rejects, stage_result
from pipeline.text.alarm_codes import code_body
from schemas.alarm_logs import ALARM_EVENT_SCHEMA, AlarmLogsConfig, AlarmLogSource

STAGE = "ingest_alarm_logs"
SOURCE_KIND = "alarm_log"
_LINEAGE = ("record_id", "source_kind", "source_file", "source_row")
# Alarm years outside this range are a controller whose clock was never set (1900, 2099).
PLAUSIBLE_YEARS = (1990, 2050)


class AlarmLogError(InputFileError, ValueError):
    """An alarm-log file that cannot be read at all; the message names the file."""


# --- FANUC: "[seq] 2024/03/18 08:12:05 SV0401 message" ------------------------------------
_FANUC_RECORD = r"^\s*(?:\d+\s+)?\d{4}[/.\-]\d"
_FANUC = (
    r"^\s*(?:\d+\s+)?(?P<date>\d{4}[/.\-]\d{1,2}[/.\-]\d{1,2})\s+"
    r"(?P<time>\d{1,2}:\d{2}:\d{2})\s+"
    r"(?P<code>[A-Za-z]{2}\s?\d{3,4}|\d{3,4})\s+(?P<message>\S.*?)\s*$"
)

# --- SINUMERIK: "18.03.2024 07:58:03.412 came 25000 NCK message" ----------------------------
_SIN_DATE = r"\d{1,2}\.\d{1,2}\.\d{2,4}|\d{4}-\d{1,2}-\d{1,2}"
_SIN_RECORD = rf"^\s*(?:{_SIN_DATE})\s"
_SINUMERIK = (
    rf"^\s*(?P<date>{_SIN_DATE})\s+(?P<time>\d{{1,2}}:\d{{2}}:\d{{2}}(?:\.\d{{1,6}})?)\s+"
    r"(?i:(?P<event>came|went|acknowledged|kommt|geht|quittiert))\s+(?P<code>\d{4,6})"
    r"(?:\s+(?P<source>NCK|PLC|HMI|DRIVE|DRV))?(?:\s+(?P<message>\S.*?))?\s*$"
)
_SIN_EVENTS = {
    "came": "raised",
    "kommt": "raised",
    "went": "cleared",
    "geht": "cleared",
    "acknowledged": "acknowledged",
    "quittiert": "acknowledged",
}

# --- MTConnect SHDR: "time|item|value" samples, "time|item|Level|code|sev|qual|message" ------
_SHDR_TIME = r"^\d{4}-\d{2}-\d{2}T\d"
_SHDR_LEVELS = {"warning": "raised", "fault": "raised", "normal": "cleared"}


# A line that carries an alarm (a FANUC code with text, a SINUMERIK came/went + number) is
# an alarm line even when its date is missing or garbled: rejected, never skipped.
_ALARM_LIKE = (
    r"(?:^|\s)(?:[A-Z]{2}\s?\d{3,4})\s+\S"
    r"|(?i:\b(?:came|went|acknowledged|kommt|geht|quittiert)\s+\d{4,6}\b)"
)


def _alarm_like(raw: pl.Expr) -> pl.Expr:
    return raw.str.contains(_ALARM_LIKE)


def _iso(date: pl.Expr, time: pl.Expr) -> pl.Expr:
    """Parse 'Y-M-D' (any of / . - separators) and 'H:M:S[.f]' into a datetime; null if invalid."""
    parts = date.str.replace_all(r"[/.]", "-").str.split("-")
    ymd = pl.concat_str(
        parts.list.get(0, null_on_oob=True),
        parts.list.get(1, null_on_oob=True).str.zfill(2),
        parts.list.get(2, null_on_oob=True).str.zfill(2),
        separator="-",
    )
    return pl.concat_str(ymd, time, separator=" ").str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False
    )


def _parse_fanuc(lines: pl.DataFrame, family: str) -> pl.DataFrame:
    g = pl.col("_g")
    code = code_body(g.struct.field("code"))
    return lines.with_columns(_g=pl.col("raw").str.extract_groups(_FANUC)).select(
        "source_row",
        "raw",
        pl.when(g.struct.field("code").is_not_null())
        .then(pl.lit("alarm"))
        .when(pl.col("raw").str.contains(_FANUC_RECORD) | _alarm_like(pl.col("raw")))
        .then(pl.lit("malformed"))
        .otherwise(pl.lit("skip"))
        .alias("kind"),
        code.alias("native_code"),
        pl.lit("raised").alias("event"),
        pl.lit(None, dtype=pl.String).alias("level"),
        pl.lit(None, dtype=pl.String).alias("channel"),
        g.struct.field("message").alias("message"),
        _iso(g.struct.field("date"), g.struct.field("time")).alias("occurred_at"),
        pl.lit("FANUC alarm history: [No.] date time code message").alias("_layout"),
    )


def _parse_sinumerik(lines: pl.DataFrame, family: str) -> pl.DataFrame:
    g = pl.col("_g")
    date = g.struct.field("date")
    dmy = date.str.extract_groups(r"^(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{2,4})$")
    year = dmy.struct.field("y")
    year = (
        pl.when(year.str.len_chars() == 2).then(pl.concat_str(pl.lit("20"), year)).otherwise(year)
    )
    iso_date = (
        pl.when(dmy.struct.field("d").is_not_null())
        .then(pl.concat_str(year, dmy.struct.field("m"), dmy.struct.field("d"), separator="-"))
        .otherwise(date)
    )
    return lines.with_columns(_g=pl.col("raw").str.extract_groups(_SINUMERIK)).select(
        "source_row",
        "raw",
        pl.when(g.struct.field("code").is_not_null())
        .then(pl.lit("alarm"))
        .when(pl.col("raw").str.contains(_SIN_RECORD) | _alarm_like(pl.col("raw")))
        .then(pl.lit("malformed"))
        .otherwise(pl.lit("skip"))
        .alias("kind"),
        g.struct.field("code").alias("native_code"),
        g.struct.field("event")
        .str.to_lowercase()
        .replace_strict(_SIN_EVENTS, default=None)
        .alias("event"),
        g.struct.field("source").str.to_uppercase().alias("level"),
        pl.lit(None, dtype=pl.String).alias("channel"),
        g.struct.field("message").alias("message"),
        _iso(iso_date, g.struct.field("time")).alias("occurred_at"),
        pl.lit("SINUMERIK alarm log: date time came|went|acknowledged number [source] text").alias(
            "_layout"
        ),
    )


def _parse_mtconnect(lines: pl.DataFrame, family: str) -> pl.DataFrame:
    parts = pl.col("raw").str.strip_chars_end().str.split("|")
    field = lambda i: parts.list.get(i, null_on_oob=True).str.strip_chars()  # noqa: E731
    level = field(2).str.to_lowercase()
    is_condition = (parts.list.len() >= 7) & level.is_in(
        ["normal", "warning", "fault", "unavailable"]
    )
    native = pl.when(field(3) != "").then(field(3))
    message = parts.list.slice(6).list.join("|").str.strip_chars()
    return lines.select(
        "source_row",
        "raw",
        pl.when(is_condition & (level != "unavailable"))
        .then(pl.lit("alarm"))
        .when(is_condition | (pl.col("raw").str.strip_chars() == ""))
        .then(pl.lit("skip"))
        .when(pl.col("raw").str.contains(_SHDR_TIME) & (parts.list.len() >= 3))
        .then(pl.lit("skip"))
        .otherwise(pl.lit("malformed"))
        .alias("kind"),
        native.alias("native_code"),
        level.replace_strict(_SHDR_LEVELS, default=None).alias("event"),
        field(2).alias("level"),
        field(1).alias("channel"),
        pl.when(message != "").then(message).alias("message"),
        field(0)
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", time_unit="us", strict=False)
        .alias("occurred_at"),
        pl.lit(
            "MTConnect SHDR: time|item|value or time|item|level|code|severity|qualifier|text"
        ).alias("_layout"),
    )


_PARSERS = {"fanuc": _parse_fanuc, "sinumerik": _parse_sinumerik, "mtconnect": _parse_mtconnect}


def machine_for(path: Path, source: AlarmLogSource) -> str:
    """The machine id of a file: `source.machine`, else `machine_pattern` on the file name."""
    if source.machine:
        return source.machine
    found = re.search(source.machine_pattern, path.name)
    if not found or not found.group("machine"):
        raise AlarmLogError(
            f"{path}: file name does not match machine_pattern {source.machine_pattern!r}; "
            "set `machine` or `machine_pattern` for this source"
        )
    return found.group("machine")


def _split_lines(text: str) -> list[str]:
    """Physical lines; CR LF, LF and a lone CR (old controllers) all end one."""
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_alarm_log(
    path: str | Path, source: AlarmLogSource, root: str | Path | None = None
) -> StageResult:
    """Read one alarm-log file into events (ALARM_EVENT_SCHEMA) and line-level rejects."""
    path = Path(path)
    rel = relative_path(path, root)
    machine = machine_for(path, source)
    family = source.code_family()
    text, _ = read_text(path, source.encoding)
    lines = _split_lines(text)
    frame = pl.DataFrame(
        {"source_row": pl.int_range(1, len(lines) + 1, eager=True, dtype=pl.Int64), "raw": lines},
        schema={"source_row": pl.Int64, "raw": pl.String},
    )
    parsed = _PARSERS[source.format](frame, family).filter(pl.col("kind") != "skip")
    skipped = frame.height - parsed.height
    parsed = parsed.with_columns(
        record_ids(SOURCE_KIND, rel, parsed.get_column("source_row"), parsed.get_column("raw")),
        source_kind=pl.lit(SOURCE_KIND),
        source_file=pl.lit(rel),
        machine=pl.lit(machine),
        family=pl.lit(family),
    )
    code = pl.coalesce(
        pl.col("native_code"), pl.when(pl.col("event") == "raised").then(pl.col("channel"))
    )
    parsed = parsed.with_columns(
        alarm_code=pl.when(code.is_not_null()).then(
            pl.concat_str(pl.col("family"), pl.lit(":"), code)
        )
    )
    bad_time = (pl.col("kind") == "alarm") & pl.col("occurred_at").is_null()
    year = pl.col("occurred_at").dt.year()
    implausible = (pl.col("kind") == "alarm") & ~bad_time & ~year.is_between(*PLAUSIBLE_YEARS)
    undecodable = pl.col("raw").str.contains("\ufffd", literal=True)
    where = pl.concat_str(pl.lit(f"{rel}:"), pl.col("source_row").cast(pl.String))
    malformed = parsed.filter(pl.col("kind") == "malformed")
    rejected = pl.concat(
        [
            make_rejects(
                malformed.select(*_LINEAGE, "machine", "raw", "_layout"),
                STAGE,
                "malformed_line",
                pl.concat_str(where, pl.lit(": not in the layout "), pl.col("_layout")),
            ),
            make_rejects(
                parsed.filter(bad_time & ~undecodable).select(*_LINEAGE, "machine", "raw"),
                STAGE,
                "bad_timestamp",
                pl.concat_str(where, pl.lit(": no such date or time")),
            ),
            make_rejects(
                parsed.filter(implausible & ~undecodable).select(*_LINEAGE, "machine", "raw"),
                STAGE,
                "implausible_timestamp",
                pl.concat_str(
                    where,
                    pl.lit(f": year outside {PLAUSIBLE_YEARS[0]}-{PLAUSIBLE_YEARS[1]} "),
                    pl.lit("(controller clock not set?)"),
                ),
            ),
            make_rejects(
                parsed.filter(undecodable & (pl.col("kind") != "malformed")).select(
                    *_LINEAGE, "machine", "raw"
                ),
                STAGE,
                "undecodable_line",
                pl.concat_str(where, pl.lit(": bytes not valid in the file's encoding")),
            ),
        ]
    )
    kept = parsed.filter(
        (pl.col("kind") == "alarm") & ~bad_time & ~implausible & ~undecodable
    ).select([pl.col(c).cast(t) for c, t in ALARM_EVENT_SCHEMA.items()])
    return stage_result(
        kept,
        rejected.sort("source_row"),
        read=parsed.height,
        skipped_non_alarm=skipped,
        lines_total=frame.height,
    )


def alarm_log_files(root: str | Path, cfg: AlarmLogsConfig) -> list[tuple[Path, AlarmLogSource]]:
    """Files under `root` that a source of `cfg` claims (first matching source wins), sorted."""
    return claimed_files(root, cfg.sources)


def read_alarm_logs(root: str | Path, cfg: AlarmLogsConfig | None = None) -> StageResult:
    """Read every alarm log under `root`; counters add up over files (plus `files`)."""
    cfg = cfg or AlarmLogsConfig()
    results = [read_alarm_log(path, source, root) for path, source in alarm_log_files(root, cfg)]
    if not results:
        return stage_result(
            pl.DataFrame(schema=ALARM_EVENT_SCHEMA),
            empty_rejects(),
            read=0,
            skipped_non_alarm=0,
            lines_total=0,
            files=0,
        )
    totals: Counter[str] = Counter()
    for result in results:
        totals.update({k: result.counters[k] for k in ("read", "skipped_non_alarm", "lines_total")})
    return stage_result(
        pl.concat([r.kept for r in results]),
        pl.concat([r.rejected for r in results]),
        read=totals["read"],
        skipped_non_alarm=totals["skipped_non_alarm"],
        lines_total=totals["lines_total"],
        files=len(results),
    )
