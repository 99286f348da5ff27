"""Sharded dedup (pipeline/dedup/sharded.py, in process) against the single-frame reference
`tests/pipeline/dedup/oracle.py:dedup` on the same generated corpus: wall time, peak RSS, time
per step.

    .venv/bin/python bench/bench_dedup_shards.py --rows 100000 1000000 --rounds 3

The corpus is bench_dedup.py's (generated, normalized, cached under bench/out/dedup/), split
into shards of `--shard-rows` records before timing. Each run is a child process: `single`
reads the whole corpus and runs `dedup()`; `sharded` runs the dedup steps over the shard
files in a fresh work folder. Runs alternate (single, sharded, single, ...) so that both see
the same load; walls are medians. Peak RSS is the child's own (`resource.getrusage`); for
`single` it includes the whole frame, for `sharded` the driver and every step one at a time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_dedup import peak_rss_gib, prepare  # noqa: E402


def shard_files(folder: Path, shard_rows: int) -> list[str]:
    """The corpus in shards of `shard_rows` records (written once)."""
    out = folder / f"shards-{shard_rows}"
    if not (out / "done").exists():
        out.mkdir(exist_ok=True)
        df = pl.read_parquet(folder / "normalized.parquet")
        for i, lo in enumerate(range(0, df.height, shard_rows)):
            df.slice(lo, shard_rows).write_parquet(out / f"shard-{i:05d}.parquet")
        (out / "done").touch()
    return sorted(str(p) for p in out.glob("shard-*.parquet"))


def worker_single(folder: Path) -> dict:
    from schemas.config import PipelineConfig
    from tests.pipeline.dedup.oracle import dedup

    t = time.perf_counter()
    df = pl.read_parquet(folder / "normalized.parquet")
    result, index = dedup(df, PipelineConfig().dedup)
    return {"wall_s": time.perf_counter() - t, "rejected": result.rejected.height}


def worker_sharded(folder: Path, shard_rows: int) -> dict:
    from pipeline.dedup.sharded import dedup_shards
    from pipeline.execution.runner import InProcess
    from schemas.config import PipelineConfig
    from tests.pipeline.execution.support import load_rejects

    paths = shard_files(folder, shard_rows)
    work = folder / "work-sharded"
    shutil.rmtree(work, ignore_errors=True)
    cfg = PipelineConfig()
    steps: dict[str, float] = defaultdict(float)
    rss: dict[str, float] = {"start": peak_rss_gib()}

    class Timed(InProcess):
        def __call__(self, call):  # type: ignore[override]
            rss.setdefault(f"before {call.step}", peak_rss_gib())
            t = time.perf_counter()
            out = super().__call__(call)
            steps[call.step] += time.perf_counter() - t
            rss[call.step] = max(rss.get(call.step, 0.0), peak_rss_gib())  # the peak so far
            return out

    t = time.perf_counter()
    outputs = dedup_shards(Timed(work, cfg), work, paths, [], cfg, ("bench",))
    wall = time.perf_counter() - t
    rejected = load_rejects(outputs).height
    shutil.rmtree(work, ignore_errors=True)
    steps["driver"] = wall - sum(steps.values())
    return {
        "peak_rss_after_gib": {k: round(v, 2) for k, v in rss.items()},
        "wall_s": wall,
        "rejected": rejected,
        "steps": {k: round(v, 2) for k, v in steps.items()},
    }


def child(mode: str, folder: Path, shard_rows: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", mode, "--folder", str(folder)]
    cmd += ["--shard-rows", str(shard_rows)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--shard-rows", type=int, default=250_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["single", "sharded"])
    parser.add_argument("--worker", choices=["single", "sharded"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        fn = worker_single if args.worker == "single" else worker_sharded
        result = fn(args.folder) if args.worker == "single" else fn(args.folder, args.shard_rows)
        print(json.dumps({**result, "peak_rss_gib": round(peak_rss_gib(), 3)}))
        return
    modes = [args.only] if args.only else ["single", "sharded"]
    for rows in args.rows:
        folder = prepare(rows, 0)
        shard_files(folder, args.shard_rows)
        runs: dict[str, list[dict]] = {m: [] for m in modes}
        for _ in range(args.rounds):
            for mode in modes:
                runs[mode].append(child(mode, folder, args.shard_rows))
                print(f"  {rows:,} {mode}: {json.dumps(runs[mode][-1])}", flush=True)
        walls = {m: statistics.median(r["wall_s"] for r in runs[m]) for m in modes}
        for m in modes:
            rss = max(r["peak_rss_gib"] for r in runs[m])
            each = ", ".join(f"{r['wall_s']:.2f}" for r in runs[m])
            print(f"{rows:,} {m}: wall median {walls[m]:.2f} s ({each}), peak RSS {rss:.2f} GiB")
        if len(modes) == 2:
            print(f"{rows:,} sharded / single: {walls['sharded'] / walls['single']:.2f}x")


if __name__ == "__main__":
    main()
