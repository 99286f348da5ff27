"""Write a snapshot into a staging directory and publish it atomically.

Layout (DESIGN.md): `<out>/LATEST` names the current snapshot directory under
`<out>/snapshots/`; `<out>/state/<id>/` holds that snapshot's ledger and dedup index. A
snapshot is written under `<out>/snapshots/.staging-<id>`, renamed into
place when complete, and only then does LATEST move (write-then-rename). A reader therefore sees
the previous complete snapshot or the new complete one; a killed run leaves only a staging
directory, which the next publish removes.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.ingest.files import sha256_bytes
from schemas.manifest import Manifest, OutputFile
from schemas.publish import PublishConfig

STAGING_PREFIX = ".staging-"


class SnapshotWriter:
    """Collects a snapshot in staging; `commit` publishes it, an exception discards it."""

    def __init__(self, out: Path, cfg: PublishConfig, snapshot_id: str | None = None) -> None:
        self.out = Path(out)
        self.cfg = cfg
        self.snapshot_id = snapshot_id or new_snapshot_id()
        self.snapshots = self.out / "snapshots"
        self.staging = self.snapshots / f"{STAGING_PREFIX}{self.snapshot_id}"
        self.state_staging = self.out / "state" / f"{STAGING_PREFIX}{self.snapshot_id}"
        self.outputs: list[OutputFile] = []

    def __enter__(self) -> SnapshotWriter:
        self.snapshots.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(self.out)
        self.staging.mkdir()
        self.state_staging.mkdir(parents=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for path in (self.staging, self.state_staging):
            if path.exists():
                shutil.rmtree(path)

    def write_table(
        self, name: str, df: pl.DataFrame, schema: pa.Schema, partition_by: str | None = None
    ) -> list[OutputFile]:
        """Size-capped Parquet shards under `name/` (or `name/<col>=<value>/` per partition)."""
        groups = (
            [
                (f"{name}/{partition_by}={key}", part)
                for (key,), part in df.sort(partition_by, maintain_order=True).group_by(
                    partition_by, maintain_order=True
                )
            ]
            if partition_by
            else [(name, df)]
        )
        written = []
        for rel_dir, part in groups:
            written += self._write_shards(rel_dir, part, schema)
        return written

    def write_stream(
        self,
        name: str,
        chunks: Iterable[pl.DataFrame],
        schema: pa.Schema,
        partition_by: str | None = None,
    ) -> None:
        """`write_table` of the concatenated `chunks`, holding at most about one shard per
        partition (see `open_stream`)."""
        stream = self.open_stream(name, schema, partition_by)
        for chunk in chunks:
            stream.write(chunk)
        stream.close()

    def open_stream(
        self, name: str, schema: pa.Schema, partition_by: str | None = None
    ) -> TableStream:
        """A table written a chunk at a time; several can be open at once."""
        return TableStream(self, name, schema, partition_by)

    def _rows_per_shard(self, df: pl.DataFrame) -> int:
        """Rows a shard holds: the row cap, or fewer where `df`'s rows would pass the byte cap."""
        per_row = df.estimated_size() / max(df.height, 1)
        return max(
            1,
            min(
                self.cfg.max_rows_per_shard,
                math.floor(self.cfg.max_bytes_per_shard / max(per_row, 1)),
            ),
        )

    def _write_part(self, rel_dir: str, n: int, df: pl.DataFrame, schema: pa.Schema) -> OutputFile:
        """Write one part; the caller records it (`outputs`) when the table is complete."""
        target = self.staging / rel_dir
        target.mkdir(parents=True, exist_ok=True)
        path = target / f"part-{n:05d}.parquet"
        # one contiguous part: Parquet pages follow Arrow chunks, and write_table's bytes are these
        table = df.select(schema.names).rechunk().to_arrow().cast(schema)
        pq.write_table(table, path, compression=self.cfg.compression)
        return self._describe(path, rows=df.height)

    def _write_shards(self, rel_dir: str, df: pl.DataFrame, schema: pa.Schema) -> list[OutputFile]:
        target = self.staging / rel_dir
        target.mkdir(parents=True, exist_ok=True)
        rows_per_shard = self._rows_per_shard(df)
        n_shards = max(1, math.ceil(df.height / rows_per_shard))
        table = df.select(schema.names).to_arrow().cast(schema)
        files = []
        for i in range(n_shards):
            path = target / f"part-{i:05d}.parquet"
            pq.write_table(
                table.slice(i * rows_per_shard, rows_per_shard),
                path,
                compression=self.cfg.compression,
            )
            files.append(
                self._record(path, rows=min(rows_per_shard, df.height - i * rows_per_shard))
            )
        return files

    def write_state(self, name: str, df: pl.DataFrame | list[pl.DataFrame | str]) -> None:
        """A state table (ledger, counts, dedup index) kept beside the snapshot, not in it;
        given as parts (frames or Parquet paths), they are written one after the other."""
        if isinstance(df, pl.DataFrame):
            df.write_parquet(self.state_staging / f"{name}.parquet")
            return
        writer = None
        for part in df:
            table = (pl.read_parquet(part) if isinstance(part, str) else part).to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(self.state_staging / f"{name}.parquet", table.schema)
            writer.write_table(table.cast(writer.schema))
        if writer is not None:
            writer.close()

    def write_json(self, name: str, obj: object) -> OutputFile:
        path = self.staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        return self._record(path, rows=0)

    def write_text(self, name: str, text: str) -> OutputFile:
        path = self.staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return self._record(path, rows=0)

    def _record(self, path: Path, rows: int) -> OutputFile:
        entry = self._describe(path, rows)
        self.outputs.append(entry)
        return entry

    def _describe(self, path: Path, rows: int) -> OutputFile:
        data = path.read_bytes()
        return OutputFile(
            path=path.relative_to(self.staging).as_posix(),
            rows=rows,
            bytes=len(data),
            sha256=sha256_bytes(data),
        )

    def commit(self, manifest: Manifest) -> Path:
        """Write the manifest, move the snapshot into place, then point LATEST at it."""
        manifest_path = self.staging / "manifest.json"
        manifest_path.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        _fsync_tree(self.staging)
        _fsync_tree(self.state_staging)
        os.rename(self.state_staging, self.out / "state" / self.snapshot_id)
        final = self.snapshots / self.snapshot_id
        os.rename(self.staging, final)
        _fsync_dir(self.snapshots)
        set_latest(self.out, self.snapshot_id)
        prune_snapshots(self.out, self.cfg.keep_snapshots)
        return final


