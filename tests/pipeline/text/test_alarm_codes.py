"""Alarm codes in technician-typed free text: cues before and after, codes opening a line,
Mitsubishi detail numbers, SINAMICS faults, the asset -> controller table, and hard negatives.

The sentence files under data/ hold realistic work-order sentences with the codes a person
reads in them: `alarm_code_sentences.tsv` (written before the rules were extended) and
`alarm_code_heldback.tsv` (written after, never used to tune).
"""

from pathlib import Path

import polars as pl
import pytest

from pipeline.text.alarm_codes import (
    extract_alarm_codes,
    family_from_code,
    family_of,
    most_named_family,
)
from schemas.normalize import NormalizeConfig

DATA = Path(__file__).parents[1] / "data"
CFG = NormalizeConfig()


def codes(text: str, model: str | None = None, cfg: NormalizeConfig = CFG) -> list[str]:
    df = pl.DataFrame({"t": [text], "m": [model]}, schema={"t": pl.String, "m": pl.String})
    return df.select(extract_alarm_codes(pl.col("t"), pl.col("m"), cfg)).item().to_list()


@pytest.mark.parametrize(
    ("text", "model", "expected"),
    [
        ("机床报700023 主轴润滑压力低", "SINUMERIK 828D", ["SINUMERIK:700023"]),
        ("出现401号报警", "FANUC 0i-TC", ["FANUC:401"]),
        ("报108 X SERVO OVERLOAD", "Haas VF-2", ["HAAS:108"]),
        ("Z轴报10621软限位报警", "SINUMERIK 840D sl", ["SINUMERIK:10621"]),
        ("25201 Axis Z drive fault", "SINUMERIK 840D sl", ["SINUMERIK:25201"]),
        ("S02 伺服报警：PR 0031", "Mitsubishi M80", ["MITSUBISHI:S02-0031"]),
        ("M01 Operation error 0005", "Mitsubishi M70", ["MITSUBISHI:M01-0005"]),
        ("驱动报F07011 电机温度过高", "SINUMERIK 828D", ["SINAMICS:F07011"]),
        ("ALM401 VRDY OFF", "FANUC 0i-TC", ["FANUC:401"]),
        ("交接班记录：\n700105 液压站油温高\n已通知设备科", "SINUMERIK 828D", ["SINUMERIK:700105"]),
    ],
)
def test_codes_the_issue_names(text: str, model: str, expected: list[str]) -> None:
    assert codes(text, model) == expected


@pytest.mark.parametrize(
    ("text", "model"),
    [
        ("修改参数1825、1826后正常", "FANUC 0i-MF"),
        ("Changed parameter 1851 from 20 to 35", "FANUC 0i-MF"),
        ("MD32200 调整，SD43400 工作区域限制", "SINUMERIK 840D sl"),
        ("诊断号 0358 第5位为0", "FANUC 0i-MF"),
        ("Diagnosis 0310 bit 4 is 1", "FANUC 0i-MF"),
        ("X8.4 急停信号无输入，G8.4 为0", "FANUC 0i-MF"),
        ("Q2.3 不输出，DB2.DBX180.0 为1", "SINUMERIK 828D"),
        ("TNC 640 报错后重启", "Heidenhain TNC 640"),
        ("3000 rpm 时主轴异响", "FANUC 0i-MF"),
        ("1500 件后换刀", "FANUC 0i-MF"),
        ("2024 年度保养计划已完成", "FANUC 0i-MF"),
        ("M30 程序结束后不报警", "Mitsubishi M80"),
        ("F1200 进给时有振纹", "SINUMERIK 828D"),
        ("G01 Z-5. F12000 时异响", "SINUMERIK 828D"),
        ("进给F10000时X轴抖动", "SINUMERIK 828D"),
    ],
)
def test_hard_negatives(text: str, model: str) -> None:
    assert codes(text, model) == []


def test_a_model_number_before_a_cue_is_not_a_code() -> None:
    assert codes("主轴升速时TNC 640报错8B40", "Heidenhain TNC 640") == ["HEIDENHAIN:8B40"]
    assert codes("西门子828D 报警 25000") == ["SINUMERIK:25000"]


