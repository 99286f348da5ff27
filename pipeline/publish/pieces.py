"""Rows to publish in one sort order, a chunk at a time: pieces (a shard's Parquet file, a
frame, a carried file's published rows) know their first and last (kind, file, row) and load
only when written, so a snapshot sorts shard by shard, never the whole corpus."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.funnels.incremental import collect_published, published_pieces

SFT_ORDER = ("source_kind", "source_file", "source_row")
REJECT_ORDER = (*SFT_ORDER, "stage", "record_id")


@dataclass(frozen=True)
class Piece:
    """Rows to publish in one sort order, loaded only when written: their first and last
    (kind, file, row) and their count."""

    first: tuple
    last: tuple
    rows: int
    load: Callable[[], pl.DataFrame]


def _bounds(keys: pl.DataFrame) -> tuple[tuple, tuple]:
    ordered = keys.select(
        pl.col("source_kind").fill_null(""),
        pl.col("source_file").fill_null(""),
        pl.col("source_row").fill_null(-1),
    ).sort(SFT_ORDER)
    return ordered.row(0), ordered.row(-1)


def frame_piece(frame: pl.DataFrame) -> Piece | None:
    if frame.height == 0:
        return None
    return Piece(*_bounds(frame.select(SFT_ORDER)), frame.height, lambda: frame)


def path_piece(path: str) -> Piece | None:
    keys = pl.read_parquet(path, columns=list(SFT_ORDER))
    if keys.height == 0:
        return None
    return Piece(*_bounds(keys), keys.height, lambda: pl.read_parquet(path))


def carried_pieces(
    previous: Path | None, table: str, kind: str, carried: list[str], rows: int
) -> list[Piece]:
    """The rows a published `table` holds of the `carried` files of `kind`: a piece per file
    and range of `rows` source rows (and one for its rows without a source row), each read
    from the published files when written."""
    return [
        Piece(
            (kind, p.file, -1 if p.lo is None else p.lo),
            (kind, p.file, -1 if p.hi is None else p.hi),
            p.rows,
            lambda scan=p.scan: collect_published(scan, previous),
        )
        for p in published_pieces(previous, table, kind, carried, rows)
    ]


def sorted_chunks(pieces: list[Piece | None], order: tuple[str, ...]) -> Iterator[pl.DataFrame]:
    """The pieces' rows sorted by `order`, a chunk at a time: pieces whose (kind, file, row)
    ranges overlap are loaded and sorted together; the others one by one, in order. Shards of
    one file's row ranges (and each carried file) stay apart, so a chunk is about a shard."""
    group: list[Piece] = []
    last: tuple = ()

    def flush() -> pl.DataFrame:
        return pl.concat([p.load() for p in group], how="diagonal_relaxed").sort(
            order, maintain_order=True
        )

    for piece in sorted((p for p in pieces if p is not None), key=lambda p: (p.first, p.last)):
        if group and piece.first > last:
            yield flush()
            group = []
        group.append(piece)
        last = max(last, piece.last) if len(group) > 1 else piece.last
    if group:
        yield flush()
