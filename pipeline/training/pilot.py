"""A pilot slice of the latest snapshot, and a plan for a small model, to try the training loop.

SFT rows are stratified by tier, language, source kind and controller family (the family of a
row's first alarm code, `none` without one); every stratum keeps at least one row and the rest
is shared in proportion to stratum size (largest remainders). Pretraining chunks (by source
file) and tool-use samples (by tier and language) are cut to the same fraction. Within a
stratum rows are picked by a seeded hash of `record_id`, so the slice is reproducible.

The slice keeps the snapshot layout (`sft/tier=*/`, `pretrain/`, `sft_tools/`), so the plan and
trainer configs written beside it (`plan.json`, `trainer/`) work as they do on a snapshot;
`pilot.json` lists every stratum's rows in the snapshot and in the slice.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.errors import UsageError
from pipeline.memory.models import get_model
from pipeline.publish.writer import latest_snapshot
from pipeline.training.plan import plan_snapshot, write_plan
from pipeline.training.trainer_configs import trainer_files
from schemas import arrow
from schemas.config import PipelineConfig
from schemas.plan import Plan

SFT_STRATA = ("tier", "language", "source_kind", "family")
TOOLS_STRATA = ("tier", "language")
PRETRAIN_STRATA = ("source_file",)


@dataclass(frozen=True)
class PilotResult:
    snapshot: Path
    out: Path
    strata: pl.DataFrame  # SFT strata: keys, rows in the snapshot, rows in the slice
    plan: Plan


def allocate(sizes: list[int], n: int) -> list[int]:
    """Rows per stratum: at least one each, the rest in proportion (largest remainders).

    With fewer rows than strata, the largest strata get one row each."""
    total = sum(sizes)
    if n >= total:
        return list(sizes)
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    if n < len(sizes):
        return [1 if i in set(order[:n]) else 0 for i in range(len(sizes))]
    ideal = [n * s / total for s in sizes]
    quota = [min(s, max(1, math.floor(x))) for s, x in zip(sizes, ideal, strict=True)]
    by_remainder = sorted(range(len(sizes)), key=lambda i: (quota[i] - ideal[i], -sizes[i], i))
    while sum(quota) < n:  # add to the strata furthest below their share
        i = next(i for i in by_remainder if quota[i] < sizes[i])
        quota[i] += 1
        by_remainder.remove(i)
        by_remainder.append(i)
    while sum(quota) > n:  # floors of one overshot: take from the strata most above their share
        i = max((i for i in range(len(sizes)) if quota[i] > 1), key=lambda i: quota[i] - ideal[i])
        quota[i] -= 1
    return quota


def stratified_slice(
    df: pl.DataFrame, keys: tuple[str, ...], n: int, seed: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(`n` rows of `df` stratified by `keys`, the strata table with `rows` and `slice`)."""
    strata = df.group_by(keys).len("rows").sort(keys, nulls_last=True)
    strata = strata.with_columns(
        pl.Series("slice", allocate(strata["rows"].to_list(), n), dtype=pl.UInt32)
    )
    picked = (
        df.with_columns(_r=pl.col("record_id").hash(seed))
        .sort("_r", "record_id")
        .join(strata.select(*keys, "slice"), on=list(keys), how="left", nulls_equal=True)
        .filter(pl.int_range(pl.len()).over(list(keys)) < pl.col("slice"))
        .drop("_r", "slice")
        .sort("source_kind", "source_file", "source_row")
    )
    return picked, strata


def _read(snapshot: Path, folder: str) -> pl.DataFrame | None:
    files = sorted((snapshot / folder).rglob("*.parquet"))
    return pl.read_parquet(files, hive_partitioning=False) if files else None


def _write(df: pl.DataFrame, path: Path, schema: pa.Schema) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(df.select(schema.names).to_arrow().cast(schema), path)


def pilot(
    corpus: Path,
    out: Path,
    rows: int = 2000,
    model: str = "qwen2.5-0.5b",
    cfg: PipelineConfig | None = None,
    seed: int = 0,
) -> PilotResult:
    """Write the pilot slice of `corpus`'s latest snapshot and its plan under `out`."""
    cfg = cfg or PipelineConfig()
    get_model(model)  # an unknown model fails here, before anything is written
    snapshot = latest_snapshot(corpus)
    if snapshot is None or not snapshot.is_dir():
        raise UsageError(f"{corpus}: no published snapshot (no LATEST)")
    sft = _read(snapshot, "sft")
    if sft is None or sft.height == 0:
        raise UsageError(f"{snapshot}: the snapshot has no SFT rows to slice")
    sft = sft.with_columns(
        family=pl.col("alarm_codes").list.first().str.split(":").list.first().fill_null("none")
    )
    sft_slice, strata = stratified_slice(sft, SFT_STRATA, rows, seed)
    fraction = sft_slice.height / sft.height
    out.mkdir(parents=True, exist_ok=True)
    for (tier,), part in sft_slice.group_by("tier", maintain_order=True):
        _write(part, out / "sft" / f"tier={tier}" / "part-00000.parquet", arrow.SFT)
    pretrain, tools = _read(snapshot, "pretrain"), _read(snapshot, "sft_tools")
    if pretrain is not None:
        n = max(1, round(fraction * pretrain.height))
        pretrain, _ = stratified_slice(pretrain, PRETRAIN_STRATA, n, seed)
        _write(pretrain, out / "pretrain" / "part-00000.parquet", arrow.PRETRAIN)
    if tools is not None and tools.height:
        n = max(1, round(fraction * tools.height))
        tools, _ = stratified_slice(tools, TOOLS_STRATA, n, seed)
        _write(tools, out / "sft_tools" / "part-00000.parquet", arrow.SFT_TOOLS)
    plan_cfg = cfg.plan.model_copy(
        update={"stages": [s.model_copy(update={"model": model}) for s in cfg.plan.stages]}
    )
    plan = plan_snapshot(sft_slice, pretrain, plan_cfg, tools)
    write_plan(plan, out / "plan.json")
    for name, content in trainer_files(plan, plan_cfg, cfg.trainer).items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = content if isinstance(content, str) else json.dumps(content, indent=2) + "\n"
        path.write_text(text, encoding="utf-8")
    summary = {
        "snapshot": snapshot.name,
        "model": model,
        "seed": seed,
        "rows": {"sft": sft_slice.height, "sft_of": sft.height,
                 "pretrain": pretrain.height if pretrain is not None else 0,
                 "sft_tools": tools.height if tools is not None else 0},
        "strata": strata.to_dicts(),
    }  # fmt: skip
    (out / "pilot.json").write_text(
        json.dumps(summary, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    return PilotResult(snapshot=snapshot, out=out, strata=strata, plan=plan)
