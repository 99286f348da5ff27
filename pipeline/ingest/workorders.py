"""Read work-order exports (CSV, XLSX, JSON, JSONL) onto the record fields, with lineage.

A file is decoded with its detected (or configured) encoding, its header row is found below
report titles (and, in a workbook, its data sheet is chosen), its headers are mapped onto the
fields of `schemas.records.WORKORDER_FIELDS` by configuration, the synonym vocabulary or the
column contents (`pipeline.ingest.columns`), and every row gets its source file, physical line
and a stable `record_id`. Rows that
cannot be parsed are quarantined with their line; a file that cannot be read at all raises
`IngestError` naming it.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import fastexcel
import polars as pl

from pipeline.errors import InputFileError
from pipeline.ingest.columns import (
    CONTENT_FIELDS,
    find_header_row,
    infer_from_contents,
    map_headers,
    sheet_score,
)
from pipeline.ingest.encoding import decode
from pipeline.ingest.files import any_case, relative_path, sha256_bytes
from pipeline.ingest.lineage import record_ids
from pipeline.ingest.xlsx_merges import fill_merged, sheet_layout
from pipeline.stage import StageResult, empty_rejects, make_rejects, stage_result
from schemas.ingest import CUSTOMER_COLUMN, IngestConfig, SourceMapping
from schemas.records import INGESTED_SCHEMA, WORKORDER_FIELDS

STAGE = "ingest"
SOURCE_KIND = "workorder"
_HEADER_SEARCH = 30  # rows of a CSV read before its header is chosen


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


def discover_files(root: Path, cfg: IngestConfig) -> list[Path]:
    """Input files under `root` (or `root` itself), sorted, honouring include/exclude globs."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise IngestError(f"{root}: input path does not exist")
    found = {p for pattern in cfg.include for p in root.glob(any_case(pattern)) if p.is_file()}
    return sorted(
        p for p in found if not any(fnmatch.fnmatch(relative_path(p, root), x) for x in cfg.exclude)
    )


def source_for(rel_path: str, cfg: IngestConfig) -> SourceMapping:
    """The first configured source whose pattern matches, else a default mapping."""
    for source in cfg.sources:
        if fnmatch.fnmatch(rel_path, source.pattern) or fnmatch.fnmatch(
            Path(rel_path).name, source.pattern
        ):
            return source
    return SourceMapping(pattern="*")


def read_workorder_file(path: Path, root: Path, cfg: IngestConfig) -> FileRead:
    """Read one export. Raises IngestError for a file that cannot be read at all."""
    return next(read_workorder_parts(path, root, cfg, None))


def read_workorder_parts(
    path: Path, root: Path, cfg: IngestConfig, part_rows: int | None
) -> Iterator[FileRead]:
    """Read one export and give its records in parts of at most `part_rows` rows (None: one
    part), in order; each quarantined row goes with the part its line falls in. The header,
    sheet and column mapping are found once for the whole file. Each part's `rows` are its
    own; `columns` and `skipped` describe the file."""
    rel = relative_path(path, root)
    source = source_for(rel, cfg)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(f"{path}: cannot read: {exc.strerror}") from exc
    size, sha256 = len(data), sha256_bytes(data)
    fmt = _format_of(path, source)
    if fmt == "xlsx":
        encoding = "binary"
        raw, lines, header_line, bad = _read_xlsx(path, source, cfg)
    else:
        text, encoding, undecodable = decode(data, path, source.encoding)
        del data
        if fmt == "csv":
            raw, lines, bad, header_line = _read_csv(text, source, path, cfg)
        elif fmt == "jsonl":
            raw, lines, bad = _read_jsonl(text, path)
            header_line = 0
        else:
            raw, lines, bad = _read_json(text, path)
            header_line = 0
        del text
        if undecodable:
            raw, lines, bad = _drop_undecodable(raw, lines, bad)
    mapping = resolve_columns(raw.columns, source, cfg, path, raw)
    columns = {f: " + ".join(mapping[f]) for f in WORKORDER_FIELDS if f in mapping}
    step = part_rows or max(raw.height, 1)
    starts = list(range(0, raw.height, step)) or [0]
    for n, start in enumerate(starts):
        end = start + step
        low = lines[start] if n > 0 else None
        high = lines[end] if end < raw.height else None
        part_bad = [
            b for b in bad if (low is None or b[0] >= low) and (high is None or b[0] < high)
        ]
        part = raw.slice(start, step)
        records = _map_fields(part, source, mapping)
        records = _with_lineage(records, part, rel, lines[start:end])
        rejected = _quarantine(part_bad, rel)
        yield FileRead(
            result=stage_result(records, rejected, read=records.height + rejected.height),
            path=rel,
            bytes=size,
            sha256=sha256,
            encoding=encoding,
            rows=records.height + rejected.height,
            columns=columns,
            skipped=max(header_line - 1, 0),  # report titles and blank rows above the header
        )


