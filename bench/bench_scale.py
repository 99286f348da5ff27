"""Benchmark of clean-workorders at scale: in-process and on a local Dask cluster.

Not a test. Usage:
    .venv/bin/python -m bench.bench_scale --rows 1000000 --workers 0 2
    .venv/bin/python -m bench.bench_scale --rows 10000000 --workers 0 2 --corpora /var/tmp/corpora

For each size it writes a synthetic corpus with `sample_data.generate`: batches of a million
rows, batch k generated with seed k and written as `--shards` CSV exports (4 by default: one
shard of the default 250,000 rows each, in the generator's rotating layouts), then
for each worker count runs `cnc-corpus run clean-workorders [--workers N]` in a child process
(the real flow, Prefect's temporary server included) and reports wall time and the peak
memory of the whole process tree: the sum of the RSS of the child and all its descendants
(Dask scheduler, nanny and worker processes, Prefect's server), sampled every 0.2 s, and
how that peak divides between the flow process, Prefect's server and the Dask processes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from bench.bench_workorders import flow_env

REPO = Path(__file__).resolve().parent.parent


def _role(proc: psutil.Process, flow: psutil.Process) -> str:
    """Which part of the run `proc` is: the flow, Prefect's server, or a Dask process."""
    if proc.pid == flow.pid:
        return "flow"
    command = " ".join(proc.cmdline())
    return "prefect_server" if "prefect" in command and "server" in command else "dask"


def tree_rss(proc: psutil.Process) -> dict[str, int]:
    """Bytes resident now in `proc` and its descendants, summed by role (see `_role`)."""
    total: dict[str, int] = {}
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):  # exited between listing and reading
            role = _role(p, proc)
            total[role] = total.get(role, 0) + p.memory_info().rss
    return total


GENERATED_AT_ONCE = 1_000_000  # the generator holds its whole corpus in memory


def generate(rows: int, corpus: Path, shards: int) -> None:
    """`rows` generated work orders under `corpus`, in batches of up to 1M: batch k with
    seed k, written as `shards` exports. A larger corpus is a smaller one plus more batches,
    so that sizes compare like for like (the 1M corpus is the 10M corpus's first batch)."""
    batches = max(1, -(-rows // GENERATED_AT_ONCE))
    for seed in range(batches):
        n = min(GENERATED_AT_ONCE, rows - seed * GENERATED_AT_ONCE)
        folder = corpus / f"batch-{seed:03d}"
        subprocess.run(
            [sys.executable, "-m", "sample_data.generate", "--rows", str(n), "--seed", str(seed)]
            + ["--out", str(folder), "--shards", str(shards)],
            check=True,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
        )
        (folder / "clusters.parquet").unlink(missing_ok=True)  # ground truth, not input


def run_flow(corpus: Path, out: Path, workers: int, work: Path) -> dict[str, object]:
    env = flow_env(work)
    command = [sys.executable, "-m", "flows.cli", "run", "clean-workorders"]
    command += ["--input", str(corpus), "--out", str(out)]
    command += ["--workers", str(workers)] if workers else []
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    watched, peak, at_peak = psutil.Process(proc.pid), 0, {}
    while proc.poll() is None:
        now = tree_rss(watched)
        if (total := sum(now.values())) > peak:
            peak, at_peak = total, now
        time.sleep(0.2)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"flow failed with --workers {workers} (exit {proc.returncode})")
    latest = (out / "LATEST").read_text().strip()
    manifest = json.loads((out / "snapshots" / latest / "manifest.json").read_text())
    return {
        "wall_s": round(wall, 1),
        "peak_tree_rss_gib": round(peak / 2**30, 2),
        "at_peak_gib": {role: round(rss / 2**30, 2) for role, rss in sorted(at_peak.items())},
        "kept": manifest["counts"]["kept"],
        "rejected": manifest["counts"]["rejected"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--shards", type=int, default=4, help="CSV exports per million rows")
    parser.add_argument("--keep", action="store_true", help="keep the generated corpora")
    parser.add_argument(
        "--corpora", type=Path, help="folder of corpora kept from an earlier run (made if missing)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cnc-bench-scale-"))
    try:
        for rows in args.rows:
            corpus = (args.corpora or work) / f"corpus-{rows}-{args.shards}"
            done = corpus.with_suffix(".done")  # outside the corpus: not an input
            if not done.exists():
                shutil.rmtree(corpus, ignore_errors=True)
                generate(rows, corpus, args.shards)
                done.touch()
            for workers in args.workers:
                out = work / f"out-{rows}-{workers}"
                figures = run_flow(corpus, out, workers, work)
                load = [round(x, 2) for x in os.getloadavg()]
                row = {"rows": rows, "workers": workers, **figures, "load_average": load}
                print(json.dumps(row), flush=True)
                shutil.rmtree(out, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
