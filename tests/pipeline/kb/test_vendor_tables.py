"""Vendor fault-code tables as files, read with zero configuration.

Fixtures (tests/fixtures/vendor_tables/) follow the vendors' documented layouts, each with a
key, comment or title line above the header: a Yaskawa Sigma-7 SERVOPACK alarm list (CSV:
Alarm Number, Alarm Name, Cause, Confirmation, Remedy), a Delta ASDA-B3 alarm list (JSONL), an
Inovance SV660N fault table (YAML, causes as lists), a Syntec servo alarm table (nested zh_CN /
en JSON), a Panasonic MINAS A6 protective-function message file (code line, message, `$Cause` /
`$Remedy` blocks) and a Mitsubishi MELSERVO-J4 alarm list (`AL.16 Encoder ...` lines); a GSK
980TDi alarm table (XLSX, title row above the header) is built here with xlsxwriter. Expected
codes are counted by hand from the fixtures.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import xlsxwriter

from pipeline.funnels.refresh import Sources, refresh
from pipeline.ingest.sniff import sniff
from pipeline.kb.vendor_tables import read_fault_table, read_fault_tables
from schemas.config import PipelineConfig
from schemas.manuals import DOBOT_SERVO_TABLE, FAULT_CODE_SCHEMA, ManualsConfig

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vendor_tables"

EXPECTED = {
    "sigma7_servopack_alarms.csv": (
        "csv",
        ["YASKAWA:A.020", "YASKAWA:A.030", "YASKAWA:A.040", "YASKAWA:A.100", "YASKAWA:A.710",
         "YASKAWA:A.C90"],
    ),
    "asda_b3_alarms.jsonl": (
        "jsonl",
        ["DELTA:AL0001", "DELTA:AL0002", "DELTA:AL0003", "DELTA:AL0009"],  # AL001 -> AL0001
    ),
    "sv660n_faults.yaml": (
        "yaml",
        ["INOVANCE:ER.101", "INOVANCE:ER.201", "INOVANCE:ER.400", "INOVANCE:ER.740"],
    ),
    "syntec_servo_alarms.json": (
        "json",
        ["SYNTEC:MOT-0001", "SYNTEC:MOT-0012", "SYNTEC:MOT-0030"],
    ),
    "minas_a6_alarm_messages.txt": (
        "text",
        ["PANASONIC:ERR11.0", "PANASONIC:ERR12.0", "PANASONIC:ERR16.0", "PANASONIC:ERR21.0"],
    ),
    "mr_j4_alarm_list.txt": (
        "text",
        ["MITSUBISHI:AL.10", "MITSUBISHI:AL.12", "MITSUBISHI:AL.16", "MITSUBISHI:AL.1E",
         "MITSUBISHI:AL.20", "MITSUBISHI:AL.30", "MITSUBISHI:AL.50", "MITSUBISHI:AL.E6"],
    ),
}  # fmt: skip
LANGUAGES = {"syntec_servo_alarms.json": 2}

GSK_ROWS = [
    ("0414", "X轴驱动器报警", "驱动器过流或过载；编码器反馈异常",
     "检查驱动器报警代码；检查电机动力线"),
    ("0415", "X轴移动量超过最大速度", "指令速度超过最大速度", "检查参数 No.1420"),
    ("0420", "Z轴驱动器报警", "驱动器未准备好", "检查驱动器电源"),
    ("1001", "主轴报警", "主轴驱动器故障", "检查主轴驱动器"),
    ("2001", "润滑油液位低", "润滑油不足", "加注润滑油"),
]  # fmt: skip


def _gsk_workbook(path: Path) -> Path:
    book = xlsxwriter.Workbook(path)
    sheet = book.add_worksheet("报警一览")
    sheet.write_row(0, 0, ["GSK 980TDi 车床数控系统 报警一览表"])
    sheet.write_row(2, 0, ["报警号", "报警内容", "原因", "处理方法"])
    for i, row in enumerate(GSK_ROWS):
        sheet.write_row(3 + i, 0, row)
    book.close()
    return path


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_sniffed_and_every_code_read(name: str) -> None:
    layout, codes = EXPECTED[name]
    found = sniff(FIXTURES / name)
    assert (found.kind, found.layout) == ("fault_table", layout)
    result = read_fault_table(FIXTURES / name, FIXTURES, layout)
    kb = result.kept
    assert kb.schema == pl.Schema(FAULT_CODE_SCHEMA)
    assert set(kb["code"]) == set(codes)  # recall and precision 1.0
    assert kb.height == len(codes) * LANGUAGES.get(name, 1)
    assert result.counters["rejected"] == 0
    assert kb["message"].null_count() == 0
    assert (kb["source_file"] == name).all() and (kb["source_kind"] == "fault_table").all()


def test_csv_fields_and_line_numbers_below_the_key_line() -> None:
    kb = read_fault_table(FIXTURES / "sigma7_servopack_alarms.csv", FIXTURES, "csv").kept
    c90 = kb.filter(pl.col("code") == "YASKAWA:A.C90").row(0, named=True)
    assert c90["message"] == "Encoder Communications Error"
    assert c90["causes"] == [
        "Contact in the Encoder connector is faulty or the connector is not inserted correctly.",
        "The Encoder Cable is disconnected or short-circuited.",
    ]
    assert c90["remedies"][1] == "Replace the Encoder Cable."
    assert (c90["source_row"], c90["language"]) == (8, "en")  # key line 1, header line 2


def test_yaml_cause_lists_and_nested_languages() -> None:
    yaml_kb = read_fault_table(FIXTURES / "sv660n_faults.yaml", FIXTURES, "yaml").kept
    er201 = yaml_kb.filter(pl.col("code") == "INOVANCE:ER.201").row(0, named=True)
    assert (er201["message"], er201["causes"]) == ("过流2", ["输出 UVW 短路", "电机绕组烧坏"])
    assert er201["remedies"] == ["检查电机动力线连接", "更换电机"] and er201["language"] == "zh"
    nested = read_fault_table(FIXTURES / "syntec_servo_alarms.json", FIXTURES, "json").kept
    mot12 = nested.filter(pl.col("code") == "SYNTEC:MOT-0012").sort("language")
    assert mot12.select("language", "message", "remedies").rows() == [
        ("en", "Following error too large",
         ["Reduce the feedrate", "adjust the position loop gain"]),
        ("zh", "跟随误差过大", ["降低进给速度", "调整位置环增益"]),
    ]  # fmt: skip
    assert mot12["source_row"].to_list() == [2, 2]  # the entry's index in the array


def test_alarm_message_text_blocks() -> None:
    kb = read_fault_table(FIXTURES / "minas_a6_alarm_messages.txt", FIXTURES, "text").kept
    err16 = kb.filter(pl.col("code") == "PANASONIC:ERR16.0").row(0, named=True)
    assert err16["message"] == "Over-load protection"
    assert err16["causes"] == [
        "Torque command value has exceeded the overload level set in Pr5.12."
    ]
    assert err16["remedies"] == [
        "Check the torque waveform with the setup support software.",
        "Make the acceleration and deceleration time longer.",
    ]
    assert err16["source_row"] == 19  # the code line


def test_xlsx_code_table_with_a_title_row(tmp_path: Path) -> None:
    path = _gsk_workbook(tmp_path / "980TDi_报警.xlsx")
    assert sniff(path).reader == "fault_table:xlsx"
    result = read_fault_table(path, tmp_path, "xlsx")
    kb = result.kept
    assert sorted(kb["code"]) == [f"GSK:{row[0]}" for row in GSK_ROWS]
    first = kb.row(0, named=True)
    assert first["causes"] == ["驱动器过流或过载", "编码器反馈异常"]
    assert (first["source_row"], first["language"]) == (4, "zh")  # sheet row of 0414


def test_work_order_tables_stay_work_orders(tmp_path: Path) -> None:
    # An alarm code, a cause and an action, but also dates, machines and order numbers.
    orders = tmp_path / "维修记录.csv"
    orders.write_text(
        "工单号,设备编号,报修日期,报警号,原因,处理方法\n"
        "WO-1,VMC-03,2024-03-18,SV0401,MCC未吸合,更换接触器\n"
        "WO-2,VMC-04,2024-03-19,SV0436,负载过大,调整切削参数\n",
        encoding="utf-8",
    )
    dated = tmp_path / "alarms_with_dates.csv"
    dated.write_text(
        "Code,Message,Remedy,Logged\n"
        "SV0401,V READY OFF,Check MCC,2024-03-18 08:00\n"
        "SV0436,SOFT THERMAL,Reduce load,2024-03-19 09:30\n"
        "SV0410,EXCESS ERROR,Check axis,2024-03-20 10:00\n",
        encoding="utf-8",
    )
    no_code = tmp_path / "glossary.csv"
    no_code.write_text(
        "Term,Description,Remedy\nSpindle,The rotating shaft,Lubricate\n"
        "Turret,Tool holder,Clean\nChuck,Work holder,Check jaws\n",
        encoding="utf-8",
    )
    assert sniff(orders).reader == "workorder:csv"
    assert sniff(dated).reader == "workorder:csv"
    assert sniff(no_code).kind != "fault_table"


def test_per_language_columns_give_one_row_per_language(tmp_path: Path) -> None:
    path = tmp_path / "fanuc_alarms.csv"
    path.write_text(
        "Alarm No.;报警信息(中文);Message (EN);处理方法(中文);Remedy (EN)\n"
        "SV0401;V就绪信号关闭;V READY OFF;检查MCC;Check the MCC\n"
        "SV0410;停止时误差过大;EXCESS ERROR (STOP);检查位置增益;Check the position gain\n",
        encoding="utf-8",
    )
    assert sniff(path).reader == "fault_table:csv"
    kb = read_fault_table(path, tmp_path, "csv").kept.sort("code", "language")
    assert kb.select("code", "language", "message", "remedies").rows() == [
        ("FANUC:SV0401", "en", "V READY OFF", ["Check the MCC"]),
        ("FANUC:SV0401", "zh", "V就绪信号关闭", ["检查MCC"]),
        ("FANUC:SV0410", "en", "EXCESS ERROR (STOP)", ["Check the position gain"]),
        ("FANUC:SV0410", "zh", "停止时误差过大", ["检查位置增益"]),
    ]


def test_configured_mapping_wins_and_a_bad_file_is_one_reject(tmp_path: Path) -> None:
    table = tmp_path / "alarm_servo.json"
    table.write_text(
        json.dumps([{"id": 29569, "level": 1,
                     "en": {"description": "Encoder is abnormal", "cause": "", "solution": "x"},
                     "zh_CN": {"description": "编码器异常故障", "cause": "", "solution": "y"}}]),
        encoding="utf-8",
    )  # fmt: skip
    broken = tmp_path / "codes.yaml"
    broken.write_text("faults:\n  - code: E1\n    name: [unclosed\n", encoding="utf-8")
    files = [(table, "json"), (broken, "yaml")]
    mapped = ManualsConfig(vendor_tables=[DOBOT_SERVO_TABLE])
    configured = read_fault_tables(files, tmp_path, mapped)
    assert set(configured.kept["code"]) == {"DOBOT/SERVO:29569"}
    assert configured.counters["rejected_unreadable_table"] == 1
    assert "codes.yaml" in configured.rejected["detail"][0]
    default = read_fault_tables(files[:1], tmp_path, ManualsConfig(fault_table_family="CR5"))
    assert set(default.kept["code"]) == {"CR5:29569"}  # nothing in the file names a family


def test_dobot_table_through_refresh_with_zero_configuration(
    external: Path, tmp_path: Path
) -> None:
    folder = external / "dobot-servo-alarms"
    entries = json.loads((folder / "alarm_servo.json").read_text(encoding="utf-8"))
    published = refresh("refresh-corpus", Sources.everything(folder), tmp_path, PipelineConfig())
    inputs = {i.path: i.reader for i in published.manifest.inputs}
    assert inputs == {"alarm_servo.json": "fault_table:json"}
    kb = pl.read_parquet(published.path / "fault_codes" / "*.parquet")
    assert set(kb["code"]) == {f"DOBOT:{e['id']}" for e in entries}
    assert kb.height == 2 * len(entries)  # zh and en
    sft = list((published.path / "sft").rglob("*.parquet"))
    rows = pl.concat([pl.read_parquet(p) for p in sft]) if sft else pl.DataFrame()
    assert rows.height == 0 or "alarm_servo.json" not in set(rows["source_file"])
