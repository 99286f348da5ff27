"""Dedup benchmark: precision/recall/F1 against generated clusters, throughput, peak RSS,
and datatrove's MinHash dedup on the same corpus for the throughput ratio.

    .venv/bin/python bench/bench_dedup.py                       # 100k and 1M, datatrove at 100k
    .venv/bin/python bench/bench_dedup.py --rows 100000 --skip-datatrove

datatrove runs in its own environment, never a project dependency:

    python3 -m venv bench/.venv-datatrove
    bench/.venv-datatrove/bin/pip install "datatrove==0.10.1" "xxhash<4" regex tokenizers \
        orjson numpy polars pyarrow

It is configured like our stage where it allows: character 5-grams (a tokenizer that returns
characters), 14 bands × 8 rows, seed 1, 2 tasks; its own text normalization (lower case,
punctuation removed, numbers mapped to 0). A removed record counts as a true positive when its
ground-truth cluster has another member kept; recall is over sum(cluster size - 1).
Each measured run is a child process, so peak RSS is that run's own. Each method runs
`--rounds` times, ours and datatrove's interleaved so that both see the same load; walls
are medians and the ratio is of medians.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "dedup"
DATATROVE_PY = ROOT / "bench" / ".venv-datatrove" / "bin" / "python"


def peak_rss_gib() -> float:
    """Peak RSS of this process or of its largest finished child (datatrove's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 2**20


# ---------------------------------------------------------------- corpus


def prepare(rows: int, seed: int) -> Path:
    """Generate, normalize (pipeline.stages.normalize) and store the corpus the runs read."""
    from pipeline.stages.normalize import normalize
    from sample_data.generate import generate
    from schemas.normalize import NormalizeConfig

    version = hashlib.sha256((ROOT / "sample_data" / "generate.py").read_bytes()).hexdigest()[:10]
    folder = OUT / f"rows-{rows}-seed-{seed}-gen-{version}"
    if (folder / "normalized.parquet").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    raw = generate(rows, seed).with_row_index("pos")
    df = raw.select(
        pl.format("g{}", pl.col("pos").cast(pl.String).str.zfill(8)).alias("record_id"),
        pl.lit("workorder").alias("source_kind"),
        pl.lit("generated.parquet").alias("source_file"),
        (pl.col("pos").cast(pl.Int64) + 1).alias("source_row"),
        pl.exclude("pos", "cluster_id"),
    )
    t_gen = time.perf_counter() - t
    t = time.perf_counter()
    normalized = normalize(df, NormalizeConfig()).kept
    t_norm = time.perf_counter() - t
    normalized.write_parquet(folder / "normalized.parquet")
    raw.select(
        pl.format("g{}", pl.col("pos").cast(pl.String).str.zfill(8)).alias("record_id"),
        "cluster_id",
    ).write_parquet(folder / "truth.parquet")
    # datatrove input: the same four normalized parts, two shards for its two tasks
    text = normalized.select(
        pl.col("record_id").alias("id"),
        pl.concat_str(
            [pl.col(c).fill_null("") for c in ("symptom", "cause", "action", "prevention")],
            separator="\n",
        ).alias("text"),
    )
    (folder / "datatrove_in").mkdir(exist_ok=True)
    half = text.height // 2
    text.slice(0, half).write_parquet(folder / "datatrove_in" / "part-0.parquet")
    text.slice(half).write_parquet(folder / "datatrove_in" / "part-1.parquet")
    print(f"  prepared {rows:,} rows: generate {t_gen:.1f} s, normalize {t_norm:.1f} s")
    return folder


def score(folder: Path, removed: list[str]) -> dict[str, float]:
    truth = pl.read_parquet(folder / "truth.parquet").with_columns(
        pl.col("record_id").is_in(pl.Series(removed, dtype=pl.String).implode()).alias("removed")
    )
    per = truth.with_columns(
        pl.len().over("cluster_id").alias("size"),
        (~pl.col("removed")).sum().over("cluster_id").alias("n_kept"),
    )
    tp = per.filter(pl.col("removed") & (pl.col("n_kept") >= 1)).height
    expected = int(per.group_by("cluster_id").agg(pl.len() - 1).to_series(1).sum())
    precision = tp / len(removed) if removed else 1.0
    recall = tp / expected if expected else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "removed": len(removed),
        "should_remove": expected,
        "true_positives": tp,
        "precision": precision,
        "recall": recall,
        "f1": f1,
    }


