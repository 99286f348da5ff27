"""Paired rounds: one flow on one corpus with two versions of the code, in turn (A B A B ...),
and whether they publish the same snapshot.

Not a test. Usage:
    .venv/bin/python -m bench.bench_paired --corpus DIR --base 5d2eafc [--rounds 2]
        [--flow clean-workorders]

`--base` is checked out into a temporary git worktree; the other side is this checkout. Each
run is `cnc-corpus run FLOW --input DIR --out OUT` in a child process (the real flow and its
temporary Prefect server) with the side's code first on PYTHONPATH, under `/usr/bin/time -v`
for the peak RSS of the largest process. Prints one JSON line per run, then per side the
median wall time and the ratio of each pair, and `same snapshot: true|false` (the sha256 of
every Parquet file and plan.json, `tools.snapshot_digest`).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_workorders import flow_env
from tools.snapshot_digest import snapshot_digest

REPO = Path(__file__).resolve().parent.parent


def run_flow(code: Path, flow: str, corpus: Path, out: Path, work: Path) -> dict[str, float]:
    """One run of `flow` with the code under `code`: wall seconds and peak RSS (GiB)."""
    argv = [sys.executable, "-c", "from flows.cli import main; main()", "run", flow]
    argv += ["--input", str(corpus), "--out", str(out)]
    env = flow_env(work) | {"PYTHONPATH": str(code)}
    start = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-v", *argv], cwd=code, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{code}: {flow} failed:\n{done.stderr[-2000:]}")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    return {"wall_s": round(wall, 1), "peak_gib": round(int(peak.group(1)) / 2**20, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--base", required=True, help="git revision of side A")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--flow", default="clean-workorders")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paired-") as tmp:
        work = Path(tmp)
        base = work / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.base], cwd=REPO,
                       check=True, capture_output=True)  # fmt: skip
        try:
            sides = {"base": base, "head": REPO}
            walls: dict[str, list[float]] = {name: [] for name in sides}
            for k in range(args.rounds):
                for name, code in sides.items():
                    out = work / f"out-{name}"
                    subprocess.run(["rm", "-rf", str(out)], check=True)
                    figures = run_flow(code, args.flow, args.corpus, out, work / name)
                    walls[name].append(figures["wall_s"])
                    print(json.dumps({"round": k, "side": name, **figures}), flush=True)
            ratios = [round(h / b, 3) for b, h in zip(walls["base"], walls["head"], strict=True)]
            same = snapshot_digest(work / "out-base") == snapshot_digest(work / "out-head")
            for name, w in walls.items():
                print(f"{name}: median wall {statistics.median(w):.1f} s over {len(w)} runs")
            print(f"head/base per pair: {ratios}")
            print(f"same snapshot: {str(same).lower()}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO)


if __name__ == "__main__":
    main()
