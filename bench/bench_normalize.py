"""Time `normalize` on synthetic work orders (realistic strings repeated with variations).

.venv/bin/python bench/bench_normalize.py --rows 200000
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.stages.normalize import normalize  # noqa: E402
from schemas.normalize import NormalizeConfig  # noqa: E402
from schemas.records import INGESTED_SCHEMA  # noqa: E402

MODELS = ["FANUC 0i-MF", "SINUMERIK 828D", "Mitsubishi M80", "Heidenhain TNC 640", "Haas VF-2",
          "发那科 0i-TF", "西门子 840D sl", None]  # fmt: skip
SYMPTOMS = [
    "X轴伺服报警SV{n:04d}，机床急停",
    "ＳＶ０４０１ 伺服V就绪信号关闭",
    "主轴过热报警 SP9{n:03d}，冷却风扇不转",
    "报警{n}、25040，编码器信号丢失",
    "Alarm {n} servo overload on Y axis after tool change",
    "S01 0052 报警，Z轴抱闸异常",
    "error 8B40-0001 TNC 控制器重启后出现",
    "spindle vibration at 8000 rpm, ALM 414 intermittent",
    "鍐峰嵈娉?不工作，报警 PS0010",
    "coolant pump trips, donâ€™t restart until checked",
    "锟斤拷锟斤拷 换刀卡刀",
    "润滑油压力低，报警 1{n:03d}，2024-03-15 10:30 发生",
]
ACTIONS = [
    "更换X轴放大器风扇（料号 A06B-6117-H105），复位后正常",
    "检查参数1825、1826，恢复出厂设置后试运行 2 小时无报警",
    "Replaced encoder cable P/N 6FC5370-8AA30-0AA0, verified MD32200 unchanged",
    "清理冷却液过滤网，更换冷却泵 S3000 试转正常",
    "Re-seated the amplifier connector and cleared the alarm",
]
REMARKS = [
    "联系人：张伟，电话13812345678",
    "报修人 王工 0755-12345678",
    "Contact: John Smith (555) 123-4567, john.smith@example.com",
    "操作员李强反映夜班频繁出现",
    "signed by J. Doe",
    "",
    "同上",
]
TECHS = ["张伟", "李强", "王建国", "John Smith", "Maria Garcia", "刘洋、陈静", None]


def build(rows: int, seed: int = 7) -> pl.DataFrame:
    rng = random.Random(seed)
    cols: dict[str, list] = {k: [] for k in INGESTED_SCHEMA}
    for i in range(rows):
        n = rng.randrange(100, 1000)
        cols["record_id"].append(f"r{i:08d}")
        cols["source_kind"].append("workorder")
        cols["source_file"].append("bench.csv")
        cols["source_row"].append(i + 2)
        cols["order_id"].append(f"WO{20240000 + i}")
        cols["asset"].append(f"VMC-{rng.randrange(1, 40):02d}")
        cols["machine_model"].append(rng.choice(MODELS))
        cols["reported_at"].append(f"2024-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}")
        cols["symptom"].append(rng.choice(SYMPTOMS).format(n=n) + f" #{rng.randrange(50)}")
        cols["cause"].append(rng.choice(["编码器线缆破损", "fan clogged with oil mist", None]))
        cols["action"].append(rng.choice(ACTIONS))
        cols["prevention"].append(
            rng.choice(["每月清理风扇滤网", "check cable routing weekly", None])
        )
        cols["technician"].append(rng.choice(TECHS))
        cols["status"].append(rng.choice(["已完成", "closed", "处理中"]))
        cols["remarks"].append(rng.choice(REMARKS) or None)
    return pl.DataFrame(cols, schema=INGESTED_SCHEMA)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    df = build(args.rows)
    cfg = NormalizeConfig()
    times, cpu = [], []
    for _ in range(args.repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = normalize(df, cfg)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    best = min(times)
    print(f"rows={args.rows} best={best:.2f}s rows/s={args.rows / best:,.0f}")
    print(f"wall={', '.join(f'{t:.2f}s' for t in times)} cpu={', '.join(f'{t:.2f}s' for t in cpu)}")
    print(f"counters={result.counters}")


if __name__ == "__main__":
    main()
