"""Read work-order exports (CSV, XLSX, JSON, JSONL) onto the record fields, with lineage.

A file is decoded with its detected (or configured) encoding, its headers are mapped onto
the fields of `schemas.records.WORKORDER_FIELDS` by configuration or by the built-in alias
table, and every row gets its source file, physical line and a stable `record_id`. Rows that
cannot be parsed are quarantined with their line; a file that cannot be read at all raises
`IngestError` naming it.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.ingest.encoding import EncodingError, detect_encoding
from pipeline.ingest.files import relative_path, sha256_bytes
from pipeline.ingest.lineage import record_ids
from pipeline.ingest.xlsx_merges import fill_merged, merged_ranges
from pipeline.stage import StageResult, empty_rejects, make_rejects, stage_result
from schemas.ingest import BUILTIN_HEADER_ALIASES, IngestConfig, SourceMapping
from schemas.records import INGESTED_SCHEMA, WORKORDER_FIELDS

STAGE = "ingest"
SOURCE_KIND = "workorder"
_CONTENT_FIELDS = ("symptom", "cause", "action")
_HEADER_NOISE = re.compile(r"[\s_\-./()（）:：#*]+")


class IngestError(Exception):
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


def discover_files(root: Path, cfg: IngestConfig) -> list[Path]:
    """Input files under `root` (or `root` itself), sorted, honouring include/exclude globs."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise IngestError(f"{root}: input path does not exist")
    found = {p for pattern in cfg.include for p in root.glob(pattern) if p.is_file()}
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
    """Read one export in parts of at most `part_rows` CSV records (None: one part), in
    order, parsing as it goes: a large export never holds all its rows at once. Spreadsheets,
    JSON and sources that fill cells down come as one part. Each part's `rows` are its own."""
    rel = relative_path(path, root)
    source = source_for(rel, cfg)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(f"{path}: cannot read: {exc.strerror}") from exc
    fmt = _format_of(path, source)
    size, sha256 = len(data), sha256_bytes(data)
    parts: Iterable[tuple[pl.DataFrame, list[int] | None, list[_BadRow]]]
    if fmt == "xlsx":
        encoding = "binary"
        parts = [(_read_xlsx(path, source), None, [])]
    else:
        try:
            encoding = detect_encoding(data, path) if source.encoding == "auto" else source.encoding
        except EncodingError as exc:
            raise IngestError(str(exc)) from None
        if fmt == "csv" and not source.fill_down:
            parts = _csv_parts(data, encoding, source, path, part_rows)
        else:
            try:
                text = data.decode(encoding)
            except (UnicodeDecodeError, LookupError) as exc:
                raise IngestError(f"{path}: cannot decode as {encoding}: {exc}") from exc
            if fmt == "csv":
                parts = [_read_csv(text, source, path)]
            elif fmt == "jsonl":
                parts = [_read_jsonl(text, path)]
            else:
                parts = [_read_json(text, path)]
    del data
    for raw, lines, bad in parts:
        if lines is None:  # spreadsheets: header on row 1
            lines = list(range(2, raw.height + 2))
        records = _map_fields(raw, source, cfg, path)
        records = _with_lineage(records, raw, rel, lines)
        rejected = _quarantine(bad, rel)
        result = stage_result(records, rejected, read=records.height + rejected.height)
        yield FileRead(
            result=result,
            path=rel,
            bytes=size,
            sha256=sha256,
            encoding=encoding,
            rows=records.height + rejected.height,
        )


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
    text: str, source: SourceMapping, path: Path
) -> tuple[pl.DataFrame, list[int], list[_BadRow]]:
    """Parse with the csv module (quoted newlines and commas), keeping each row's first line."""
    return next(_csv_row_parts(io.StringIO(text, newline=""), source, path, None))


def _csv_parts(
    data: bytes, encoding: str, source: SourceMapping, path: Path, part_rows: int | None
) -> Iterator[tuple[pl.DataFrame, list[int], list[_BadRow]]]:
    """`_read_csv` in parts of `part_rows` records, decoding as it reads."""
    try:
        lines = io.TextIOWrapper(io.BytesIO(data), encoding=encoding, newline="")
        yield from _csv_row_parts(lines, source, path, part_rows)
    except (UnicodeDecodeError, LookupError) as exc:
        raise IngestError(f"{path}: cannot decode as {encoding}: {exc}") from exc


def _csv_row_parts(
    lines: Iterable[str], source: SourceMapping, path: Path, part_rows: int | None
) -> Iterator[tuple[pl.DataFrame, list[int], list[_BadRow]]]:
    """Records (with their first physical line) and bad rows, `part_rows` records at a time;
    always at least one part."""
    reader = csv.reader(lines, delimiter=source.delimiter)
    try:
        header = next(reader)
    except StopIteration:
        raise IngestError(f"{path}: empty file, no header row") from None
    except csv.Error as exc:
        raise IngestError(f"{path}:1: cannot parse header: {exc}") from None
    width = len(header)
    names = _unique_headers(header)
    rows: list[list[str]] = []
    lines: list[int] = []
    bad: list[_BadRow] = []

    def part() -> tuple[pl.DataFrame, list[int], list[_BadRow]]:
        frame = pl.DataFrame(
            {name: [r[i] for r in rows] for i, name in enumerate(names)},
            schema={name: pl.String for name in names},
        )
        return frame, lines, bad

    parts = 0
    while True:
        if part_rows is not None and len(rows) >= part_rows:
            yield part()
            rows, lines, bad, parts = [], [], [], parts + 1
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            bad.append((start, f"unparseable CSV: {exc}", []))
            continue
        if not row:
            continue  # a blank physical line is not a record
        if len(row) != width:
            bad.append((start, f"expected {width} fields, found {len(row)}", row))
            continue
        rows.append(row)
        lines.append(start)
    if rows or bad or not parts:
        yield part()