def _drop_undecodable(
    raw: pl.DataFrame, lines: list[int], bad: list[_BadRow]
) -> tuple[pl.DataFrame, list[int], list[_BadRow]]:
    """Rows holding U+FFFD (bytes of another encoding in a UTF-8 file) are quarantined."""
    hit = raw.select(pl.any_horizontal(pl.all().str.contains("\ufffd", literal=True))).to_series()
    hit = hit.fill_null(False) if raw.width else pl.Series([False] * raw.height)
    for i in hit.arg_true().to_list():
        bad.append((lines[i], "bytes not valid UTF-8 (another encoding pasted in?)", []))
    keep = ~hit
    return raw.filter(keep), [n for n, k in zip(lines, keep, strict=True) if k], bad


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


def _read_csv(
    text: str, source: SourceMapping, path: Path, cfg: IngestConfig
) -> tuple[pl.DataFrame, list[int], list[_BadRow], int]:
    """Parse with the csv module (quoted newlines and commas), keeping each row's first line.

    The header is the configured row, else the row found below titles and blank rows; its
    line is returned last. A bad row that spans several physical lines (an unbalanced quote
    swallowing the rows after it) is rejected at its first line only; reading resumes on the
    next line.
    """
    physical = list(io.StringIO(text, newline=""))

    def reader_from(line: int) -> Iterator[list[str]]:
        return csv.reader(iter(physical[line:]), delimiter=source.delimiter)

    reader = reader_from(0)
    # (first line, last line, row or [] for a parse error) of the rows searched for the header
    head: list[tuple[int, int, list[str]]] = []
    while len(head) < _HEADER_SEARCH:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error:
            row = []
        head.append((start, reader.line_num, row))
    candidates = [row for _, _, row in head]
    if not any(candidates):
        raise IngestError(f"{path}: empty file, no header row")
    if source.header_row is not None:
        index = next((i for i, (n, _, _) in enumerate(head) if n >= source.header_row), 0)
    else:
        index = find_header_row(candidates, cfg)
    header_line, offset, header = head[index]
    width = len(header)
    reader = reader_from(offset)  # offset: physical lines before the current reader's first
    rows: list[list[str]] = []
    lines: list[int] = []
    bad: list[_BadRow] = []
    while True:
        start = offset + reader.line_num + 1
        try:
            row = next(reader)
            problem = None if not row or len(row) == width else f"expected {width} fields"
        except StopIteration:
            break
        except csv.Error as exc:
            row, problem = [], f"unparseable CSV: {exc}"
        if problem is None:
            if row:  # a blank physical line is not a record
                rows.append(row)
                lines.append(start)
            continue
        end = offset + reader.line_num
        if row and end == start:
            problem += f", found {len(row)}"
        elif end > start:
            problem += (
                f" (an unbalanced quote here ran on to line {end}; read again from {start + 1})"
            )
            reader, offset = reader_from(start), start
        fields = row if end == start else [physical[start - 1]]
        bad.append((start, problem, [field[:1000] for field in fields]))
    names = _unique_headers(header)
    frame = pl.DataFrame(
        {name: [r[i] for r in rows] for i, name in enumerate(names)},
        schema={name: pl.String for name in names},
    )
    return frame, lines, bad, header_line


