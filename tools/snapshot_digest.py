"""The sha256 of every Parquet file and of `plan.json` in a corpus's current snapshot.

`python -m tools.snapshot_digest OUT` prints one `sha256  path` line per file (paths relative
to the snapshot), sorted; two corpora built from the same inputs print the same lines.
`--golden` prints a JSON object for `tests/golden/`: the file digests, the digest of each
table's rows (which a newer polars or pyarrow writing other bytes does not change) and the
versions that wrote the files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from importlib.metadata import version
from pathlib import Path

import polars as pl

from pipeline.publish.writer import latest_snapshot

WRITERS = ("polars", "pyarrow")


def current_snapshot(out: Path) -> Path:
    snapshot = latest_snapshot(out)
    if snapshot is None:
        raise SystemExit(f"{out}: no LATEST (nothing published there)")
    return snapshot


def snapshot_digest(out: Path) -> dict[str, str]:
    """path (relative to the snapshot) -> sha256, for the Parquet files and plan.json of the
    snapshot that `out/LATEST` names."""
    snapshot = current_snapshot(out)
    files = [*sorted(snapshot.rglob("*.parquet")), snapshot / "plan.json"]
    return {
        str(p.relative_to(snapshot)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in files
        if p.is_file()
    }


def rows_digest(out: Path) -> dict[str, str]:
    """path -> sha256 of the file's rows as JSON lines (its content, whatever wrote it)."""
    snapshot = current_snapshot(out)
    return {
        str(p.relative_to(snapshot)): hashlib.sha256(
            pl.read_parquet(p, hive_partitioning=False).write_ndjson().encode()
        ).hexdigest()
        for p in sorted(snapshot.rglob("*.parquet"))
    }


def golden(out: Path) -> dict:
    return {
        "writers": {name: version(name) for name in WRITERS},
        "files": snapshot_digest(out),
        "rows": rows_digest(out),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the corpus folder (holds LATEST)")
    parser.add_argument("--golden", action="store_true", help="a JSON object for tests/golden/")
    args = parser.parse_args(argv)
    if args.golden:
        print(json.dumps(golden(args.out), indent=1, sort_keys=True))
        return
    for path, sha in snapshot_digest(args.out).items():
        print(f"{sha}  {path}")


if __name__ == "__main__":
    main()