# ---------------------------------------------------------------- workers (child processes)


def worker_ours(folder: Path, threads: int) -> None:
    """The production dedup (pipeline/dedup/sharded.py, steps in process) over the corpus
    as one shard."""
    import shutil

    from pipeline.dedup.sharded import dedup_shards
    from pipeline.execution.runner import in_process
    from pipeline.execution.stage_files import load_state
    from schemas.config import PipelineConfig
    from tests.pipeline.execution.support import load_rejects

    cfg = PipelineConfig(dedup={"threads": threads})
    work = folder / "work-ours"
    shutil.rmtree(work, ignore_errors=True)
    rss_start = peak_rss_gib()
    t = time.perf_counter()
    shard = [str(folder / "normalized.parquet")]
    outputs = dedup_shards(in_process(work, cfg), work, shard, [], cfg, ("bench",))
    wall = time.perf_counter() - t
    removed = load_rejects(outputs).get_column("record_id").to_list()
    index = load_state(outputs, "index")
    shutil.rmtree(work, ignore_errors=True)
    (folder / "ours_removed.json").write_text(json.dumps(removed))
    print(
        json.dumps(
            {
                "wall_s": wall,
                "peak_rss_gib": peak_rss_gib(),
                "rss_at_start_gib": rss_start,
                "counters": outputs[0].counters,
                "index_rows": index.height if index is not None else 0,
            }
        )
    )