def _read_xlsx(path: Path, source: SourceMapping) -> pl.DataFrame:
    sheet = (
        {"sheet_name": source.sheet}
        if isinstance(source.sheet, str)
        else {"sheet_id": source.sheet + 1}
    )
    try:
        frame = pl.read_excel(
            path,
            **sheet,
            engine="calamine",
            read_options={"dtypes": "string"},
            drop_empty_rows=False,
            infer_schema_length=0,
        )
        ranges = merged_ranges(path, source.sheet)
    except Exception as exc:  # calamine/fastexcel and zipfile raise their own types
        raise IngestError(f"{path}: cannot read spreadsheet: {exc}") from exc
    frame = frame.rename(dict(zip(frame.columns, _unique_headers(frame.columns), strict=True)))
    return fill_merged(frame.select(pl.all().cast(pl.String)), ranges)


def _read_json(text: str, path: Path) -> tuple[pl.DataFrame, list[int], list[_BadRow]]:
    """A JSON array of objects; the row number is the element's 1-based position."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IngestError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, list):
        raise IngestError(f"{path}: expected a JSON array of records, found {type(data).__name__}")
    good = [(i + 1, obj) for i, obj in enumerate(data) if isinstance(obj, dict)]
    bad = [
        (i + 1, "element is not an object", [json.dumps(o)])
        for i, o in enumerate(data)
        if not isinstance(o, dict)
    ]
    return _frame_from_objects([o for _, o in good]), [n for n, _ in good], bad


def _read_jsonl(text: str, path: Path) -> tuple[pl.DataFrame, list[int], list[_BadRow]]:
    objects, lines, bad = [], [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            bad.append((number, f"invalid JSON: {exc.msg}", [line]))
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


def header_key(name: str) -> str:
    """Header comparison key: NFKC, lower case, no spaces or punctuation."""
    return _HEADER_NOISE.sub("", unicodedata.normalize("NFKC", name).lower().lstrip("\ufeff"))


def resolve_columns(
    headers: list[str], source: SourceMapping, cfg: IngestConfig, path: Path
) -> dict[str, list[str]]:
    """Field -> source headers: the explicit mapping first, then the alias table."""
    mapping: dict[str, list[str]] = {}
    for field, spec in source.columns.items():
        wanted = [spec] if isinstance(spec, str) else list(spec)
        missing = [h for h in wanted if h not in headers]
        if missing:
            raise IngestError(
                f"{path}: configured column(s) {missing} for field '{field}' not in the file; "
                f"headers are {headers}"
            )
        mapping[field] = wanted
    if source.use_builtin_headers:
        by_key = {header_key(h): h for h in reversed(headers)}
        taken = {h for hs in mapping.values() for h in hs}
        for field in WORKORDER_FIELDS:
            if field in mapping:
                continue
            aliases = BUILTIN_HEADER_ALIASES[field] + cfg.header_aliases.get(field, [])
            for alias in aliases:
                header = by_key.get(header_key(alias))
                if header is not None and header not in taken:
                    mapping[field] = [header]
                    taken.add(header)
                    break
    if not any(f in mapping for f in _CONTENT_FIELDS):
        raise IngestError(
            f"{path}: no column recognized as symptom, cause or action; headers are {headers}. "
            'Map them with an [[ingest.sources]] entry (columns = {symptom = "..."}).'
        )
    return mapping


def _map_fields(
    raw: pl.DataFrame, source: SourceMapping, cfg: IngestConfig, path: Path
) -> pl.DataFrame:
    mapping = resolve_columns(raw.columns, source, cfg, path)

    def blank_to_null(header: str) -> pl.Expr:
        text = pl.col(header).str.strip_chars()
        return pl.when(text.str.len_chars() > 0).then(text)

    exprs = []
    for field in WORKORDER_FIELDS:
        headers = mapping.get(field)
        # Fill-down works per source column, before joining: in a merged-cell export each
        # column's blank cell repeats that column's value above.
        parts = [
            blank_to_null(h).forward_fill() if field in source.fill_down else blank_to_null(h)
            for h in headers or []
        ]
        if not parts:
            expr = pl.lit(None, dtype=pl.String)
        elif len(parts) == 1:
            expr = parts[0]
        else:
            joined = pl.concat_str(parts, separator=source.join_with, ignore_nulls=True)
            expr = pl.when(joined.str.len_chars() > 0).then(joined)
        exprs.append(expr.alias(field))
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
    return out.select([pl.col(c).cast(t) for c, t in INGESTED_SCHEMA.items()])


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
