"""Read work-order exports (CSV, XLSX, JSON, JSONL) onto the record fields, with lineage.

A file is decoded with its detected (or configured) encoding, its header row is found below
report titles (and, in a workbook, its data sheet is chosen), its headers are mapped onto the
fields of `schemas.records.WORKORDER_FIELDS` by configuration, the synonym vocabulary or the
column contents (`pipeline.ingest.workorders.columns`), and every row gets its source file,
physical line and a stable `record_id`. Rows that
cannot be parsed are quarantined with their line; a file that cannot be read at all raises
`IngestError` naming it.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import fastexcel
import polars as pl

from pipeline.core.errors import InputFileError
from pipeline.core.stage import StageResult, empty_rejects, make_rejects, stage_result
from pipeline.ingest.encoding import decode, scan_encoding, text_lines
from pipeline.ingest.files import relative_path, sha256_file
from pipeline.ingest.lineage import record_ids
from pipeline.ingest.workorders.columns import (
    CONTENT_FIELDS,
    CONTENT_SAMPLE,
    HEADER_ROWS,
    find_header_row,
    infer_from_contents,
    map_headers,
    sheet_score,
)
from pipeline.ingest.workorders.csv_rows import read_csv_rows
from pipeline.ingest.workorders.xlsx_merges import fill_merged, sheet_layout
from schemas.ingest import CUSTOMER_COLUMN, IngestConfig, SourceMapping
from schemas.records import INGESTED_SCHEMA, WORKORDER_FIELDS

T = TypeVar("T")
STAGE = "ingest"
SOURCE_KIND = "workorder"


class IngestError(InputFileError):
    """A file that cannot be read; the message names the file (and the line, where known)."""


@dataclass(frozen=True)
class FileRead:
    """What one file gave: its records and quarantined rows, and the facts the manifest keeps."""

    result: StageResult
    path: str
    bytes: int
    sha256: str
    encoding: str
    rows: int
    columns: dict[str, str] = field(default_factory=dict)  # field -> header(s), " + " joined
    skipped: int = 0  # title and blank rows above the header
    warning: str | None = None  # mapped columns holding JSON objects, not used as text


def source_for(rel_path: str, cfg: IngestConfig) -> SourceMapping:
    """The first configured source whose pattern matches, else a default mapping."""
    for source in cfg.sources:
        if fnmatch.fnmatch(rel_path, source.pattern) or fnmatch.fnmatch(
            Path(rel_path).name, source.pattern
        ):
            return source
    return SourceMapping(pattern="*")


def read_workorder_parts(
    path: Path, root: Path, cfg: IngestConfig, part_rows: int | None
) -> Iterator[FileRead]:
    """Read one export and give its records in parts of at most `part_rows` rows (None: one
    part), in order; each quarantined row goes with the part its line falls in. CSV and JSONL
    are read as a stream and never held whole; a workbook or a JSON array is read whole and
    then split. The header, sheet and column mapping are found once, from the file's head
    and its first part. Each part's `rows` are its own; `columns` and `skipped` describe the
    file."""
    rel = relative_path(path, root)
    source = source_for(rel, cfg)
    try:
        size, sha256 = path.stat().st_size, sha256_file(path)
    except OSError as exc:
        raise IngestError(f"{path}: cannot read: {exc.strerror}") from exc
    fmt = _format_of(path, source)
    if fmt in {"xlsx", "json"}:
        encoding, header_line, parts = _whole_file_parts(path, fmt, source, cfg, part_rows)
    else:
        encoding, header_line, parts = _streamed_parts(path, fmt, source, cfg, part_rows)
    head, parts = _head(parts, CONTENT_SAMPLE)
    mapping = resolve_columns(head.columns, source, cfg, path, head)
    mapping, warning = _without_objects(mapping, head, rel, path)
    columns = {f: " + ".join(mapping[f]) for f in WORKORDER_FIELDS if f in mapping}
    carry: dict[str, str | None] = {}
    for raw, lines, bad, raw_text in parts:
        records, carry = _map_fields(raw, source, mapping, carry)
        records = _with_lineage(records, raw, rel, lines, raw_text)
        rejected = _quarantine(bad, rel)
        yield FileRead(
            result=stage_result(records, rejected, read=records.height + rejected.height),
            path=rel,
            bytes=size,
            sha256=sha256,
            encoding=encoding,
            rows=records.height + rejected.height,
            columns=columns,
            skipped=max(header_line - 1, 0),  # report titles and blank rows above the header
            warning=warning,
        )


def _object_share(values: pl.Series) -> float:
    """Share of the filled values that are JSON objects as text."""
    filled = values.drop_nulls()
    if filled.len() == 0:
        return 0.0
    return float(filled.str.contains(r"(?s)^\s*\{.*\}\s*$").mean() or 0.0)


def _without_objects(
    mapping: dict[str, list[str]], head: pl.DataFrame, rel: str, path: Path
) -> tuple[dict[str, list[str]], str | None]:
    """The mapping without the columns whose values are JSON objects (`{...}`: a nested record,
    never sample text), and the warning naming them; IngestError when no content column
    is left."""
    found = [
        (name, h)
        for name, headers in mapping.items()
        for h in headers
        if h in head.columns and _object_share(head[h]) >= 0.5
    ]
    if not found:
        return mapping, None
    dropped = {h for _, h in found}
    kept = {f: [h for h in hs if h not in dropped] for f, hs in mapping.items()}
    kept = {f: hs for f, hs in kept.items() if hs}
    named = ", ".join(f"'{h}' (mapped to {name})" for name, h in found)
    warning = f"{rel}: column {named} holds JSON objects: not used as sample text"
    if not any(f in kept for f in CONTENT_FIELDS):
        raise IngestError(f"{path}: {warning}; no other symptom, cause or action column")
    return kept, warning


# A part of a file: raw frame (its headers as columns), each row's line, quarantined rows,
# and each row's raw text for its record id (None: the raw frame's cells joined).
_Part = tuple[pl.DataFrame, list[int], list["_BadRow"], "pl.Series | None"]


def _whole_file_parts(
    path: Path, fmt: str, source: SourceMapping, cfg: IngestConfig, part_rows: int | None
) -> tuple[str, int, Iterator[_Part]]:
    """A workbook or a JSON array, read whole: (encoding, header line, its parts)."""
    if fmt == "xlsx":
        encoding = "binary"
        raw, lines, header_line, bad = _read_xlsx(path, source, cfg)
    else:
        text, encoding, undecodable = decode(path.read_bytes(), path, source.encoding)
        raw, lines, bad = _read_json(text, path)
        header_line = 0
        del text
        if undecodable:
            raw, lines, bad, _ = _drop_undecodable(raw, lines, bad)
    return encoding, header_line, _slices(raw, lines, bad, part_rows)


def _streamed_parts(
    path: Path, fmt: str, source: SourceMapping, cfg: IngestConfig, part_rows: int | None
) -> tuple[str, int, Iterator[_Part]]:
    """A CSV (header found below report titles) or JSONL file, read as a stream: (encoding,
    header line, its parts, each read when it is asked for)."""
    encoding, replace = scan_encoding(path, source.encoding)
    physical = text_lines(path, encoding, replace)
    parts: Iterator[_Part]
    if fmt == "csv":
        found = read_csv_rows(
            physical,
            source.delimiter,
            lambda rows: find_header_row(rows, cfg),
            source.header_row,
        )
        if found is None:
            raise IngestError(f"{path}: empty file, no header row")
        header_line, header, rows = found
        names = _unique_headers(header)
        parts = (
            (_csv_frame(good, names), [n for n, _ in good], bad, None)
            for good, bad in _batched(rows, part_rows)
        )
    else:
        header_line = 0
        parts = (
            _objects_part(good, bad) for good, bad in _batched(_jsonl_rows(physical), part_rows)
        )
    if replace:
        parts = (_drop_undecodable(*part) for part in parts)
    return encoding, header_line, parts


def _head(parts: Iterator[_Part], rows: int) -> tuple[pl.DataFrame, Iterator[_Part]]:
    """The first `rows` raw rows (what the column mapping is decided on, whatever the part
    size), and the parts, none lost."""
    taken: list[_Part] = []
    for part in parts:
        taken.append(part)
        if sum(p[0].height for p in taken) >= rows:
            break
    head = pl.concat([p[0] for p in taken], how="diagonal").head(rows)
    return head, itertools.chain(taken, parts)


def _slices(
    raw: pl.DataFrame, lines: list[int], bad: list[_BadRow], part_rows: int | None
) -> Iterator[_Part]:
    """A file read whole, in parts of `part_rows` rows."""
    step = part_rows or max(raw.height, 1)
    starts = list(range(0, raw.height, step)) or [0]
    for n, start in enumerate(starts):
        end = start + step
        low = lines[start] if n > 0 else None
        high = lines[end] if end < raw.height else None
        part_bad = [
            b for b in bad if (low is None or b[0] >= low) and (high is None or b[0] < high)
        ]
        yield raw.slice(start, step), lines[start:end], part_bad, None


def _batched(
    rows: Iterator[tuple[int, str | None, T]], part_rows: int | None
) -> Iterator[tuple[list[tuple[int, T]], list[_BadRow]]]:
    """Good rows in parts of `part_rows` (None: one part), each with the bad rows met before
    the next part's first row; at least one part."""
    good: list[tuple[int, T]] = []
    bad: list[_BadRow] = []
    for line, problem, payload in rows:
        if problem is not None:
            bad.append((line, problem, payload))  # type: ignore[arg-type]
            continue
        if part_rows and len(good) == part_rows:
            yield good, bad
            good, bad = [], []
        good.append((line, payload))
    yield good, bad


