"""Records and helpers the dedup tests share."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.dedup.hashing import codepoints, shingle_counts, shingles_at

ZH = {
    "symptom": "加工中心主轴在3000转以上运转时出现明显异响，主轴箱温度半小时内升高到65度，"
    "加工表面出现振纹，操作工反映换刀后声音更大。",
    "cause": "拆检发现主轴前端角接触轴承滚道磨损，润滑脂干涸结块，预紧力下降导致径向跳动"
    "超过0.02毫米。",
    "action": "更换主轴前端一对角接触轴承，清洗轴承座并重新加注高速润滑脂，按规定扭矩调整"
    "预紧螺母，空运转两小时后温升正常。",
    "prevention": "每季度检测主轴温升和振动，每年更换一次主轴润滑脂，记录跳动值变化趋势。",
}
EN = {
    "symptom": "Spindle makes a grinding noise above 3000 rpm and the headstock reaches 65 C "
    "within thirty minutes; chatter marks appear on the finished bore.",
    "cause": "Front angular contact bearings worn, grease dried out, preload lost so radial "
    "runout exceeded 0.02 mm.",
    "action": "Replaced the front bearing pair, cleaned the housing, repacked with high speed "
    "grease and set the preload nut to the specified torque; two hour run-in was normal.",
    "prevention": "Check spindle temperature rise and vibration every quarter and regrease the "
    "spindle once a year.",
}
SERVO = {
    "symptom": "X轴移动时机床突然停机，系统显示伺服报警，复位后可以短时间运行但很快再次报警。",
    "cause": "X轴伺服电机编码器反馈线缆在拖链内被反复弯折，屏蔽层破损导致反馈信号中断。",
    "action": "更换X轴编码器反馈线缆并重新固定走线，检查接地，试运行八小时无报警。",
    "prevention": "定期检查拖链内线缆的磨损情况，发现外皮破损及时更换。",
}


def frame(*records: dict) -> pl.DataFrame:
    """Normalized-stage records; `records` give record_id, parts and alarm_codes."""
    rows = []
    for i, r in enumerate(records):
        rows.append(
            {
                "record_id": r["record_id"],
                "source_kind": "workorder",
                "source_file": "orders/2024.csv",
                "source_row": i + 2,
                "symptom": r.get("symptom"),
                "cause": r.get("cause"),
                "action": r.get("action"),
                "prevention": r.get("prevention"),
                "remarks": r.get("remarks"),
                "language": r.get("language", "zh"),
                "alarm_codes": r.get("alarm_codes", []),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "record_id": pl.String,
            "source_kind": pl.String,
            "source_file": pl.String,
            "source_row": pl.Int64,
            "symptom": pl.String,
            "cause": pl.String,
            "action": pl.String,
            "prevention": pl.String,
            "remarks": pl.String,
            "language": pl.String,
            "alarm_codes": pl.List(pl.String),
        },
    )


def rejects_of(result) -> dict[str, tuple[str, str]]:
    return {
        r["record_id"]: (r["reason"], r["duplicate_of"])
        for r in result.rejected.select("record_id", "reason", "duplicate_of").to_dicts()
    }


def shingle_hashes(texts: pl.Series, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Shingle hashes of already-normalized texts and per-text offsets into them: text i
    owns `hashes[offsets[i]:offsets[i+1]]`."""
    cps, starts, lengths = codepoints(texts, k - 1)
    counts = shingle_counts(lengths, k)
    return shingles_at(cps, starts, counts, k), np.concatenate(([0], np.cumsum(counts)))