class TableStream:
    """Chunks of one table (`SnapshotWriter.open_stream`): a partition's shard is written as
    soon as it is full, so at most about one shard per partition is held. A shard's size comes
    from the first rows seen of its partition, so the same chunks give the same files; `close`
    writes what is left (an unpartitioned table without rows: one empty part) and lists the
    table's files in the snapshot's outputs."""

    def __init__(
        self, writer: SnapshotWriter, name: str, schema: pa.Schema, partition_by: str | None
    ) -> None:
        self.writer, self.name, self.schema, self.partition_by = writer, name, schema, partition_by
        self.buffers: dict[str, list[pl.DataFrame]] = {}
        self.sizes: dict[str, int] = {}
        self.written: dict[str, int] = {}
        self.files: list[OutputFile] = []

    def _folder(self, key: str) -> str:
        return f"{self.name}/{self.partition_by}={key}" if self.partition_by else self.name

    def write(self, chunk: pl.DataFrame) -> None:
        """Buffer `chunk`'s rows by partition, writing each partition's shards once full."""
        groups = (
            chunk.group_by(self.partition_by, maintain_order=True)
            if self.partition_by
            else [(("",), chunk)]
        )
        for (value,), part in groups:
            if part.height == 0:
                continue
            key = str(value)
            self.buffers.setdefault(key, []).append(part)
            if key not in self.sizes:
                self.sizes[key] = self.writer._rows_per_shard(part)
            self._write_full_shards(key)

    def _write_full_shards(self, key: str) -> None:
        """Write partition `key`'s buffered rows a full shard at a time; keep the rest."""
        buffer, size = self.buffers[key], self.sizes[key]
        while sum(f.height for f in buffer) >= size:
            full = pl.concat(buffer, how="vertical_relaxed")
            n = self.written.get(key, 0)
            self.files.append(
                self.writer._write_part(self._folder(key), n, full.head(size), self.schema)
            )
            self.written[key] = n + 1
            buffer[:] = [full.slice(size)]

    def close(self) -> None:
        if not self.partition_by and not self.buffers:
            self.buffers[""] = [pl.from_arrow(self.schema.empty_table())]  # type: ignore[list-item]
        for key in sorted(self.buffers):
            rest = pl.concat(self.buffers[key], how="vertical_relaxed")
            n = self.written.get(key, 0)
            if rest.height or not n:
                self.files.append(self.writer._write_part(self._folder(key), n, rest, self.schema))
        self.buffers = {}
        self.writer.outputs += sorted(self.files, key=lambda f: f.path)  # as write_table lists them


def new_snapshot_id() -> str:
    """Sortable, unique enough: UTC time to the microsecond."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


def set_latest(out: Path, snapshot_id: str) -> None:
    """Replace LATEST atomically (write a temporary file, fsync, rename over)."""
    tmp = out / f".LATEST.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(snapshot_id + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, out / "LATEST")
    _fsync_dir(out)


def latest_state(out: Path) -> Path | None:
    """The state directory of the snapshot LATEST names, or None before the first publish."""
    snapshot = latest_snapshot(out)
    return None if snapshot is None else Path(out) / "state" / snapshot.name


def latest_snapshot(out: Path) -> Path | None:
    """The directory LATEST points at, or None before the first publish."""
    latest = Path(out) / "LATEST"
    if not latest.exists():
        return None
    return Path(out) / "snapshots" / latest.read_text(encoding="utf-8").strip()


def remove_stale_staging(out: Path) -> None:
    for folder in ("snapshots", "state"):
        for path in (Path(out) / folder).glob(f"{STAGING_PREFIX}*"):
            shutil.rmtree(path, ignore_errors=True)


def prune_snapshots(out: Path, keep: int) -> None:
    """Remove the oldest published snapshots beyond `keep`, never the one LATEST names."""
    current = latest_snapshot(out)
    published = sorted(
        p for p in (Path(out) / "snapshots").iterdir() if p.is_dir() and not p.name.startswith(".")
    )
    for path in published[:-keep]:
        if current is None or path.name != current.name:
            shutil.rmtree(path, ignore_errors=True)
            shutil.rmtree(Path(out) / "state" / path.name, ignore_errors=True)


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
    for path in sorted({p.parent for p in root.rglob("*")} | {root}):
        _fsync_dir(path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