def _csv_frame(good: list[tuple[int, list[str]]], names: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {name: [row[i] for _, row in good] for i, name in enumerate(names)},
        schema={name: pl.String for name in names},
    )


def _drop_undecodable(
    raw: pl.DataFrame, lines: list[int], bad: list[_BadRow], raw_text: pl.Series | None = None
) -> _Part:
    """Rows holding U+FFFD (bytes of another encoding in a UTF-8 file) are quarantined."""
    hit = raw.select(pl.any_horizontal(pl.all().str.contains("\ufffd", literal=True))).to_series()
    hit = hit.fill_null(False) if raw.width else pl.Series([False] * raw.height)
    for i in hit.arg_true().to_list():
        bad.append((lines[i], "bytes not valid UTF-8 (another encoding pasted in?)", []))
    keep = ~hit
    kept_lines = [n for n, k in zip(lines, keep, strict=True) if k]
    return raw.filter(keep), kept_lines, bad, None if raw_text is None else raw_text.filter(keep)


def _format_of(path: Path, source: SourceMapping) -> str:
    if source.format != "auto":
        return source.format
    suffix = path.suffix.lower()
    if suffix in {".xlsx", ".xlsm", ".xls"}:
        return "xlsx"
    if suffix == ".jsonl":
        return "jsonl"
    if suffix == ".json":
        return "json"
    return "csv"