def worker_datatrove(folder: Path, tasks: int) -> None:  # runs inside bench/.venv-datatrove
    import gzip
    import shutil

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers import JsonlWriter
    from datatrove.utils.word_tokenizers import WordTokenizer

    class CharTokenizer(WordTokenizer):
        """Characters as 'words', so datatrove's n-grams are character n-grams."""

        def word_tokenize(self, text: str) -> list[str]:
            return [c for c in text if not c.isspace()]

        def sent_tokenize(self, text: str) -> list[str]:
            return [text]

        def span_tokenize(self, text: str) -> list[tuple[int, int]]:
            return [(0, len(text))]

    work = folder / "datatrove_work"
    shutil.rmtree(work, ignore_errors=True)
    cfg = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8, seed=1)
    src = str(folder / "datatrove_in")

    def reader() -> ParquetReader:
        return ParquetReader(src, text_key="text", id_key="id")

    common = {"start_method": "fork"}
    s1 = LocalPipelineExecutor(
        [reader(), MinhashDedupSignature(str(work / "sigs"), config=cfg, language=CharTokenizer())],
        tasks=tasks,
        workers=tasks,
        logging_dir=str(work / "logs1"),
        **common,
    )
    s2 = LocalPipelineExecutor(
        [MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=cfg)],
        tasks=cfg.num_buckets,
        workers=tasks,
        logging_dir=str(work / "logs2"),
        depends=s1,
        **common,
    )
    s3 = LocalPipelineExecutor(
        [MinhashDedupCluster(str(work / "buckets"), str(work / "remove"), config=cfg)],
        tasks=1,
        logging_dir=str(work / "logs3"),
        depends=s2,
        **common,
    )
    s4 = LocalPipelineExecutor(
        [
            reader(),
            MinhashDedupFilter(
                str(work / "remove"), exclusion_writer=JsonlWriter(str(work / "removed"))
            ),
            JsonlWriter(str(work / "kept")),
        ],
        tasks=tasks,
        workers=tasks,
        logging_dir=str(work / "logs4"),
        depends=s3,
        **common,
    )
    t = time.perf_counter()
    s4.run()
    wall = time.perf_counter() - t
    removed = []
    for path in sorted((work / "removed").glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            removed.extend(json.loads(line)["id"] for line in fh)
    (folder / "datatrove_removed.json").write_text(json.dumps(removed))
    print(json.dumps({"wall_s": wall, "peak_rss_gib": peak_rss_gib(), "tasks": tasks}))


def run_child(python: Path | str, args: list[str]) -> dict:
    proc = subprocess.run(
        [str(python), __file__, *args], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- main


def summarize(runs: list[dict], rows: int) -> dict:
    """Median wall of the rounds (each listed), largest peak RSS."""
    walls = sorted(r["wall_s"] for r in runs)
    out = {**runs[-1], "wall_s": statistics.median(walls), "walls_s": walls}
    out["peak_rss_gib"] = max(r["peak_rss_gib"] for r in runs)
    out["records_per_s"] = rows / out["wall_s"]
    return out


def line(name: str, rows: int, r: dict) -> str:
    return (
        f"{name:<9} {rows:>9,} rows: {r['wall_s']:7.2f} s {r['records_per_s']:>9,.0f} rec/s"
        f"  P {r['precision']:.4f} R {r['recall']:.4f} F1 {r['f1']:.4f}"
        f"  peak RSS {r['peak_rss_gib']:.2f} GiB"
        f"  rounds {' '.join(f'{w:.2f}' for w in r['walls_s'])} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2, help="our signature threads")
    ap.add_argument("--datatrove-rows", type=int, default=100_000)
    ap.add_argument("--datatrove-tasks", type=int, default=2)
    ap.add_argument("--skip-datatrove", action="store_true")
    ap.add_argument("--rounds", type=int, default=3, help="runs per method; medians reported")
    ap.add_argument("--worker", choices=["ours", "datatrove"], help=argparse.SUPPRESS)
    ap.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.worker == "ours":
        return worker_ours(args.folder, args.threads)
    if args.worker == "datatrove":
        return worker_datatrove(args.folder, args.datatrove_tasks)

    print(f"load average at start: {os.getloadavg()}")
    results: dict[str, dict] = {}
    for rows in args.rows:
        folder = prepare(rows, args.seed)
        with_datatrove = rows == args.datatrove_rows and not args.skip_datatrove
        if with_datatrove and not DATATROVE_PY.exists():
            raise SystemExit(f"{DATATROVE_PY} missing: see this script's docstring")
        runs: dict[str, list[dict]] = {"ours": [], "datatrove": []}
        for _ in range(args.rounds):  # interleaved, so both see the same load
            runs["ours"].append(
                run_child(
                    sys.executable,
                    ["--worker", "ours", "--folder", str(folder), "--threads", str(args.threads)],
                )
            )
            if with_datatrove:
                runs["datatrove"].append(
                    run_child(
                        DATATROVE_PY,
                        [
                            "--worker",
                            "datatrove",
                            "--folder",
                            str(folder),
                            "--datatrove-tasks",
                            str(args.datatrove_tasks),
                        ],
                    )  # fmt: skip
                )
        for name, note in (("ours", "at start: {rss_at_start_gib:.2f} GiB"),
                           ("datatrove", "largest process")):  # fmt: skip
            if not runs[name]:
                continue
            r = summarize(runs[name], rows)
            r.update(score(folder, json.loads((folder / f"{name}_removed.json").read_text())))
            results[f"{name}_{rows}"] = r
            print(line(name, rows, r), f"({note.format(**r)})")
        if with_datatrove:
            ours, dt = results[f"ours_{rows}"], results[f"datatrove_{rows}"]
            print(
                f"throughput ratio ours/datatrove at {rows:,} (median walls): "
                f"{dt['wall_s'] / ours['wall_s']:.1f}x; F1 {ours['f1']:.4f} vs {dt['f1']:.4f}"
            )
    results["load_average_end"] = {"value": list(os.getloadavg())}
    print(f"load average at end: {os.getloadavg()}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
