"""The sha256 of every Parquet file and of `plan.json` in a corpus's current snapshot.

`python -m tools.snapshot_digest OUT` prints one `sha256  path` line per file (paths relative
to the snapshot), sorted; two corpora built from the same inputs print the same lines.
`--json` prints them as one object instead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path


def snapshot_digest(out: Path) -> dict[str, str]:
    """path (relative to the snapshot) -> sha256, for the Parquet files and plan.json of the
    snapshot that `out/LATEST` names."""
    snapshot = out / "snapshots" / (out / "LATEST").read_text().strip()
    files = [*sorted(snapshot.rglob("*.parquet")), snapshot / "plan.json"]
    return {
        str(p.relative_to(snapshot)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in files
        if p.is_file()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the corpus folder (holds LATEST)")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    digest = snapshot_digest(args.out)
    if args.json:
        print(json.dumps(digest, indent=1, sort_keys=True))
        return
    for path, sha in digest.items():
        print(f"{sha}  {path}")


if __name__ == "__main__":
    main()
