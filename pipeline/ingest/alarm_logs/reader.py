"""Alarm-history readers, one per controller export layout, and the layout of a file by content.

Layouts (what each export looks like is described at its parser):

- `fanuc`: FANUC 0i-F / 0i-MF / 30i alarm history, one line per alarm or the screen's two-line
  form (date line, then code line), newest first, `%` tape delimiters and header lines skipped.
- `sinumerik`: SINUMERIK Operate alarm logs: one event a line (`;`, tab or space separated;
  date first or number first), or one alarm a row with came / went / acknowledged time columns
  (`;`/tab separated or fixed columns under a header), in English, German or Chinese.
- `mtconnect`: MTConnect agent / adapter logs (SHDR): conditions of any data item, any device.
- `mitsubishi`: Mitsubishi M70/M80 alarm history: class (S02, M01, ...) message detail [axis].
- `haas`: Haas alarm history: date time number text, or number text date time.

Every physical line of a file is accounted for:

    lines_total = alarm_lines + skipped_non_alarm        read = kept + rejected

`alarm_lines` are the lines that hold an alarm event or look like one; `read` counts the events
they give (a came/went/acknowledged row gives up to three) plus the lines that do not parse.
`skipped_non_alarm`: blank lines, headers and rulers, the code line of a two-line FANUC entry,
MTConnect samples and `Unavailable` conditions. Rejects carry file and line: `malformed_line`
(looks like an alarm line but does not parse) and `bad_timestamp` (the date does not exist).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.core.errors import InputFileError
from pipeline.core.stage import StageResult, empty_rejects, make_rejects, stage_result
from pipeline.ingest.encoding import read_text
from pipeline.ingest.files import claimed_files, relative_path
from pipeline.ingest.lineage import record_ids
from pipeline.text.alarm_codes import canonical_code
from schemas.alarm_logs import ALARM_EVENT_SCHEMA, AlarmLogsConfig, AlarmLogSource

STAGE = "ingest_alarm_logs"
SOURCE_KIND = "alarm_log"
LAYOUTS = ("fanuc", "sinumerik", "mtconnect", "mitsubishi", "haas")
_LINEAGE = ("record_id", "source_kind", "source_file", "source_row")
# Alarm years outside this range are a controller whose clock was never set (1900, 2099).
PLAUSIBLE_YEARS = (1990, 2050)


class AlarmLogError(InputFileError, ValueError):
    """An alarm-log file that cannot be read at all; the message names the file."""


# --- dates and times every layout shares ----------------------------------------------------
_DATE = r"\d{4}[/.\-]\d{1,2}[/.\-]\d{1,2}|\d{1,2}[/.\-]\d{1,2}[/.\-]\d{2,4}"
_TIME = r"\d{1,2}:\d{2}:\d{2}(?:[.,]\d{1,6})?"
_SEQ = r"(?:(?i:no\.?)\s*)?\d{1,5}\s+"  # the running number of a history screen


def _datetime(date: pl.Expr, time: pl.Expr) -> pl.Expr:
    """A date in any common order and a time -> datetime; null when it does not exist.

    `2024/03/18`, `2024-03-18`: year first. `16.08.2024`, `16.08.24`: day first (dotted, as
    German and Chinese SINUMERIK exports write it). `08/16/2024`: month first unless the first
    number exceeds 12. `24/08/16`: two-digit year first (Japanese controllers)."""
    g = date.str.strip_chars().str.extract_groups(r"^(\d+)[/.\-](\d+)[/.\-](\d+)$")
    a, b, c = (g.struct.field(str(i)) for i in (1, 2, 3))
    dotted = date.str.contains(r"\.")
    y, m, d = (
        pl.when(a.str.len_chars() == 4)
        .then(field)
        .when(dotted)
        .then(dotted_field)
        .when(c.str.len_chars() == 4)
        .then(us_field)
        .otherwise(ymd_field)
        for field, dotted_field, us_field, ymd_field in (
            (a, c, c, a),
            (b, b, pl.when(a.cast(pl.Int32, strict=False) > 12).then(b).otherwise(a), b),
            (c, a, pl.when(a.cast(pl.Int32, strict=False) > 12).then(a).otherwise(b), c),
        )
    )
    y = pl.when(y.str.len_chars() == 2).then(pl.concat_str(pl.lit("20"), y)).otherwise(y)
    text = pl.concat_str(
        y, pl.lit("-"), m.str.zfill(2), pl.lit("-"), d.str.zfill(2), pl.lit(" "),
        time.str.replace(",", "."),
    )  # fmt: skip
    return text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False)


def _split_datetime(cell: pl.Expr) -> pl.Expr:
    """A `date time` cell (space or T between) -> datetime; null when empty or invalid."""
    g = cell.str.extract_groups(rf"^\s*(?P<d>{_DATE})[\sT]+(?P<t>{_TIME})\s*$")
    return _datetime(g.struct.field("d"), g.struct.field("t"))


def _events(
    lines: pl.DataFrame,
    kind: pl.Expr,
    code: pl.Expr,
    event: pl.Expr,
    message: pl.Expr,
    occurred_at: pl.Expr,
    layout: str,
    level: pl.Expr | None = None,
    channel: pl.Expr | None = None,
) -> pl.DataFrame:
    """The columns every parser returns, one row per line (or per event of a line)."""
    null = pl.lit(None, dtype=pl.String)
    return lines.select(
        "source_row",
        "raw",
        kind.alias("kind"),
        code.alias("native_code"),
        event.alias("event"),
        (level if level is not None else null).alias("level"),
        (channel if channel is not None else null).alias("channel"),
        pl.when(message.str.strip_chars() != "").then(message.str.strip_chars()).alias("message"),
        occurred_at.alias("occurred_at"),
        pl.lit(None, dtype=pl.String).alias("device"),
        pl.lit(_DESCRIBE[layout]).alias("_layout"),
    )


def _kind(parsed: pl.Expr, record: str, continuation: pl.Expr | None = None) -> pl.Expr:
    """alarm (parsed), malformed (looks like a record, does not parse) or skip."""
    skip = pl.lit(False) if continuation is None else continuation
    return (
        pl.when(parsed)
        .then(pl.lit("alarm"))
        .when(~skip & pl.col("raw").str.contains(record))
        .then(pl.lit("malformed"))
        .otherwise(pl.lit("skip"))
    )


# --- FANUC ----------------------------------------------------------------------------------
# FANUC Series 0i-F / 0i-MF Plus / 30i operator's manuals, "Alarm history screen" and its
# output to a memory card: per entry the date and time of occurrence, the alarm number with its
# type prefix (SV0401, OT0500, PS0010; old-style 3-4 digit numbers), and the message; newest
# first. The 30i screen puts date/time on one line and number/message on the next. Tape output
# is framed by `%` lines. Messages are in the display language (GBK Chinese on Chinese panels).
_FANUC_CODE = r"[A-Z]{2}\s?\d{3,4}|\d{3,4}"
_FANUC = (
    rf"^\s*(?:{_SEQ})?(?P<date>{_DATE})\s+(?P<time>{_TIME})\s+(?P<code>{_FANUC_CODE})"
    r"(?:\s+(?P<message>\S.*?))?\s*$"
)
_FANUC_DATE_LINE = rf"^\s*(?:{_SEQ})?(?P<date>{_DATE})\s+(?P<time>{_TIME})\s*$"
_FANUC_CODE_LINE = r"^\s*(?P<code>[A-Z]{2}\s?\d{3,4})(?:\s+(?P<message>\S.*?))?\s*$"
_DATED_RECORD = rf"^\s*(?:{_SEQ})?\d{{1,4}}[/.\-]\d"


def _parse_fanuc(lines: pl.DataFrame) -> pl.DataFrame:
    one = pl.col("raw").str.extract_groups(_FANUC)
    head = pl.col("raw").str.extract_groups(_FANUC_DATE_LINE)
    nxt = pl.col("raw").shift(-1).str.extract_groups(_FANUC_CODE_LINE)
    two = head.struct.field("date").is_not_null() & nxt.struct.field("code").is_not_null()
    previous_two = two.shift(1, fill_value=False)

    def field(name: str) -> pl.Expr:
        split = (head if name in {"date", "time"} else nxt).struct.field(name)
        return pl.coalesce(one.struct.field(name), pl.when(two).then(split))

    return _events(
        lines,
        _kind(field("code").is_not_null(), _DATED_RECORD, previous_two),
        field("code"),
        pl.lit("raised"),
        field("message"),
        _datetime(field("date"), field("time")),
        "fanuc",
    )


# --- SINUMERIK --------------------------------------------------------------------------------
# SINUMERIK Operate, Diagnostics > Alarm log, saved as text: per event the time stamp, the
# state (came / went / acknowledged; Kommen / Gehen / Quittieren; 出现 / 消失 / 确认), the alarm
# number (4-6 digits), optionally its source (NCK, PLC, HMI, DRIVE) and the alarm text, either
# `;`-separated (`16.08.2024 09:12:44.020;出现;27001;...`) or in columns; some exports start
# with the number. The other variant lists one alarm a row, with its came, went and
# acknowledged times in columns named in a header line.
_STATE_WORDS: dict[str, tuple[str, ...]] = {
    "raised": ("came", "coming", "come", "kommt", "kommen", "gekommen", "出现", "产生", "发生"),
    "cleared": ("went", "going", "gone", "geht", "gehen", "gegangen", "消失", "清除", "解除"),
    "acknowledged": (
        "acknowledged", "acknowledge", "ack", "quittiert", "quittieren", "quittung", "确认",
        "已确认", "应答",
    ),
}  # fmt: skip
_STATE = {word: event for event, words in _STATE_WORDS.items() for word in words}
_STATES = "|".join(sorted(_STATE, key=len, reverse=True))
_SEP = r"(?:\s*[;\t|]\s*|\s+)"
_SIN_SOURCE = r"NCK|PLC|HMI|DRIVE|DRV|SINAMICS"
_SIN_TAIL = rf"(?:{_SEP}(?P<source>(?i:{_SIN_SOURCE}))\b)?(?:{_SEP}(?P<message>[^;\s].*?))?[\s;]*$"
_SIN_STAMP = rf"(?P<date>{_DATE})(?:\s*;\s*|[\sT]+)(?P<time>{_TIME})"
_SINUMERIK = (
    rf"^\s*{_SIN_STAMP}{_SEP}(?P<event>(?i:{_STATES})){_SEP}(?P<code>\d{{4,6}})\b{_SIN_TAIL}",
    rf"^\s*(?P<code>\d{{4,6}}){_SEP}{_SIN_STAMP}{_SEP}(?P<event>(?i:{_STATES})){_SIN_TAIL}",
    rf"^\s*(?P<event>(?i:{_STATES})){_SEP}{_SIN_STAMP}{_SEP}(?P<code>\d{{4,6}})\b{_SIN_TAIL}",
)
_SIN_RECORD = rf"^\s*(?:\d{{4,6}}{_SEP})?(?:{_DATE})[\sT;]"


def _parse_sinumerik_events(lines: pl.DataFrame) -> pl.DataFrame:
    groups = [pl.col("raw").str.extract_groups(p) for p in _SINUMERIK]
    field = lambda name: pl.coalesce(*(g.struct.field(name) for g in groups))  # noqa: E731
    return _events(
        lines,
        _kind(field("code").is_not_null(), _SIN_RECORD),
        field("code"),
        field("event").str.to_lowercase().replace_strict(_STATE, default=None),
        field("message"),
        _datetime(field("date"), field("time")),
        "sinumerik",
        level=field("source").str.to_uppercase(),
    )


_HEADER_WORDS: dict[str, tuple[str, ...]] = {
    "code": (
        "alarm", "alarm no", "alarm number", "alarm nr", "number", "no", "nr", "alarmnummer",
        "alarm-nr", "nummer", "报警号", "报警编号", "报警", "编号", "号码",
    ),
    "raised": (*_STATE_WORDS["raised"], "came time", "time came", "kommen zeit", "出现时间"),
    "cleared": (*_STATE_WORDS["cleared"], "went time", "time went", "gehen zeit", "消失时间"),
    "acknowledged": (*_STATE_WORDS["acknowledged"], "ack time", "确认时间"),
    "message": (
        "text", "message", "alarm text", "alarmtext", "meldung", "meldetext", "description",
        "文本", "报警文本", "信息", "报警信息", "描述", "内容",
    ),
    "source": ("source", "quelle", "来源", "type", "typ"),
}  # fmt: skip
_HEADER_NAME = {w: col for col, words in _HEADER_WORDS.items() for w in words}
# Wide (CJK) characters take two columns in a fixed-column export: a NUL after each keeps
# character positions equal to display columns.
_WIDE = "([\u4e00-\u9fff\u3040-\u30ff\u3000-\u303f\uff01-\uff60])"


@dataclass(frozen=True)
class _Table:
    """Columns of a came/went/acknowledged table: header line, separator, cells by name."""

    header_row: int
    delimiter: str | None  # None: fixed columns
    columns: dict[str, tuple[int, int | None]]  # name -> field index (delimited) or span


def _header_name(cell: str) -> str | None:
    key = re.sub(r"[\s_.:：#()（）\[\]]+", " ", cell.replace("\x00", "").lower()).strip()
    return _HEADER_NAME.get(key)


def _find_table(lines: list[str]) -> _Table | None:
    """A header naming an alarm-number column and at least two of came/went/acknowledged."""
    for row, line in enumerate(lines[:60], start=1):
        delimiter = next((d for d in (";", "\t") if d in line), None)
        if delimiter:
            cells = [(c, i) for i, c in enumerate(line.split(delimiter))]
        else:
            shown = re.sub(_WIDE, "\\1\x00", line)
            cells = [(m.group(), m.start()) for m in re.finditer(r"\S+(?: \S+)*", shown)]
        named = {}
        for k, (cell, pos) in enumerate(cells):
            name = _header_name(cell)
            if name and name not in named:
                end = None if delimiter or k + 1 == len(cells) else cells[k + 1][1]
                named[name] = (pos, end if not delimiter else pos)
        states = {"raised", "cleared", "acknowledged"} & named.keys()
        if "code" in named and len(states) >= 2:
            if not delimiter:  # a cell starts where its header starts, ends at the next header
                starts = sorted(p for p, _ in named.values())
                named = {
                    n: (p, next((s for s in starts if s > p), None)) for n, (p, _) in named.items()
                }
            return _Table(row, delimiter, named)
    return None


def _parse_sinumerik_table(lines: pl.DataFrame, table: _Table) -> pl.DataFrame:
    if table.delimiter:
        parts = pl.col("raw").str.split(table.delimiter)

        def cell(name: str) -> pl.Expr:
            if name not in table.columns:
                return pl.lit(None, dtype=pl.String)
            return parts.list.get(table.columns[name][0], null_on_oob=True).str.strip_chars()

    else:
        shown = pl.col("raw").str.replace_all(_WIDE, "$1\x00")

        def cell(name: str) -> pl.Expr:
            if name not in table.columns:
                return pl.lit(None, dtype=pl.String)
            start, end = table.columns[name]
            text = shown.str.slice(start, None if end is None else end - start)
            return text.str.replace_all("\x00", "", literal=True)

    after_header = pl.col("source_row") > table.header_row
    code = cell("code").str.strip_chars().str.extract(r"^(\d{4,6})$")
    frames = []
    for event in ("raised", "cleared", "acknowledged"):
        if event not in table.columns:
            continue
        stamp = cell(event).str.strip_chars()
        has_stamp = stamp.fill_null("") != ""
        row = after_header & code.is_not_null()
        first_event = event == "raised"
        kind = (
            pl.when(row & (has_stamp if not first_event else pl.lit(True)))
            .then(pl.lit("alarm"))
            .when(after_header & ~pl.col("raw").str.contains(r"^[\s\-=_;|]*$") & first_event)
            .then(pl.lit("malformed"))
            .otherwise(pl.lit("skip"))
        )
        frames.append(
            _events(
                lines,
                kind,
                code,
                pl.lit(event),
                cell("message").str.replace_all(r"\s+", " "),
                _split_datetime(stamp.fill_null("")),
                "sinumerik",
                level=cell("source").str.strip_chars().str.to_uppercase(),
            )
        )
    parsed = pl.concat(frames)
    # A line is alarm, malformed or skip once: keep its events, or else one row for it.
    is_alarm = (pl.col("kind") == "alarm").any().over("source_row")
    first = pl.int_range(pl.len()).over("source_row") == 0
    return parsed.filter((pl.col("kind") == "alarm") | (~is_alarm & first)).sort(
        "source_row", maintain_order=True
    )


def _parse_sinumerik(lines: pl.DataFrame) -> pl.DataFrame:
    table = _find_table(lines["raw"].head(60).to_list())
    return _parse_sinumerik_events(lines) if table is None else _parse_sinumerik_table(lines, table)


# --- MTConnect --------------------------------------------------------------------------------
# MTConnect Standard Part 1, SHDR adapter protocol (also what an agent's raw `.txt` logs hold):
# `timestamp|item|value[|item|value...]` for samples and events; a condition on its own line:
# `timestamp|item|level|native_code|native_severity|qualifier|message`, level Normal, Warning,
# Fault or Unavailable. Items are any name (`logic_cond`, `Ytravel`, `Mazak01:system`); a
# `device:` prefix names the device. Native codes are the controller's (decimal or hex).
_SHDR_TIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?\|"
_SHDR_LEVELS = {"warning": "raised", "fault": "raised", "normal": "cleared"}


def _parse_mtconnect(lines: pl.DataFrame) -> pl.DataFrame:
    parts = pl.col("raw").str.strip_chars_end().str.split("|")
    field = lambda i: parts.list.get(i, null_on_oob=True).str.strip_chars()  # noqa: E731
    level = field(2).str.to_lowercase()
    is_condition = (parts.list.len() >= 7) & level.is_in(
        ["normal", "warning", "fault", "unavailable"]
    )
    item = field(1).str.extract_groups(r"^(?:(?P<device>[^:]+):)?(?P<item>.*)$")
    message = parts.list.slice(6).list.join("|")
    sample = pl.col("raw").str.contains(_SHDR_TIME) & (parts.list.len() > 2)
    blank = pl.col("raw").str.strip_chars() == ""
    parsed = _events(
        lines,
        pl.when(is_condition & (level != "unavailable"))
        .then(pl.lit("alarm"))
        .when(is_condition | blank | sample)
        .then(pl.lit("skip"))
        .otherwise(pl.lit("malformed")),
        pl.when(field(3) != "").then(field(3)),
        level.replace_strict(_SHDR_LEVELS, default=None),
        message,
        field(0).str.strip_suffix("Z").str.to_datetime(
            "%Y-%m-%dT%H:%M:%S%.f", time_unit="us", strict=False
        ),
        "mtconnect",
        level=field(2),
        channel=item.struct.field("item"),
    )  # fmt: skip
    return parsed.with_columns(device=pl.when(is_condition).then(item.struct.field("device")))


# --- Mitsubishi -------------------------------------------------------------------------------
# Mitsubishi M70/M80 (M800/M80 series instruction manual, Diagnosis > Alarm history): per
# entry the date and time, the alarm class (S01-S53 servo, M01 operation error, Y, Z, P, T, L,
# EMG), the message, the 4-digit detail number (hex) and the axis name, newest first.
_MITSUBISHI = (
    rf"^\s*(?:{_SEQ})?(?P<date>{_DATE})\s+(?P<time>{_TIME})\s+"
    r"(?P<cls>[SMYZPTLU]\d{2}|EMG)\b\s*(?P<message>.*?)"
    r"(?:\s+(?P<detail>[0-9A-F]{4}))?(?:\s+(?P<axis>[A-Z]{1,2}\d?))?\s*$"
)


def _parse_mitsubishi(lines: pl.DataFrame) -> pl.DataFrame:
    g = pl.col("raw").str.extract_groups(_MITSUBISHI)
    cls, detail = g.struct.field("cls"), g.struct.field("detail")
    code = (
        pl.when(detail.is_not_null()).then(pl.concat_str(cls, pl.lit("-"), detail)).otherwise(cls)
    )
    axis = g.struct.field("axis")
    with_axis = pl.when(axis.is_not_null()).then(pl.lit(" ") + axis)
    message = pl.concat_str(g.struct.field("message"), with_axis, ignore_nulls=True)
    return _events(
        lines,
        _kind(cls.is_not_null(), _DATED_RECORD),
        code,
        pl.lit("raised"),
        message,
        _datetime(g.struct.field("date"), g.struct.field("time")),
        "mitsubishi",
    )


# --- Haas ---------------------------------------------------------------------------------------
# Haas (Next Generation Control operator's manual, Alarms > Alarm History tab, saved as text):
# alarm number (with an optional `.` sub-number), text, date and time of each alarm; some saved
# lists put date and time first.
_HAAS_CODE = r"(?:(?i:alarm)\s*)?(?P<code>\d{3,5}(?:\.\d{1,3})?)"
_HAAS = (
    rf"^\s*(?:{_SEQ})?(?P<date>{_DATE})\s+(?P<time>{_TIME})\s+{_HAAS_CODE}\s+(?P<message>\S.*?)\s*$",
    rf"^\s*{_HAAS_CODE}\s+(?P<message>\S.*?)\s+(?P<date>{_DATE})\s+(?P<time>{_TIME})\s*$",
)


def _parse_haas(lines: pl.DataFrame) -> pl.DataFrame:
    groups = [pl.col("raw").str.extract_groups(p) for p in _HAAS]
    field = lambda name: pl.coalesce(*(g.struct.field(name) for g in groups))  # noqa: E731
    record = rf"{_DATED_RECORD}|^\s*\d{{3,5}}(?:\.\d+)?\s+\S.*\d:\d\d"
    return _events(
        lines,
        _kind(field("code").is_not_null(), record),
        field("code"),
        pl.lit("raised"),
        field("message"),
        _datetime(field("date"), field("time")),
        "haas",
    )


_PARSERS: dict[str, Callable[[pl.DataFrame], pl.DataFrame]] = {
    "fanuc": _parse_fanuc,
    "sinumerik": _parse_sinumerik,
    "mtconnect": _parse_mtconnect,
    "mitsubishi": _parse_mitsubishi,
    "haas": _parse_haas,
}
_DESCRIBE = {
    "fanuc": "FANUC alarm history: [No.] date time code message (or date line, code line)",
    "sinumerik": "SINUMERIK alarm log: date time came|went|acknowledged number [source] text",
    "mtconnect": "MTConnect SHDR: time|item|value or time|item|level|code|severity|qualifier|text",
    "mitsubishi": "Mitsubishi alarm history: [No.] date time class message [detail] [axis]",
    "haas": "Haas alarm history: date time number text, or number text date time",
}


def _lines_frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"source_row": pl.int_range(1, len(lines) + 1, eager=True, dtype=pl.Int64), "raw": lines},
        schema={"source_row": pl.Int64, "raw": pl.String},
    )


def detect_layout(lines: list[str], name: str = "") -> str | None:
    """The layout whose parser recognizes the most of `lines` (a file's first lines), or None
    when none recognizes a fifth of the non-blank lines. A FANUC-shaped history with bare
    numbers is Haas when the file or its name says Haas."""
    frame = _lines_frame(lines)
    content = sum(1 for line in lines if line.strip())
    if not content:
        return None
    scores = {}
    for layout, parse in _PARSERS.items():
        parsed = parse(frame)
        alarms = parsed.filter(pl.col("kind") == "alarm")["source_row"].n_unique()
        if layout == "mtconnect":  # samples and events are part of the layout
            alarms = frame.filter(pl.col("raw").str.contains(_SHDR_TIME)).height
        scores[layout] = alarms
    best = max(scores, key=lambda k: (scores[k], k != "haas"))
    haas_named = re.search(r"(?i)haas|哈斯", name + "\n" + "\n".join(lines[:20])) is not None
    if scores["haas"] and haas_named and scores["haas"] >= scores[best]:
        best = "haas"
    return best if scores[best] and scores[best] * 5 >= content else None


# --- the machine a file belongs to --------------------------------------------------------------
_MACHINE_LABEL = re.compile(
    r"(?i)(?:机床编号|机床号|设备编号|设备号|机台号|机床名称|设备名称|machine\s*(?:no\.?|id|name)?|"
    r"maschine(?:nnummer)?|device(?:\s*name)?|asset)\s*[:：=]\s*([A-Za-z0-9][\w\-./]*)"
)
_GENERIC_NAME_PARTS = re.compile(
    r"(?i)^(?:alarms?|history|hist|log|logs|alarmlog|alarmhistory|export|exports|data|agent|"
    r"shdr|mtconnect|fanuc|sinumerik|siemens|mitsubishi|meldas|haas|heidenhain|okuma|mazak|"
    r"protocol|protokoll|alarmprotokoll|alarmlist|list|report|cnc|nc|controller|control|"
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
    path: Path, source: AlarmLogSource, lines: list[str], devices: pl.Series
) -> str | None:
    """Configured machine, else one named in the file's header, else the MTConnect device,
    else the file name (the configured `machine_pattern`, or its first machine-like part)."""
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
    for line in lines[:15]:
        label = _MACHINE_LABEL.search(line)
        if label:
            return label.group(1)
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
    path: str | Path, source: AlarmLogSource | None = None, root: str | Path | None = None
) -> AlarmLogRead:
    """Read one alarm-log file into events (ALARM_EVENT_SCHEMA) and line-level rejects."""
    path = Path(path)
    source = source or AlarmLogSource(pattern="*")
    rel = relative_path(path, root)
    text, encoding = read_text(path, source.encoding)
    lines = _split_lines(text)
    layout = source.format
    if layout == "auto":
        layout = detect_layout(lines[:400], path.name) or ""
        if not layout:
            raise AlarmLogError(f"{path}: no known alarm-log layout ({', '.join(LAYOUTS)})")
    family = source.code_family(layout)
    frame = _lines_frame(lines)
    parsed = _PARSERS[layout](frame)
    machine = _machine(path, source, lines, parsed["device"])
    lines_kind = parsed.group_by("source_row").agg(pl.col("kind").first())
    alarm_lines = lines_kind.filter(pl.col("kind") != "skip").height
    parsed = parsed.filter(pl.col("kind") != "skip")
    parsed = parsed.with_columns(
        record_ids(
            SOURCE_KIND,
            rel,
            parsed["source_row"],
            parsed.select(
                pl.concat_str("raw", pl.lit("\x1f"), pl.col("event").fill_null(""))
            ).to_series()
            if layout == "sinumerik"
            else parsed["raw"],
        ),
        source_kind=pl.lit(SOURCE_KIND),
        source_file=pl.lit(rel),
        machine=pl.lit(machine, dtype=pl.String),
        family=pl.lit(family),
    )
    code = pl.coalesce(
        pl.col("native_code"), pl.when(pl.col("event") == "raised").then(pl.col("channel"))
    )
    parsed = parsed.with_columns(
        alarm_code=pl.when(code.is_not_null()).then(canonical_code(pl.col("family"), code))
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
    ).sort("source_row")
    kept = parsed.filter(
        (pl.col("kind") == "alarm") & ~bad_time & ~implausible & ~undecodable
    ).select([pl.col(c).cast(t) for c, t in ALARM_EVENT_SCHEMA.items()])
    result = stage_result(
        kept,
        rejected,
        read=parsed.height,
        alarm_lines=alarm_lines,
        skipped_non_alarm=frame.height - alarm_lines,
        lines_total=frame.height,
    )
    return AlarmLogRead(result, layout, machine, encoding, _warning(rel, layout, kept, rejected))


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


def alarm_log_files(root: str | Path, cfg: AlarmLogsConfig) -> list[tuple[Path, AlarmLogSource]]:
    """Files under `root` that a configured source claims (first match wins), then every other
    file whose content is an alarm log (format `auto`), sorted."""
    claimed = dict(claimed_files(root, cfg.sources)) if "sources" in cfg.model_fields_set else {}
    for path in sorted(Path(root).rglob("*")):
        if path.is_file() and path not in claimed:
            head = path.read_bytes()[:65536].decode("utf-8", errors="replace")
            if detect_layout(_split_lines(head)[:400], path.name):
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
