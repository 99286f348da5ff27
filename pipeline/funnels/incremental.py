"""Incremental bookkeeping: which input files are new, changed, unchanged or removed since the
snapshot LATEST names, and the rows of unchanged files carried over from its state.

Only new or changed files are processed. Work orders carry their published samples, rejects
and counts over; alarm logs and manuals carry their parsed rows (state) and rebuild the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.errors import StateError
from pipeline.ingest.files import relative_path, sha256_file
from pipeline.publish.ledger import RefreshPlan, plan_refresh


@dataclass(frozen=True)
class FilePlan:
    """The input files of one source kind by lineage path, their hashes, and what to do."""

    kind: str
    files: dict[str, Path]
    sha256: dict[str, str]
    refresh: RefreshPlan
    skipped: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> reason, detail


def plan_files(kind: str, files: list[Path], root: Path, state: Path | None) -> FilePlan:
    """Compare `files` (lineage paths relative to `root`) with the ledger in `state`.

    Files that cannot be opened are left out of the plan, with a reason.
    """
    rel, shas, skipped = {}, {}, {}
    for p in files:
        name = relative_path(p, root)
        try:
            shas[name] = sha256_file(p)
        except OSError as exc:
            skipped[name] = "cannot_open", f"{name}: cannot read: {exc.strerror}"
            continue
        rel[name] = p
    current = pl.DataFrame(
        {"path": list(shas), "sha256": list(shas.values())},
        schema={"path": pl.String, "sha256": pl.String},
    )
    ledger = state_table(state, "ledger")
    if ledger is not None:
        ledger = ledger.filter(pl.col("source_kind") == kind)
    return FilePlan(kind, rel, shas, plan_refresh(current, ledger), skipped)


def _read(paths: Path | list[Path], corpus: Path) -> pl.DataFrame:
    """A table the last run wrote; a damaged one stops the run in one line (no fresh start
    behind the user's back: that would republish every file and drop the dedup index)."""
    try:
        return pl.read_parquet(paths, hive_partitioning=False)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise _damaged(paths if isinstance(paths, Path) else paths[0], exc, corpus) from None


def _damaged(path: Path, exc: Exception, corpus: Path) -> StateError:
    return StateError(
        f"{path}: the corpus state is damaged ({' '.join(str(exc).split())[:160]}); "
        f"restore it from a backup, or move {corpus} aside to rebuild from scratch"
    )


def state_table(state: Path | None, name: str) -> pl.DataFrame | None:
    """A table of the last snapshot's state, or None when there is none."""
    path = state / f"{name}.parquet" if state else None
    return _read(path, path.parent) if path is not None and path.exists() else None


def carried_rows(
    state: Path | None, name: str, carried: list[str], column: str = "source_file"
) -> pl.DataFrame | None:
    """Rows of state table `name` that belong to the carried files (by `column`)."""
    table = state_table(state, name)
    return table.filter(pl.col(column).is_in(carried)) if table is not None else None


def carried_parts(
    state: Path | None, name: str, carried: list[str], folder: Path, rows: int
) -> list[str]:
    """The rows of state table `name` that belong to the carried files, read a batch of
    `rows` at a time and written under `folder` in parts named by their bytes' sha256."""
    path = state / f"{name}.parquet" if state else None
    if path is None or not path.exists() or not carried:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=rows):
            frame = pl.DataFrame(pl.from_arrow(batch)).filter(pl.col("source_file").is_in(carried))
            if frame.height:
                written = folder / f"{name}-part.parquet"
                frame.write_parquet(written)
                parts.append(str(written.rename(folder / f"{name}-{sha256_file(written)}.parquet")))
    except (OSError, pa.ArrowException) as exc:
        raise _damaged(path, exc, path.parent) from None
    return parts


def published_scan(
    snapshot: Path | None, table: str, kind: str, carried: list[str]
) -> pl.LazyFrame | None:
    """Rows of `kind` from the carried files in a published table of `snapshot`, unread
    (`collect_published` reads them)."""
    files = sorted((snapshot / table).rglob("*.parquet")) if snapshot and carried else []
    if not files:
        return None
    rows = pl.scan_parquet(files, hive_partitioning=False)
    return rows.filter((pl.col("source_kind") == kind) & pl.col("source_file").is_in(carried))


def collect_published(rows: pl.LazyFrame, snapshot: Path) -> pl.DataFrame:
    """`rows` of a published snapshot; a damaged one stops the run in one line."""
    try:
        return rows.collect(engine="streaming")
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise _damaged(snapshot, exc, snapshot) from None


@dataclass(frozen=True)
class PublishedPiece:
    """Published rows of one carried file in one range of source rows, unread: its file,
    first and last source row (None: rows without one), row count, and the rows."""

    file: str
    lo: int | None
    hi: int | None
    rows: int
    scan: pl.LazyFrame


def published_pieces(
    snapshot: Path | None, table: str, kind: str, carried: list[str], rows: int
) -> list[PublishedPiece]:
    """The rows a published `table` of `snapshot` holds of the `carried` files of `kind`: a
    piece per file and range of `rows` source rows (and one for a file's rows without a
    source row), in that order; `collect_published` reads one."""
    scan = published_scan(snapshot, table, kind, carried)
    if scan is None or snapshot is None:
        return []
    span = (pl.col("source_row") // rows).alias("span")
    spans = collect_published(
        scan.group_by("source_file", span).agg(
            pl.col("source_row").min().alias("lo"),
            pl.col("source_row").max().alias("hi"),
            pl.len().alias("n"),
        ),
        snapshot,
    )
    pieces = []
    for file, at, lo, hi, n in spans.sort("source_file", "span", nulls_last=False).iter_rows():
        same = (pl.col("source_file") == file) & (span.is_null() if at is None else span == at)
        pieces.append(PublishedPiece(file, lo, hi, n, scan.filter(same)))
    return pieces
