import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.kb.extract import fault_entries
from pipeline.kb.fault_codes import merge_knowledge_base, read_vendor_table
from schemas.manuals import (
    DOBOT_SERVO_TABLE,
    FAULT_CODE_SCHEMA,
    ManualsConfig,
    VendorFields,
    VendorTableSource,
)
from tests.pipeline.ingest.documents.support import read_blocks

REPO = Path(__file__).resolve().parents[3]
MANUALS = REPO / "sample_data" / "manuals"
DOBOT = REPO.parent / "shared" / "external" / "dobot-servo-alarms"


@pytest.fixture(scope="module")
def manual_codes() -> pl.DataFrame:
    result = fault_entries(read_blocks(MANUALS), ManualsConfig())
    assert result.counters["rejected"] == 0
    return result.kept


def test_alarm_tables_and_blocks_found_in_manuals(manual_codes: pl.DataFrame) -> None:
    kb = manual_codes
    assert kb.schema == pl.Schema(FAULT_CODE_SCHEMA)
    assert sorted(kb["code"]) == sorted(
        [
            # FANUC manual: Markdown table (4 rows) and two "code / 原因 / 处理" blocks
            *["FANUC:SV0401", "FANUC:SV0410", "FANUC:SV0436", "FANUC:DS0307"],
            *["FANUC:SP9001", "FANUC:SP9012"],
            # GBK text manual: "报警号：/信息：/原因：/处理：" blocks
            *["FANUC:EX1002", "FANUC:EX1005"],
            # SINUMERIK manual: table (5), PLC block, and a prose prevention note for 25000
            *["SINUMERIK:25000", "SINUMERIK:25050", "SINUMERIK:25201", "SINUMERIK:10720"],
            *["SINUMERIK:3000", "SINUMERIK:700016", "SINUMERIK:25000"],
        ]
    )
    sv0401 = kb.filter(pl.col("code") == "FANUC:SV0401").row(0, named=True)
    assert sv0401["message"] == "V就绪信号关闭"
    assert sv0401["causes"] == [
        "伺服放大器就绪信号（VRDY）断开",
        "急停解除后主接触器（MCC）未吸合",
        "放大器控制电源电压不足",
    ]
    assert sv0401["remedies"][0] == "检查 MCC 及其线圈回路"
    assert sv0401["language"] == "zh" and sv0401["source_kind"] == "fault_table"
    assert sv0401["source_row"] == 18  # the table row's line in the Markdown file
    assert sv0401["source"].endswith("2 伺服报警（SV 报警） > 2.1 报警一览")

    sp = kb.filter(pl.col("code") == "FANUC:SP9001").row(0, named=True)
    assert sp["message"] == "主轴电机过热（SSPA:01）"
    assert sp["prevention"].startswith("每月清洁主轴电机风扇滤网")
    ex = kb.filter(pl.col("code") == "FANUC:EX1002").row(0, named=True)
    assert (ex["message"], ex["source_file"]) == (
        "冷却液液位低 请补充冷却液",
        "VMC850_机床保养手册.txt",
    )
    assert ex["remedies"] == [
        "补充冷却液至液位计上限",
        "清理液位开关浮子和排屑器滤网",
        "检查管路有无泄漏",
    ]
    coolant = kb.filter(pl.col("code") == "SINUMERIK:700016").row(0, named=True)
    assert coolant["language"] == "en"
    assert coolant["causes"][0].startswith("The pressure switch of the coolant pump")


def test_same_code_from_two_places_merges(manual_codes: pl.DataFrame) -> None:
    result = merge_knowledge_base(manual_codes)
    assert result.counters["rejected_merged_duplicate_code"] == 1
    encoder = result.kept.filter(pl.col("code") == "SINUMERIK:25000").row(0, named=True)
    assert encoder["message"] == "Axis %1 hardware fault of active encoder"
    assert encoder["prevention"].startswith("inspect encoder cables in the cable chain")
    dup = result.rejected.row(0, named=True)
    assert dup["duplicate_of"] == encoder["record_id"]


@pytest.mark.skipif(not DOBOT.exists(), reason="../shared not present: Dobot alarm table")
def test_dobot_vendor_json_through_the_configured_mapping() -> None:
    # 88 entries (SOURCE.md; `python -c "import json;print(len(json.load(open(f))))"`) x 2 langs
    result = read_vendor_table(DOBOT / "alarm_servo.json", DOBOT_SERVO_TABLE, DOBOT)
    assert (result.counters["read"], result.counters["kept"]) == (176, 176)
    kb = result.kept
    encoder = kb.filter(pl.col("code") == "DOBOT/SERVO:29569").sort("language")
    assert encoder.select("language", "message", "remedies").rows() == [
        ("en", "Encoder is abnormal", [
            "Check whether the hardware is working properly, or contact technical support engineer"
        ]),
        ("zh", "编码器异常故障", ["检查硬件是否正常，或联系技术支持工程师"]),
    ]  # fmt: skip
    assert kb["causes"].list.len().sum() == 0  # `cause` is empty in this file
    entries = json.loads((DOBOT / "alarm_servo.json").read_text(encoding="utf-8"))
    index = next(i for i, e in enumerate(entries) if e["id"] == 29569)
    assert encoder["source_row"].to_list() == [index + 1, index + 1]


def test_vendor_csv_in_gbk_with_chinese_headers(tmp_path: Path) -> None:
    table = tmp_path / "gsk_980tdi_alarms.csv"
    table.write_bytes(
        (
            "报警号,报警内容,原因,处理方法\n"
            "0414,X轴驱动器报警,驱动器过流或过载；编码器反馈异常,检查驱动器报警代码；检查电机动力线\n"
            ",主轴报警,主轴驱动器故障,检查主轴驱动器\n"
            "0420,,,\n"
        ).encode("gbk")
    )
    source = VendorTableSource(
        pattern="*.csv",
        format="csv",
        family="GSK",
        code="报警号",
        languages={"zh": VendorFields(message="报警内容", cause="原因", remedy="处理方法")},
    )
    result = read_vendor_table(table, source, tmp_path)
    c = result.counters
    assert (c["read"], c["kept"], c["rejected_missing_code"], c["rejected_no_content"]) == (
        3,
        1,
        1,
        1,
    )
    row = result.kept.row(0, named=True)
    assert (row["code"], row["source_row"], row["language"]) == ("GSK:0414", 2, "zh")
    assert row["causes"] == ["驱动器过流或过载", "编码器反馈异常"]
    assert sorted(result.rejected["source_row"]) == [3, 4]
    assert result.rejected.filter(pl.col("reason") == "missing_code")["detail"][0] == (
        "gsk_980tdi_alarms.csv:3: no alarm code"
    )
