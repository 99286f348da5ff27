"""Peak memory of one `dedup.export` step: a real shard's nodes, asked for many rows.

Not a test. Usage:
    .venv/bin/python -m bench.bench_dedup_export CSV [--requests 1000000] [--askers 40]
        [--code OTHER/pipeline/dedup_shards.py]

Reads the first `execution.shard_rows` records of the work-order export CSV, runs them through
ingest, normalize, filter and `shard_nodes`, then asks `export_nodes` for `--requests` random
nodes (80 % far nodes of pairs, 20 % index rows) from `--askers` shards, about what one source
was asked per step at 10M (38.7M requests over 40 sources). The tables are saved as
`execute_step` saves them, in a child process that loads the inputs as a step does. Prints
the wall time and the peak RSS above the loaded inputs (sampled every 5 ms). `--code` loads
another version of `pipeline/dedup/steps.py` (from `git show REV:pipeline/dedup/steps.py`)
to compare.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
import psutil

from pipeline.dedup import steps as dedup_shards
from pipeline.execution.stage_files import save_stage
from pipeline.funnels import workorders
from pipeline.ingest.workorders.reader import read_workorder_parts
from schemas.config import PipelineConfig

INPUTS = ("nodes", "signatures", "ids", "requests")


def prepare(csv: Path, requests: int, askers: int, folder: Path, cfg: PipelineConfig) -> None:
    """The step's inputs under `folder`: the nodes of the first shard of `csv`, and requests."""
    parts = read_workorder_parts(csv, csv.parent, cfg.ingest, cfg.execution.shard_rows)
    ingested = next(iter(parts)).result.kept
    clean = workorders.clean(ingested, cfg, workorders.technicians(ingested))["filter"].kept
    features = dedup_shards.shard_nodes(clean, cfg.dedup)["features"]
    features.state["nodes"].write_parquet(folder / "nodes.parquet")
    features.state["signatures"].write_parquet(folder / "signatures.parquet")
    n = features.state["nodes"].height
    ids = pl.DataFrame({"local": np.arange(n), "node": np.arange(n)})
    ids.write_parquet(folder / "ids.parquet")
    rng = np.random.default_rng(0)
    pl.DataFrame(
        {
            "node": rng.integers(0, n, requests),
            "to": rng.integers(0, askers, requests),
            "use": np.where(rng.random(requests) < 0.8, "pairs", "index"),
        }
    ).write_parquet(folder / "requests.parquet")


def measure(folder: Path, code: Path | None, cfg: PipelineConfig) -> None:
    """Load the inputs as `execute_step` does, run the step, save its tables; print figures."""
    module = dedup_shards
    if code:
        spec = importlib.util.spec_from_file_location("other_dedup_shards", code)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    f = {k: pl.read_parquet(folder / f"{k}.parquet") for k in INPUTS}
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak, done = [base], threading.Event()

    def watch() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], proc.memory_info().rss)

    threading.Thread(target=watch, daemon=True).start()
    start = time.perf_counter()
    results = module.export_nodes(*(f[k] for k in INPUTS), cfg.dedup)
    tables = 0
    for label, result in results.items() if isinstance(results, dict) else results:
        part, _, stage = label.rpartition("/")
        save_stage(result, stage, folder / "out" / part)
        tables += 1
    done.set()
    print(
        f"{f['nodes'].height:,} nodes, {f['requests'].height:,} requests, {tables} tables: "
        f"{time.perf_counter() - start:.1f} s, peak {(peak[0] - base) / 2**30:.2f} GiB above "
        f"the inputs ({base / 2**30:.2f} GiB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--askers", type=int, default=40)
    parser.add_argument("--code", type=Path, help="another pipeline/dedup/steps.py")
    parser.add_argument("--inputs", type=Path, help=argparse.SUPPRESS)  # the measuring child
    args = parser.parse_args()
    cfg = PipelineConfig()
    if args.inputs:
        measure(args.inputs, args.code, cfg)
        return
    with tempfile.TemporaryDirectory() as folder:
        prepare(args.csv, args.requests, args.askers, Path(folder), cfg)
        child = [sys.executable, "-m", "bench.bench_dedup_export", str(args.csv)]
        child += ["--inputs", folder] + (["--code", str(args.code)] if args.code else [])
        subprocess.run(child, check=True)


if __name__ == "__main__":
    main()