# A quarantined row: physical line, problem, raw fields.
_BadRow = tuple[int, str, list[str]]


def _read_xlsx(
    path: Path, source: SourceMapping, cfg: IngestConfig
) -> tuple[pl.DataFrame, list[int], int, list[_BadRow]]:
    """The data sheet (configured, else the one whose header names the most fields), its
    header row found below report titles; rows with their sheet row numbers; merged blocks
    filled. Every other sheet that holds rows is one quarantined row saying it was not read."""
    names, wanted, grids, heights = _load_sheets(path, source)
    headers = {i: _header_index(grid, cfg) for i, grid in grids.items()}
    chosen = _data_sheet(grids, headers, wanted, source, cfg)
    grid = grids[chosen]
    if grid.height == 0:
        raise IngestError(f"{path}: sheet '{names[chosen]}' is empty, no header row")
    try:
        layout = sheet_layout(path, chosen)
    except Exception as exc:  # a workbook calamine reads but whose XML is not standard
        raise IngestError(f"{path}: cannot read spreadsheet layout: {exc}") from exc
    index = headers[chosen]
    if source.header_row is not None:
        index = max(source.header_row - layout.first_row, 0)
    header_row = layout.first_row + index
    cells = ["" if c is None else str(c) for c in grid.row(index)]
    frame = grid.slice(index + 1)
    frame = frame.rename(dict(zip(frame.columns, _unique_headers(cells), strict=True)))
    frame = fill_merged(frame, layout.merged, header_row, layout.first_col)
    lines = list(range(header_row + 1, header_row + 1 + frame.height))
    return frame, lines, header_row, _sheets_not_read(names, heights, chosen)


