"""Benchmark of reading one large work-order export in row ranges: time and peak memory.

Not a test. Usage:
    .venv/bin/python -m bench.bench_ingest --rows 1000000 --part-rows 50000 250000

Writes one CSV export of `--rows` generated work orders (`sample_data.generate`), then for
each part size reads it with `read_workorder_parts` in a fresh child process and prints the
wall time and the child's peak RSS. CSV and JSONL are streamed, so the peak follows the part
size, not the file size.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, resource, sys, time
from pathlib import Path
from pipeline.ingest.workorders.reader import read_workorder_parts
from schemas.ingest import IngestConfig
path, part_rows = Path(sys.argv[1]), int(sys.argv[2])
start, rows = time.perf_counter(), 0
for part in read_workorder_parts(path, path.parent, IngestConfig(), part_rows):
    rows += part.rows
seconds = round(time.perf_counter() - start, 2)
peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
print(json.dumps({"rows": rows, "seconds": seconds, "peak_rss_gib": peak}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--part-rows", type=int, nargs="+", default=[50_000, 250_000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp)
        subprocess.run(
            [sys.executable, "-m", "sample_data.generate", "--rows", str(args.rows)]
            + ["--out", str(corpus), "--shards", "1"],
            check=True,
            capture_output=True,
        )
        export = next(corpus.glob("*.csv"))
        mib = export.stat().st_size / 2**20
        for part_rows in args.part_rows:
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(export), str(part_rows)],
                check=True,
                capture_output=True,
                text=True,
            )
            figures = json.loads(done.stdout)
            print(json.dumps({"file_mib": round(mib), "part_rows": part_rows, **figures}))


if __name__ == "__main__":
    main()