def _read_xlsx(
    path: Path, source: SourceMapping, cfg: IngestConfig
) -> tuple[pl.DataFrame, list[int], int, list[_BadRow]]:
    """The data sheet (configured, else the one whose header names the most fields), its
    header row found below report titles; rows with their sheet row numbers; merged blocks
    filled. Every other sheet that holds rows is one quarantined row saying it was not read."""
    try:
        book = fastexcel.read_excel(path)
        names = book.sheet_names
        if source.sheet is None:
            wanted = list(range(len(names)))
        elif isinstance(source.sheet, str):
            wanted = [names.index(source.sheet)] if source.sheet in names else []
        else:
            wanted = [source.sheet] if source.sheet < len(names) else []
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
    headers = {}
    for i, grid in grids.items():
        top = [list(r) for r in grid.head(_HEADER_SEARCH).rows()]
        headers[i] = find_header_row(top, cfg) if top else 0
    if source.sheet is None and len(grids) > 1:
        chosen = max(
            grids,
            key=lambda i: sheet_score(
                grids[i].row(headers[i]) if grids[i].height else [],
                grids[i].height - headers[i] - 1,
                cfg,
            ),
        )
    else:
        chosen = wanted[0]
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
    not_read = [
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
    return frame, lines, header_row, not_read


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
    return _frame_from_objects([o for _, o in good]), [n for n, _ in good], bad


def _json_loads(text: str) -> object:
    """JSON; an integer too long for Python's int (4,300 digits) stays text, not an error."""
    return json.loads(text, parse_int=lambda digits: int(digits) if len(digits) < 4000 else digits)


def _json_problem(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deep"
    return " ".join(str(exc).split())


def _read_jsonl(text: str, path: Path) -> tuple[pl.DataFrame, list[int], list[_BadRow]]:
    objects, lines, bad = [], [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = _json_loads(line)
        except json.JSONDecodeError as exc:
            bad.append((number, f"invalid JSON: {exc.msg}", [line]))
            continue
        except (RecursionError, ValueError) as exc:
            bad.append((number, f"unreadable JSON: {_json_problem(exc)}", [line[:200]]))
            continue
        if not isinstance(obj, dict):
            bad.append((number, "line is not a JSON object", [line]))
            continue
        objects.append(obj)
        lines.append(number)
    return _frame_from_objects(objects), lines, bad


def _frame_from_objects(objects: list[dict]) -> pl.DataFrame:
    """Top-level scalar values as strings; nested values as their JSON text."""
    keys = list(dict.fromkeys(k for obj in objects for k in obj))

    def text(value: object) -> str | None:
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False)

    return pl.DataFrame(
        {k: [text(obj.get(k)) for obj in objects] for k in keys},
        schema={k: pl.String for k in keys},
    )


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
    raw: pl.DataFrame, source: SourceMapping, mapping: dict[str, list[str]]
) -> pl.DataFrame:
    def blank_to_null(header: str) -> pl.Expr:
        text = pl.col(header).str.strip_chars()
        return pl.when(text.str.len_chars() > 0).then(text)

    exprs = []
    for name in WORKORDER_FIELDS:
        headers = mapping.get(name)
        # Fill-down works per source column, before joining: in a merged-cell export each
        # column's blank cell repeats that column's value above.
        parts = [
            blank_to_null(h).forward_fill() if name in source.fill_down else blank_to_null(h)
            for h in headers or []
        ]
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
    return raw.select(exprs)


def _with_lineage(
    records: pl.DataFrame, raw: pl.DataFrame, rel: str, lines: list[int]
) -> pl.DataFrame:
    """Add source_kind, source_file, source_row and a record_id stable across runs."""
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