def _load_sheets(
    path: Path, source: SourceMapping
) -> tuple[list[str], list[int], dict[int, pl.DataFrame], dict[int, int]]:
    """The sheet names; the sheets to choose from (the configured one, else all), loaded as
    text without a header; and every sheet's row count."""
    try:
        book = fastexcel.read_excel(path)
        names = book.sheet_names
        wanted = _wanted_sheets(names, source.sheet)
        if not wanted:
            raise IngestError(f"{path}: no sheet {source.sheet!r}; sheets are {names}")
        grids = {
            i: book.load_sheet(i, header_row=None, dtypes="string").to_polars() for i in wanted
        }
        heights = {
            i: grids[i].height if i in grids else book.load_sheet(i, header_row=None).height
            for i in range(len(names))
        }
    except IngestError:
        raise
    except Exception as exc:  # calamine/fastexcel and zipfile raise their own types
        raise IngestError(f"{path}: cannot read spreadsheet: {exc}") from exc
    return names, wanted, grids, heights


def _wanted_sheets(names: list[str], sheet: str | int | None) -> list[int]:
    """Indexes of the sheets `sheet` (a name, an index or None: all) names; [] for none."""
    if sheet is None:
        return list(range(len(names)))
    if isinstance(sheet, str):
        return [names.index(sheet)] if sheet in names else []
    return [sheet] if sheet < len(names) else []


def _header_index(grid: pl.DataFrame, cfg: IngestConfig) -> int:
    """The header's row index in a sheet (0 for an empty sheet)."""
    top = [list(r) for r in grid.head(HEADER_ROWS).rows()]
    return find_header_row(top, cfg) if top else 0


def _data_sheet(
    grids: dict[int, pl.DataFrame],
    headers: dict[int, int],
    wanted: list[int],
    source: SourceMapping,
    cfg: IngestConfig,
) -> int:
    """The configured sheet, else the one whose header and row count score best."""
    if source.sheet is None and len(grids) > 1:
        return max(
            grids,
            key=lambda i: sheet_score(
                grids[i].row(headers[i]) if grids[i].height else [],
                grids[i].height - headers[i] - 1,
                cfg,
            ),
        )
    return wanted[0]


def _sheets_not_read(names: list[str], heights: dict[int, int], chosen: int) -> list[_BadRow]:
    """One quarantined row for each other sheet that holds rows."""
    return [
        (
            1,
            f"sheet '{names[i]}' ({n} rows) not read: the data sheet is '{names[chosen]}'; set "
            "`sheet` in an [[ingest.sources]] entry (a second entry for the same file reads "
            "another)",
            [names[i]],
        )
        for i, n in heights.items()
        if i != chosen and n
    ]