def test_mitsubishi_detail_needs_mitsubishi_context() -> None:
    assert codes("M30 后报警 1001", "FANUC 0i-MF") == ["FANUC:1001"]
    assert codes("S02 伺服报警：PR 0031", "FANUC 0i-MF") == []


def test_family_from_the_asset_controller_table() -> None:
    cfg = NormalizeConfig(asset_controllers={"VMC-*": "FANUC", "hmc*": "SINUMERIK 840D"})
    df = pl.DataFrame(
        {
            "t": ["报警 1010 门开", "报警 25000 编码器", "报警 1010", "报警 414"],
            "m": [None, None, None, "FANUC 0i-TD"],
            "a": ["VMC-07", "HMC630", "lathe 3", "HMC630"],
        }
    )
    found = df.select(extract_alarm_codes(pl.col("t"), pl.col("m"), cfg, pl.col("a")))
    assert found.to_series().to_list() == [
        ["FANUC:1010"],
        ["SINUMERIK:25000"],
        ["ALARM:1010"],
        ["FANUC:414"],  # the machine-model column wins over the asset table
    ]


def score(name: str) -> tuple[float, float, float]:
    """Precision, recall, F1 of the codes found against the expected codes of a file."""
    rows = [
        line.rstrip("\n").split("\t")
        for line in (DATA / name).read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    tp = fp = fn = 0
    for text, model, expected in rows:
        want = set() if expected == "-" else set(expected.split())
        got = set(codes(text, None if model == "-" else model))
        tp, fp, fn = tp + len(want & got), fp + len(got - want), fn + len(want - got)
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    return precision, recall, 2 * precision * recall / (precision + recall)


def test_sentence_set_scores() -> None:
    precision, recall, f1 = score("alarm_code_sentences.tsv")
    assert precision >= 0.95 and recall >= 0.9 and f1 >= 0.92, (precision, recall, f1)


def test_held_back_sentence_scores() -> None:
    precision, recall, f1 = score("alarm_code_heldback.tsv")
    assert precision >= 0.9 and recall >= 0.9 and f1 >= 0.9, (precision, recall, f1)


def test_fanuc_robot_codes_need_no_context() -> None:
    # a robot tending the machine: facility and number, as the teach pendant shows them
    assert codes("机器人报SRVO-050碰撞检测，复位后又报 SRVO-053", "R-30iB Plus") == [
        "FANUC_ROBOT:SRVO-050",
        "FANUC_ROBOT:SRVO-053",
    ]
    assert codes("PWD -067 edit not allowed, INTP-105 (MAIN, 12)") == [
        "FANUC_ROBOT:PWD-067",
        "FANUC_ROBOT:INTP-105",
    ]
    # model and tool numbers with a hyphen are no robot alarm
    assert codes("VMC-850 换刀 TOOL-100 后报 SV0401", "FANUC 0i-MF") == ["FANUC:SV0401"]


def test_fanuc_robot_family_from_model_and_code() -> None:
    df = pl.DataFrame({"m": ["FANUC R-30iB", "FANUC 30i-B", None], "c": ["SRVO-050", "SV401", "x"]})
    got = df.select(family_of(pl.col("m")), family_from_code(pl.col("c")).alias("c")).rows()
    assert got == [("FANUC_ROBOT", "FANUC_ROBOT"), ("FANUC", "FANUC"), (None, None)]


def test_most_named_family_counts_brands_models_and_chinese_controllers() -> None:
    texts = pl.DataFrame(
        {
            "text": [
                "FANUC 0i-MF 维修说明书：本机床亦可选配 SINUMERIK 828D。0i-F 报警一览",
                "GSK980TDi 车床CNC 使用手册（广州数控）",
                "Haas VF-2 operator's manual",
                "润滑油位每班检查",
            ]
        }
    )
    found = texts.select(most_named_family(pl.col("text"))).to_series().to_list()
    assert found == ["FANUC", "GSK", "HAAS", None]
