"""Time structure -> tiers -> messages on generated work orders (sample_data.generate).

    .venv/bin/python bench/bench_samples.py --rows 100000 [--rows 1000000]

Prints per stage: seconds, records/s, and the process's peak RSS; then the tier counts and
where the parts came from, so a change in segmentation shows up next to a change in speed.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.stages.messages import render_messages  # noqa: E402
from pipeline.stages.structure import structure  # noqa: E402
from pipeline.stages.tiers import assign_tiers  # noqa: E402
from sample_data.generate import generate  # noqa: E402
from schemas.records import PARTS  # noqa: E402


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(rows: int) -> None:
    df = generate(rows, seed=7).with_columns(
        pl.lit("workorder").alias("source_kind"),
        pl.int_range(pl.len()).cast(pl.String).alias("record_id"),
    )
    print(f"\n{rows:,} records ({df.estimated_size('mb'):.0f} MB), rss {peak_rss_mib():.0f} MiB")
    t0 = time.perf_counter()
    structured = structure(df)
    t1 = time.perf_counter()
    tiered = assign_tiers(structured.kept)
    t2 = time.perf_counter()
    rendered = render_messages(tiered.kept)
    t3 = time.perf_counter()
    for name, seconds in (("structure", t1 - t0), ("tiers", t2 - t1), ("messages", t3 - t2)):
        print(f"  {name:<10} {seconds:7.2f} s  {rows / seconds:>12,.0f} records/s")
    print(f"  total      {t3 - t0:7.2f} s  {rows / (t3 - t0):>12,.0f} records/s")
    print(f"  peak RSS   {peak_rss_mib():,.0f} MiB")
    print(f"  structure  {structured.counters}")
    print(f"  tiers      {tiered.counters}")
    origins = (
        rendered.select(pl.col("part_origin").struct.unnest())
        .unpivot(on=list(PARTS), variable_name="part", value_name="origin")
        .with_columns(pl.col("origin").str.replace(r"^cue:.*", "cue"))
        .group_by("part", "origin")
        .len()
        .sort("part", "len", descending=[False, True])
    )
    summary = origins.group_by("part", maintain_order=True).agg(
        pl.format("{}={}", pl.col("origin").fill_null("absent"), pl.col("len")).str.join(" ")
    )
    for part, text in summary.iter_rows():
        print(f"  {part:<10} {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, action="append", default=None)
    args = parser.parse_args()
    for rows in args.rows or [100_000]:
        run(rows)


if __name__ == "__main__":
    main()