def _read_json(text: str, path: Path) -> tuple[pl.DataFrame, list[int], list[_BadRow]]:
    """A JSON array of objects; the row number is the element's 1-based position."""
    try:
        data = _json_loads(text)
    except json.JSONDecodeError as exc:
        raise IngestError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except (RecursionError, ValueError) as exc:
        raise IngestError(f"{path}: unreadable JSON: {_json_problem(exc)}") from None
    if not isinstance(data, list):
        raise IngestError(f"{path}: expected a JSON array of records, found {type(data).__name__}")
    good = [(i + 1, obj) for i, obj in enumerate(data) if isinstance(obj, dict)]
    bad = [
        (i + 1, "element is not an object", [json.dumps(o)])
        for i, o in enumerate(data)
        if not isinstance(o, dict)
    ]
    return _objects_frame([o for _, o in good])[0], [n for n, _ in good], bad


def _json_loads(text: str) -> object:
    """JSON; an integer too long for Python's int (4,300 digits) stays text, not an error."""
    return json.loads(text, parse_int=lambda digits: int(digits) if len(digits) < 4000 else digits)


def _json_problem(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return " ".join(str(exc).split())


def _jsonl_rows(lines: Iterator[str]) -> Iterator[tuple[int, str | None, object]]:
    """(line, problem or None, the object or [the line]) for each non-blank line."""
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        try:
            obj = _json_loads(line)
        except json.JSONDecodeError as exc:
            yield number, f"invalid JSON: {exc.msg}", [line]
            continue
        except (RecursionError, ValueError) as exc:
            yield number, f"unreadable JSON: {_json_problem(exc)}", [line[:200]]
            continue
        if isinstance(obj, dict):
            yield number, None, obj
        else:
            yield number, "line is not a JSON object", [line]


def _objects_part(good: list[tuple[int, dict]], bad: list[_BadRow]) -> _Part:
    frame, raw_text = _objects_frame([o for _, o in good])
    return frame, [n for n, _ in good], bad, raw_text


def _objects_frame(objects: list[dict]) -> tuple[pl.DataFrame, pl.Series]:
    """Top-level scalar values as strings, nested values as their JSON text; and each
    object's values joined, its raw text for the record id (whatever keys other objects
    have)."""
    keys = list(dict.fromkeys(k for obj in objects for k in obj))

    def text(value: object) -> str | None:
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False)

    frame = pl.DataFrame(
        {k: [text(obj.get(k)) for obj in objects] for k in keys},
        schema={k: pl.String for k in keys},
    )
    raw = ["\x1f".join(text(v) or "" for v in obj.values()) for obj in objects]
    return frame, pl.Series(raw, dtype=pl.String)


