"""Recall of pairs whose true character 5-gram Jaccard is >= 0.8, on text alone.

The corpus is built here, independently of `sample_data.generate` (the corpus the stage's
defaults were checked on): zh and en work-order sentences assembled from small phrase lists,
then copies with re-typing edits (a character dropped, doubled, swapped or replaced anywhere,
numbers included; full-width punctuation; a clause dropped or added). Only the `symptom`
column is filled: no machine, no code column, no cause/action (the stage's structural rule
cannot help). True Jaccard is computed exactly on the stage's normalized text for every pair
inside a cluster; a pair counts as found when both records end in the same kept record.

    .venv/bin/python bench/bench_dedup_recall.py --rows 20000
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

import polars as pl

from pipeline.dedup.content import normalized_text
from pipeline.dedup.sharded import dedup_shards
from pipeline.execution.runner import in_process
from schemas.config import PipelineConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/ is not installed

from tests.pipeline.execution.support import load_rejects  # noqa: E402

PARTS_ZH = [
    [
        "主轴",
        "X轴",
        "Y轴",
        "Z轴",
        "刀库",
        "刀塔",
        "液压站",
        "冷却泵",
        "润滑泵",
        "尾座",
        "卡盘",
        "排屑器",
    ],
    ["运行时", "启动时", "换刀时", "回零时", "快移时", "加工中", "上电后", "停机后"],
    ["异响", "报警", "漏油", "振动大", "不动作", "过热", "压力低", "定位不准", "卡死", "抖动"],
    ["检查发现", "拆检", "经查", "确认"],
    [
        "轴承磨损",
        "密封圈老化",
        "线缆破损",
        "接近开关松动",
        "电磁阀卡滞",
        "滤网堵塞",
        "皮带打滑",
        "编码器脏污",
        "油位过低",
        "参数被误改",
        "继电器触点烧蚀",
        "联轴器松动",
    ],
    ["更换", "清洗", "紧固", "调整", "修复", "重新设定"],
    ["后试运行正常", "后观察两小时无异常", "后报警消除", "后加工尺寸合格"],
]
PARTS_EN = [
    [
        "Spindle",
        "X axis",
        "Y axis",
        "Z axis",
        "Tool changer",
        "Turret",
        "Hydraulic unit",
        "Coolant pump",
        "Lube pump",
        "Tailstock",
        "Chuck",
        "Chip conveyor",
    ],
    [
        "during warm-up",
        "on tool change",
        "at home return",
        "in rapid traverse",
        "mid cycle",
        "after power-up",
        "at cycle start",
    ],
    [
        "makes noise",
        "alarms out",
        "leaks oil",
        "vibrates",
        "does not move",
        "overheats",
        "loses pressure",
        "mispositions",
        "jams",
        "chatters",
    ],
    ["found", "inspected and found", "checked, found", "traced to"],
    [
        "worn bearing",
        "aged seal",
        "chafed cable",
        "loose proximity switch",
        "stuck solenoid valve",
        "clogged filter",
        "slipping belt",
        "dirty encoder",
        "low oil level",
        "changed parameter",
        "burnt relay contacts",
        "loose coupling",
    ],
    ["replaced it", "cleaned it", "tightened it", "adjusted it", "repaired it", "reset it"],
    ["and test ran OK", "and ran two hours without alarm", "alarm cleared", "parts in tolerance"],
]
WIDE = str.maketrans(",;:()0123456789", "，；：（）０１２３４５６７８９")


def record(rng: random.Random) -> str:
    zh = rng.random() < 0.5
    parts = PARTS_ZH if zh else PARTS_EN
    words = [rng.choice(p) for p in parts]
    code = f"{rng.choice(['ALM', 'SV', 'EX', 'E'])}{rng.randint(100, 9999)}"
    part_no = f"{rng.randint(1000, 9999)}-{rng.randint(10, 99)}"
    hours = rng.randint(100, 20000)
    if zh:
        return (
            f"{words[0]}{words[1]}{words[2]}，报警{code}。{words[3]}{words[4]}，"
            f"{words[5]}（件号{part_no}）{words[6]}。累计运行{hours}小时。"
        )
    return (
        f"{words[0]} {words[1]} {words[2]}, alarm {code}. {words[3]} {words[4]}; "
        f"{words[5]} (P/N {part_no}) {words[6]}. Hour meter {hours}."
    )


def retype(text: str, rng: random.Random) -> str:
    """One to three re-typing edits anywhere in the text."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        i = rng.randrange(len(text))
        if kind < 0.2:
            text = text[:i] + text[i + 1 :]
        elif kind < 0.35:
            text = text[:i] + text[i] + text[i:]
        elif kind < 0.5 and i + 1 < len(text):
            text = text[:i] + text[i + 1] + text[i] + text[i + 2 :]
        elif kind < 0.7:
            text = text[:i] + rng.choice("0123456789abcdefg的了是") + text[i + 1 :]
        elif kind < 0.85:
            text = text.translate(WIDE)
        else:
            text = text + rng.choice([" 已通知班长。", " Operator informed.", " 待观察。"])
    return text


