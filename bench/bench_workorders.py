"""Benchmark of the clean-workorders path: generate N work orders, run the flow, time it.

Not a test. Usage:
    .venv/bin/python -m bench.bench_workorders --rows 100000 1000000

For each size it writes a synthetic corpus with `sample_data.generate`, runs
`cnc-corpus run clean-workorders` in a child process (the real flow, temporary Prefect API
included), and prints wall time, records/s and the child's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def flow_env(work: Path) -> dict[str, str]:
    """The environment a benchmarked flow runs in: its own Prefect home, quiet and offline."""
    return os.environ | {
        "PREFECT_HOME": str(work / "prefect-home"),
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }


def run_once(rows: int, work: Path, shards: int) -> dict[str, float]:
    corpus = work / f"corpus-{rows}"
    out = work / f"out-{rows}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sample_data.generate",
            "--rows",
            str(rows),
            "--out",
            str(corpus),
            "--shards",
            str(shards),
        ],
        check=True,
        cwd=REPO,
    )
    env = flow_env(work)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flows.cli",
            "run",
            "clean-workorders",
            "--input",
            str(corpus),
            "--out",
            str(out),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)  # rusage of this child alone
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"flow failed on {rows} rows (wait status {status})")
    peak_kib = usage.ru_maxrss
    latest = (out / "LATEST").read_text().strip()
    manifest = json.loads((out / "snapshots" / latest / "manifest.json").read_text())
    stages = {k: v["kept"] for k, v in manifest["counts"]["stages"].items()}
    return {
        "rows": rows,
        "wall_s": round(wall, 1),
        "records_per_s": round(rows / wall),
        "peak_rss_gib": round(peak_kib / 2**20, 2),
        "kept": manifest["counts"]["kept"],
        "kept_after_stage": stages,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--keep", action="store_true", help="keep the generated corpora")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cnc-bench-"))
    try:
        for rows in args.rows:
            print(json.dumps(run_once(rows, work, args.shards), ensure_ascii=False), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