def _unique_headers(header: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    names = []
    for i, name in enumerate(header):
        name = name.strip() or f"column_{i + 1}"
        count = seen.get(name, 0)
        seen[name] = count + 1
        names.append(name if count == 0 else f"{name}_{count + 1}")
    return names


def resolve_columns(
    headers: list[str],
    source: SourceMapping,
    cfg: IngestConfig,
    path: Path,
    frame: pl.DataFrame | None = None,
) -> dict[str, list[str]]:
    """Field -> source headers: the explicit mapping first, then the synonym vocabulary, then
    (with `frame`) the contents of the columns still unknown."""
    mapping: dict[str, list[str]] = {}
    for name, spec in source.columns.items():
        wanted = [spec] if isinstance(spec, str) else list(spec)
        missing = [h for h in wanted if h not in headers]
        if missing:
            raise IngestError(
                f"{path}: configured column(s) {missing} for field '{name}' not in the file; "
                f"headers are {headers}"
            )
        mapping[name] = wanted
    if source.use_builtin_headers:
        mapping, ignored = map_headers(headers, mapping, cfg)
        if frame is not None:
            mapping = infer_from_contents(frame, mapping, ignored)
    if not any(f in mapping for f in CONTENT_FIELDS):
        raise IngestError(
            f"{path}: no column recognized as symptom, cause or action; headers are {headers}. "
            'Map them with an [[ingest.sources]] entry (columns = {symptom = "..."}).'
        )
    return mapping


def _map_fields(
    raw: pl.DataFrame,
    source: SourceMapping,
    mapping: dict[str, list[str]],
    carry: dict[str, str | None],
) -> tuple[pl.DataFrame, dict[str, str | None]]:
    """The record fields of a part; `carry` holds the last value of each filled-down column
    in the parts before it, and the new carry is returned."""
    missing = {h for hs in mapping.values() for h in hs} - set(raw.columns)
    raw = raw.with_columns(pl.lit(None, dtype=pl.String).alias(h) for h in sorted(missing))

    def blank_to_null(header: str) -> pl.Expr:
        text = pl.col(header).str.strip_chars()
        return pl.when(text.str.len_chars() > 0).then(text)

    # Fill-down works per source column, before joining: in a merged-cell export each
    # column's blank cell repeats that column's value above, in an earlier part too.
    filled = [h for name in source.fill_down for h in mapping.get(name) or []]
    down = {
        h: blank_to_null(h).forward_fill().fill_null(pl.lit(carry.get(h), dtype=pl.String))
        for h in filled
    }
    exprs = []
    for name in WORKORDER_FIELDS:
        parts = [down.get(h, blank_to_null(h)) for h in mapping.get(name) or []]
        if not parts:
            expr = pl.lit(None, dtype=pl.String)
        elif len(parts) == 1:
            expr = parts[0]
        else:
            joined = pl.concat_str(parts, separator=source.join_with, ignore_nulls=True)
            expr = pl.when(joined.str.len_chars() > 0).then(joined)
        exprs.append(expr.alias(name))
    customers = [blank_to_null(h) for h in mapping.get(CUSTOMER_COLUMN) or []]
    if customers:  # the names are kept for redaction, the column never published
        exprs.append(pl.coalesce(customers).alias(CUSTOMER_COLUMN))
    if down and raw.height:
        carry = raw.select(expr.last().alias(h) for h, expr in down.items()).row(0, named=True)
    return raw.select(exprs), carry


def _with_lineage(
    records: pl.DataFrame,
    raw: pl.DataFrame,
    rel: str,
    lines: list[int],
    raw_text: pl.Series | None = None,
) -> pl.DataFrame:
    """Add source_kind, source_file, source_row and a record_id stable across runs (from the
    row's raw text: `raw_text`, else its cells joined)."""
    if raw_text is None:
        raw_text = (
            raw.select(pl.concat_str(pl.all().fill_null(""), separator="\x1f")).to_series()
            if raw.width
            else pl.Series([""] * raw.height)
        )
    rows = pl.Series("source_row", lines, dtype=pl.Int64)
    out = records.with_columns(
        record_ids(SOURCE_KIND, rel, rows, raw_text),
        pl.lit(SOURCE_KIND).alias("source_kind"),
        pl.lit(rel).alias("source_file"),
        rows,
    )
    customer = [CUSTOMER_COLUMN] if CUSTOMER_COLUMN in out.columns else []
    return out.select(*[pl.col(c).cast(t) for c, t in INGESTED_SCHEMA.items()], *customer)


def _quarantine(bad: list[_BadRow], rel: str) -> pl.DataFrame:
    if not bad:
        return empty_rejects()
    frame = pl.DataFrame(
        {
            "record_id": record_ids(
                SOURCE_KIND,
                rel,
                pl.Series([n for n, _, _ in bad]),
                pl.Series(["\x1f".join(f) for _, _, f in bad]),
            ),
            "source_kind": [SOURCE_KIND] * len(bad),
            "source_file": [rel] * len(bad),
            "source_row": [n for n, _, _ in bad],
            "raw_fields": [f for _, _, f in bad],
            "_detail": [f"{rel}:{n}: {msg}" for n, msg, _ in bad],
        },
        schema_overrides={"source_row": pl.Int64, "raw_fields": pl.List(pl.String)},
    )
    return make_rejects(frame, STAGE, "malformed_row", detail=pl.col("_detail"))