def jaccard(a: str, b: str, k: int = 5) -> float:
    sa = {a[i : i + k] for i in range(max(len(a) - k + 1, 1))}
    sb = {b[i : i + k] for i in range(max(len(b) - k + 1, 1))}
    return len(sa & sb) / len(sa | sb)


def production_dedup(df: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int], float]:
    """The production dedup (pipeline/dedup/sharded.py, steps in process) over `df` as one
    shard: its rejects, counters and wall time (the shard's write excluded)."""
    cfg = PipelineConfig()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        df.write_parquet(work / "shard.parquet")
        start = time.perf_counter()
        outputs = dedup_shards(
            in_process(work, cfg), work, [str(work / "shard.parquet")], [], cfg, ("bench",)
        )
        wall = time.perf_counter() - start
        return load_rejects(outputs), outputs[0].counters, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    texts, clusters = [], []
    c = 0
    while len(texts) < args.rows:
        base = record(rng)
        copies = [base] + [retype(base, rng) for _ in range(rng.choice([0, 0, 0, 1, 1, 2, 3]))]
        texts += copies
        clusters += [c] * len(copies)
        c += 1
    n = len(texts)
    df = pl.DataFrame(
        {
            "record_id": [f"r{i:07d}" for i in range(n)],
            "source_kind": "workorder",
            "source_file": "recall.csv",
            "source_row": list(range(n)),
            "symptom": texts,
            "cause": None,
            "action": None,
            "prevention": None,
            "alarm_codes": [[]] * n,
        },
        schema_overrides={
            "cause": pl.String,
            "action": pl.String,
            "prevention": pl.String,
            "alarm_codes": pl.List(pl.String),
        },
    )
    rejected, counters, wall = production_dedup(df)
    kept_as = dict(rejected.select("record_id", "duplicate_of").iter_rows())
    norm = df.select(normalized_text("symptom")).to_series().to_list()
    members: dict[int, list[int]] = {}
    for i, cl in enumerate(clusters):
        members.setdefault(cl, []).append(i)
    high = found = 0
    for ids in members.values():
        for a, b in combinations(ids, 2):
            if jaccard(norm[a], norm[b]) >= 0.8:
                high += 1
                ra, rb = f"r{a:07d}", f"r{b:07d}"
                found += kept_as.get(ra, ra) == kept_as.get(rb, rb)
    print(
        f"rows {n:,}  pairs with true J>=0.8: {high:,}  found {found:,}  "
        f"recall {found / max(high, 1):.4f}  removed {rejected.height:,}  "
        f"wall {wall:.2f} s  counters {counters}"
    )


if __name__ == "__main__":
    main()
