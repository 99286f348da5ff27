"""The knowledge-base extractor over document blocks, one test per layout.

Blocks are written by hand as `schemas.documents.DOCUMENT_BLOCK_SCHEMA` describes them, from
the layouts vendors document: the FANUC maintenance manual's alarm list (报警号 | 报警内容 |
原因 | 处理), a SINUMERIK alarm table (Alarm | Explanation | Reaction | Remedy, the alarm
number and text in one cell), a Mitsubishi alarm table with class + detail numbers and ranges,
the Heidenhain TNC error list (error number, then Cause of error / Error correction), a Chinese
controller's labelled alarm guide, a Haas alarm list with the number in the second column, a
servo drive's alarm table given without a header row, and tables that hold no codes at all.
Each fixture lists the codes a reader counts in it (`EXPECTED`).
"""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.ingest.documents.blocks import block_frame
from pipeline.ingest.documents.markdown import markdown_blocks
from pipeline.kb.extract import extract_fault_tables, fault_entries
from pipeline.kb.fault_codes import merge_knowledge_base
from pipeline.kb.tables import header_field
from schemas.config import PipelineConfig
from schemas.documents import BLOCK_KINDS, DOCUMENT_BLOCK_SCHEMA
from schemas.manuals import FAULT_CODE_SCHEMA, ManualsConfig, ManualSource

CFG = ManualsConfig()


def document(name: str, *blocks: dict) -> pl.DataFrame:
    """A document's blocks: each dict gives kind, text or cells, and optionally heading_path,
    header_rows, row (the block's first line), row_lines (a table's: each row's line) and
    page."""
    rows = []
    for i, b in enumerate(blocks):
        cells = b.get("cells")
        text = b.get("text") or "\n".join(" | ".join(c) for c in cells or [])
        rows.append(
            {
                "record_id": f"{name}:{i}",
                "source_kind": "manual",
                "source_file": name,
                "source_row": b.get("row", 10 * i + 1),
                "block": i,
                "kind": b["kind"],
                "heading_path": b.get("path", []),
                "level": b.get("level", 0),
                "text": text,
                "cells": cells,
                "header_rows": b.get("header_rows", 0),
                "page": b.get("page"),
                "row_lines": b.get("row_lines"),
            }
        )
    return pl.DataFrame(rows, schema=DOCUMENT_BLOCK_SCHEMA)


def heading(text: str, path: list[str], level: int = 1) -> dict:
    return {"kind": "heading", "text": text, "path": path, "level": level}


def table(cells: list[list[str]], path: list[str], header_rows: int = 1, **kw) -> dict:
    return {"kind": "table", "cells": cells, "path": path, "header_rows": header_rows, **kw}


def para(text: str, path: list[str]) -> dict:
    return {"kind": "paragraph", "text": text, "path": path}


def labelled(pairs: list[list[str]], path: list[str]) -> dict:
    text = "\n".join(f"{label}：{value}" for label, value in pairs)
    return {"kind": "labelled", "cells": pairs, "text": text, "path": path}


def items(text: str, path: list[str]) -> dict:
    return {"kind": "list_item", "text": text, "path": path, "level": 1}


FANUC_PATH = ["FANUC Series 0i-MODEL F 维修说明书", "附录 A 报警一览表", "A.2 伺服报警（SV 报警）"]
FANUC = document(
    "fanuc_0if_maintenance.pdf",
    heading("A.2 伺服报警（SV 报警）", FANUC_PATH, 2),
    table(
        [
            ["报警号", "报警内容", "原因", "处理"],
            ["伺服报警", "伺服报警", "伺服报警", "伺服报警"],  # caption row, merged across
            ["SV0401", "V 就绪信号关闭", "伺服放大器的就绪信号（VRDY）断开", "检查 MCC 回路"],
            ["", "", "放大器控制电源电压不足", "确认控制电源 DC24V"],  # wrapped onto next line
            ["SV0404", "V 就绪信号开启", "VRDY 在 PRDY 关闭时仍为开", "更换伺服放大器"],
            ["SV0410 / SV0411", "停止时/移动中误差过大", "位置偏差超过参数 No.1829 的设定",
             "检查机械负载；确认参数设定"],
            ["SV0436", "软件热保护", "电机电流长时间超过额定值", "降低切削负荷"],
            ["SV0436", "软件热保护", "制动器未释放", "检查制动器电源"],  # merged code cell
        ],
        FANUC_PATH,
        page=412,
        row=11,
        row_lines=[11, 13, 14, 15, 16, 17, 18, 19],  # PDF: the header line, a ruler, a row a line
    ),
)  # fmt: skip

SINUMERIK_PATH = ["SINUMERIK 840D sl Diagnostics Manual", "2 NCK alarms"]
SINUMERIK = document(
    "sinumerik_840dsl_diag.html",
    heading("2 NCK alarms", SINUMERIK_PATH),
    table(
        [
            ["Alarm", "Explanation", "Reaction", "Remedy"],
            ["25000 Axis %1 hardware fault of active encoder",
             "The signals of the currently active position encoder are missing or faulty.",
             "NC not ready. Mode group not ready. Alarm display.",
             "Check the measuring circuit connectors for correct contacting."],
            ["25050 Axis %1 contour monitoring",
             "The axial control loop monitors the contour deviation.",
             "NC not ready. Axes of this channel are reprogrammed.",
             "Check the servo gain factor and the dynamic response of the speed controller."],
            ["10720 Channel %1 block %2 axis %3 software limit switch minus",
             "The programmed path violates the currently valid software limit switch.",
             "Correction block is reorganized. Interface signals are set.",
             "Check the part program and the work offsets."],
            ["21612 Channel %1 axis %2 VDI signal 'controller enable' reset during motion",
             "The interface signal controller enable was reset while the axis was moving.",
             "NC start disable in this channel. NC stop.",
             "Set the controller enable signal again before the axis is moved."],
        ],
        SINUMERIK_PATH,
    ),
)  # fmt: skip

MITSUBISHI_PATH = ["MITSUBISHI CNC M800/M80 Series Alarm/Parameter Manual", "Operation errors"]
MITSUBISHI = document(
    "mitsubishi_m800_alarms.md",
    heading("Operation errors", MITSUBISHI_PATH),
    table(
        [  # the parser did not mark the header row: the first row names the columns
            ["Alarm No.", "Message", "Details", "Remedy"],
            ["M01 0001", "Dog overrun", "The near-point dog was overrun on reference position "
             "return.", "Increase the length of the near-point dog."],
            ["M01 0003", "Reference position return direction illegal",
             "The axis was moved opposite to the reference position return direction.",
             "Move the axis in the correct direction."],
            ["S02 2219～2221", "Initial parameter error",
             "The servo parameter shown as the detail number is out of range.",
             "Set the servo parameter within the setting range."],
            ["Z70 0001", "Absolute position data lost",
             "The absolute position backup battery voltage dropped.",
             "Replace the battery and establish the absolute position again."],
        ],
        MITSUBISHI_PATH,
        header_rows=0,
        row=30,
        row_lines=[30, 32, 33, 34, 36],  # Markdown: the header, the ruler, a row wrapped
    ),
)  # fmt: skip

HEIDENHAIN_PATH = ["HEIDENHAIN TNC 640 Error messages", "NC error list"]
HEIDENHAIN = document(
    "heidenhain_tnc640_errors.html",
    heading("NC error list", HEIDENHAIN_PATH),
    {
        "kind": "definition",
        "path": HEIDENHAIN_PATH,
        "cells": [
            ["8040-0001", "Following error too large in axis %1\nCause of error: The following "
             "error exceeded the limit in MP_maxFollowingError.\nError correction: Reduce the "
             "feed rate; check the axis mechanics for stiffness."],
            ["8B40-0002", "Encoder signal amplitude too small. Cause of error: The encoder is "
             "soiled or its cable is damaged. Error correction: Clean the scale; replace the "
             "encoder cable."],
            ["1030-0004", "Tool axis not permitted\nCause of error: The tool call names an axis "
             "that is not a tool axis.\nError correction: Correct the TOOL CALL block."],
        ],
    },
)  # fmt: skip

GSK_PATH = ["GSK980TDi 车床CNC 使用手册", "第三章 报警处理"]
GSK = document(
    "gsk980tdi_alarms.txt",
    heading("第三章 报警处理", GSK_PATH),
    labelled([["原因", "说明书前言中的通用注意事项"]], GSK_PATH),  # follows no code
    para("报警 1010 X 轴正向硬限位超程", GSK_PATH),
    labelled([["原因", "X 轴正向超程开关动作；超程开关接线断开"]], GSK_PATH),
    labelled([["处理", ""]], GSK_PATH),
    items("1. 手动方式下反向移出限位", GSK_PATH),
    items("2. 检查超程开关及其接线", GSK_PATH),
    para("报警 1011 X 轴负向硬限位超程", GSK_PATH),
    labelled([["原因", "X 轴负向超程开关动作"], ["处理", "手动方式下正向移出限位"]], GSK_PATH),
    heading("3.2 驱动报警", [*GSK_PATH, "3.2 驱动报警"], 2),
    labelled(
        [["报警号", "2001"], ["报警信息", "X 轴驱动器报警"], ["原因", "驱动器过流或过载"],
         ["处理方法", "查看驱动器报警号，按驱动器说明书处理"]],
        [*GSK_PATH, "3.2 驱动报警"],
    ),
    para("本章未列出的报警请联系广州数控售后。", [*GSK_PATH, "3.2 驱动报警"]),
)  # fmt: skip

HAAS_PATH = ["Haas Mill Operator's Manual", "Alarms"]
HAAS = document(
    "haas_mill_alarms.html",
    heading("Alarms", HAAS_PATH),
    table(
        [
            ["Category", "Alarm", "Title", "Description"],
            ["Servo", "102", "SERVOS OFF", "Indicates that the servo motors are off, the tool "
             "changer is disabled, and the coolant pump is off."],
            ["Servo", "103", "X SERVO ERROR TOO LARGE", "Too much load or speed on the X-axis "
             "motor."],
            ["Servo", "108", "X SERVO OVERLOAD", "Excessive load on the X-axis motor."],
            ["Power", "160", "LOW VOLTAGE", "The line voltage to the control is too low."],
            ["Tool changer", "115", "TURRET ROTATE FAULT", "Tool changer motor not in "
             "position."],
        ],
        HAAS_PATH,
    ),
)  # fmt: skip

NO_CODES_PATH = ["VMC850 立式加工中心 使用说明书", "6 维护保养"]
NO_CODES = document(
    "vmc850_maintenance.md",
    heading("6 维护保养", NO_CODES_PATH),
    table(
        [["检查项目", "周期", "方法"],
         ["导轨润滑油位", "每班", "目视油窗，低于下限时加注 32# 导轨油"],
         ["主轴皮带", "每 3 个月", "检查张紧力"]],
        NO_CODES_PATH,
    ),
    table(
        [["参数号", "含义", "设定值"], ["1815", "绝对位置检测", "00110001"],
         ["1825", "伺服环增益", "3000"], ["1828", "移动中位置偏差极限", "20000"]],
        NO_CODES_PATH,
    ),
    table(
        [["G00", "快速定位"], ["G01", "直线插补"], ["G02", "顺时针圆弧插补"]],
        NO_CODES_PATH,
        header_rows=0,
    ),
    para("2024 年起每班检查润滑油位，1500 rpm 以上时注意主轴温升。", NO_CODES_PATH),
)  # fmt: skip

SERVO_PATH = ["DS2 系列交流伺服驱动器 用户手册", "8 故障诊断"]
SERVO = document(
    "ds2_servo_manual.pdf",
    heading("8 故障诊断", SERVO_PATH),
    table(
        [
            ["AL-01", "过电流", "检查电机动力线是否短路；更换驱动器"],
            ["AL-02", "主回路过电压", "检查输入电源电压；加装制动电阻"],
            ["AL-05", "编码器断线", "检查编码器电缆及插头"],
            ["AL-09", "位置偏差过大", "调整位置环增益；检查机械是否卡滞"],
        ],
        SERVO_PATH,
        header_rows=0,
        row=41,
        row_lines=[41, 42, 44, 45],  # an aligned text grid, AL-02 wrapped over two lines
    ),
)
SERVO_CFG = ManualsConfig(
    sources=[ManualSource(pattern="**/ds2_*.pdf", format="pdf", family="DS2")]
)

GERMAN_PATH = ["SINUMERIK 828D Diagnosehandbuch", "PLC-Anwenderalarme"]
GERMAN = document(
    "sinumerik_828d_diagnose_de.md",
    table(
        [
            ["Fehlernummer", "Meldetext", "Ursache", "Abhilfe"],
            ["700016", "Kühlmitteldruck zu niedrig",
             "Kühlmittelpumpe defekt oder Filter verstopft", "Filter reinigen; Pumpe prüfen"],
            ["700017", "Hydraulikdruck fehlt", "Druckschalter SP1 nicht betätigt",
             "Hydraulikaggregat einschalten; Druckschalter prüfen"],
        ],
        GERMAN_PATH,
    ),
)  # fmt: skip

PROSE_PATH = ["Tool changer alarms (machine builder, FANUC 0i-MF)"]
PROSE = document(
    "atc_alarms.md",
    heading("Tool changer alarms (machine builder, FANUC 0i-MF)", PROSE_PATH),
    para("**EX2201 TOOL CLAMP PRESSURE LOW**", PROSE_PATH),
    para("The clamp pressure switch did not close within 2 s after M06. This is caused by low "
         "air supply pressure or a leaking clamp cylinder.", PROSE_PATH),
    para("Check the air supply (0.5 MPa minimum). Replace the clamp cylinder seals if the "
         "pressure drops.", PROSE_PATH),
    heading("EX2210 ATC ARM OVERTRAVEL", [*PROSE_PATH, "EX2210 ATC ARM OVERTRAVEL"], 2),
    para("The ATC arm passed its end position because the cam follower is worn.\nReplace the "
         "cam follower and re-teach the arm origin.", [*PROSE_PATH, "EX2210 ATC ARM OVERTRAVEL"]),
    heading("Maintenance", [*PROSE_PATH, "Maintenance"], 2),
    para("Prevention for alarm EX2201: Drain the air filter water trap every week.",
         [*PROSE_PATH, "Maintenance"]),
    para("The magazine holds 24 tools; tool 1500 is the probe.", [*PROSE_PATH, "Maintenance"]),
)  # fmt: skip

EXPECTED = {
    "fanuc_0if_maintenance.pdf": {
        "FANUC:SV0401", "FANUC:SV0404", "FANUC:SV0410", "FANUC:SV0411", "FANUC:SV0436",
    },
    "sinumerik_840dsl_diag.html": {
        "SINUMERIK:25000", "SINUMERIK:25050", "SINUMERIK:10720", "SINUMERIK:21612",
    },
    "mitsubishi_m800_alarms.md": {
        "MITSUBISHI:M01-0001", "MITSUBISHI:M01-0003", "MITSUBISHI:S02-2219",
        "MITSUBISHI:S02-2220", "MITSUBISHI:S02-2221", "MITSUBISHI:Z70-0001",
    },
    "heidenhain_tnc640_errors.html": {
        "HEIDENHAIN:8040-0001", "HEIDENHAIN:8B40-0002", "HEIDENHAIN:1030-0004",
    },
    "gsk980tdi_alarms.txt": {"GSK:1010", "GSK:1011", "GSK:2001"},
    "haas_mill_alarms.html": {"HAAS:102", "HAAS:103", "HAAS:108", "HAAS:160", "HAAS:115"},
    "vmc850_maintenance.md": set(),
    "ds2_servo_manual.pdf": {"DS2:AL-01", "DS2:AL-02", "DS2:AL-05", "DS2:AL-09"},
    "sinumerik_828d_diagnose_de.md": {"SINUMERIK:700016", "SINUMERIK:700017"},
    "atc_alarms.md": {"FANUC:EX2201", "FANUC:EX2210"},  # EX2201 twice: the prevention note
}  # fmt: skip
DOCUMENTS = [FANUC, SINUMERIK, MITSUBISHI, HEIDENHAIN, GSK, HAAS, NO_CODES, SERVO, GERMAN, PROSE]


def entry(frame: pl.DataFrame, code: str) -> dict:
    rows = frame.filter(pl.col("code") == code)
    assert rows.height == 1, rows
    return rows.row(0, named=True)


def test_fanuc_alarm_list_table() -> None:
    result = fault_entries(FANUC, CFG)
    kb = result.kept
    assert kb.schema == pl.Schema(FAULT_CODE_SCHEMA)
    assert set(kb["code"]) == EXPECTED["fanuc_0if_maintenance.pdf"]
    sv0401 = entry(kb, "FANUC:SV0401")
    assert sv0401["message"] == "V 就绪信号关闭"
    assert sv0401["causes"] == ["伺服放大器的就绪信号（VRDY）断开", "放大器控制电源电压不足"]
    assert sv0401["remedies"] == ["检查 MCC 回路", "确认控制电源 DC24V"]
    assert sv0401["language"] == "zh" and sv0401["source_kind"] == "fault_table"
    # each entry at its row's line: a row continued on the next (wrapped, merged code cell)
    # at its first; both codes of a combined cell at their row's
    rows = dict(zip(kb["code"], kb["source_row"], strict=True))
    assert rows == {
        "FANUC:SV0401": 14, "FANUC:SV0404": 16, "FANUC:SV0410": 17, "FANUC:SV0411": 17,
        "FANUC:SV0436": 18,
    }  # fmt: skip
    assert sv0401["source"] == " > ".join(["fanuc_0if_maintenance.pdf", *FANUC_PATH])
    assert entry(kb, "FANUC:SV0411")["remedies"] == ["检查机械负载", "确认参数设定"]
    assert entry(kb, "FANUC:SV0436")["causes"] == ["电机电流长时间超过额定值", "制动器未释放"]
    assert result.counters["rejected"] == 0
    assert result.counters["fault_tables"] == result.counters["tables"] == 1


def test_sinumerik_alarm_table_with_number_and_text_in_one_cell() -> None:
    kb = fault_entries(SINUMERIK, CFG).kept
    assert set(kb["code"]) == EXPECTED["sinumerik_840dsl_diag.html"]
    encoder = entry(kb, "SINUMERIK:25000")
    assert encoder["message"] == "Axis %1 hardware fault of active encoder"
    assert encoder["description"].startswith("The signals of the currently active")
    assert encoder["effect"] == "NC not ready. Mode group not ready. Alarm display."
    assert encoder["remedies"] == ["Check the measuring circuit connectors for correct contacting."]
    assert encoder["language"] == "en"


def test_mitsubishi_class_and_detail_numbers_with_a_range_and_an_unmarked_header() -> None:
    result = fault_entries(MITSUBISHI, CFG)
    kb = result.kept
    assert set(kb["code"]) == EXPECTED["mitsubishi_m800_alarms.md"]
    params = kb.filter(pl.col("code").str.starts_with("MITSUBISHI:S02"))
    assert params["message"].to_list() == ["Initial parameter error"] * 3
    assert params["record_id"].n_unique() == 3
    # the first row was taken for the header: the entries' lines are those of the rows after
    assert dict(zip(kb["code"], kb["source_row"], strict=True)) == {
        "MITSUBISHI:M01-0001": 32, "MITSUBISHI:M01-0003": 33, "MITSUBISHI:S02-2219": 34,
        "MITSUBISHI:S02-2220": 34, "MITSUBISHI:S02-2221": 34, "MITSUBISHI:Z70-0001": 36,
    }  # fmt: skip
    dog = entry(kb, "MITSUBISHI:M01-0001")
    assert dog["description"].startswith("The near-point dog was overrun")
    assert dog["remedies"] == ["Increase the length of the near-point dog."]


def test_heidenhain_error_definition_list() -> None:
    result = fault_entries(HEIDENHAIN, CFG)
    kb = result.kept
    assert set(kb["code"]) == EXPECTED["heidenhain_tnc640_errors.html"]
    following = entry(kb, "HEIDENHAIN:8040-0001")  # a digit-only number stays one code
    assert following["message"] == "Following error too large in axis %1"
    assert following["causes"] == [
        "The following error exceeded the limit in MP_maxFollowingError."
    ]
    assert following["remedies"] == [
        "Reduce the feed rate",
        "check the axis mechanics for stiffness.",
    ]
    inline = entry(kb, "HEIDENHAIN:8B40-0002")  # labels inside one line of text
    assert inline["message"] == "Encoder signal amplitude too small."
    assert inline["causes"] == ["The encoder is soiled or its cable is damaged."]
    assert inline["remedies"] == ["Clean the scale", "replace the encoder cable."]
    assert result.counters["entries_definition"] == 3


def test_chinese_labelled_alarm_guide() -> None:
    result = fault_entries(GSK, CFG)
    kb = result.kept
    assert set(kb["code"]) == EXPECTED["gsk980tdi_alarms.txt"]  # family from the title
    limit = entry(kb, "GSK:1010")
    assert limit["message"] == "X 轴正向硬限位超程"
    assert limit["causes"] == ["X 轴正向超程开关动作", "超程开关接线断开"]
    assert limit["remedies"] == ["手动方式下反向移出限位", "检查超程开关及其接线"]
    assert limit["source_row"] == 21  # the paragraph naming the code (block 2)
    assert entry(kb, "GSK:1011")["remedies"] == ["手动方式下正向移出限位"]
    drive = entry(kb, "GSK:2001")
    assert drive["message"] == "X 轴驱动器报警"
    assert drive["remedies"] == ["查看驱动器报警号，按驱动器说明书处理"]  # not the closing note
    assert result.counters["labelled_without_code"] == 1
    assert result.counters["entries_paragraph"] == 2
    assert result.counters["entries_labelled"] == 1


def test_haas_alarm_list_with_the_number_in_the_second_column() -> None:
    kb = fault_entries(HAAS, CFG).kept
    assert set(kb["code"]) == EXPECTED["haas_mill_alarms.html"]
    overload = entry(kb, "HAAS:108")
    assert overload["message"] == "X SERVO OVERLOAD"
    assert overload["description"] == "Excessive load on the X-axis motor."
    assert "Servo" not in (overload["message"], overload["description"])
    # blocks given without row lines (written by hand): every entry at the table's row
    assert set(kb["source_row"]) == {11}


def test_tables_without_a_code_column_give_no_entries() -> None:
    result = fault_entries(NO_CODES, CFG)
    assert result.kept.height == 0 and result.rejected.height == 0
    assert result.counters["tables"] == 3
    assert result.counters["tables_without_code_column"] == 3
    assert result.counters["fault_tables"] == 0


def test_headerless_table_whose_column_is_all_codes_takes_the_configured_family() -> None:
    result = fault_entries(SERVO, SERVO_CFG)
    kb = result.kept
    assert set(kb["code"]) == EXPECTED["ds2_servo_manual.pdf"]
    overcurrent = entry(kb, "DS2:AL-01")
    assert overcurrent["message"] == "过电流"
    assert overcurrent["remedies"] == ["检查电机动力线是否短路", "更换驱动器"]  # by content
    assert kb.sort("code")["source_row"].to_list() == [41, 42, 44, 45]  # no header row
    unconfigured = fault_entries(SERVO, CFG).kept  # nothing names the controller
    assert set(unconfigured["code"]) == {c.replace("DS2", "UNKNOWN") for c in kb["code"]}


def test_recall_and_code_precision_over_all_layouts() -> None:
    blocks = pl.concat(DOCUMENTS)
    result = fault_entries(blocks, SERVO_CFG)
    found = set(zip(result.kept["source_file"], result.kept["code"], strict=True))
    expected = {(f, c) for f, codes in EXPECTED.items() for c in codes}
    assert len(expected) == 34  # counted by hand over the fixtures
    recall = len(found & expected) / len(expected)
    precision = len(found & expected) / len(found)
    assert recall >= 0.95, sorted(expected - found)
    assert precision == 1.0, sorted(found - expected)
    assert result.kept["record_id"].n_unique() == result.kept.height
    again = fault_entries(blocks.sample(fraction=1.0, shuffle=True, seed=1), SERVO_CFG)
    assert again.kept["record_id"].to_list() == result.kept["record_id"].to_list()
    counters = result.counters
    by_kind = {k: counters[f"entries_{k}"] for k in BLOCK_KINDS}
    assert by_kind == {"heading": 1, "paragraph": 4, "list_item": 0, "table": 26,
                       "definition": 3, "labelled": 1}  # fmt: skip
    assert counters["entries"] == counters["read"] == sum(by_kind.values()) == 35


def test_german_alarm_table() -> None:
    kb = fault_entries(GERMAN, CFG).kept
    assert set(kb["code"]) == EXPECTED["sinumerik_828d_diagnose_de.md"]
    coolant = entry(kb, "SINUMERIK:700016")
    assert coolant["message"] == "Kühlmitteldruck zu niedrig"
    assert coolant["causes"] == ["Kühlmittelpumpe defekt oder Filter verstopft"]
    assert coolant["remedies"] == ["Filter reinigen", "Pumpe prüfen"]


def test_codes_in_bold_and_in_headings_with_the_prose_that_follows() -> None:
    result = fault_entries(PROSE, CFG)
    kb = result.kept
    assert kb["code"].to_list() == ["FANUC:EX2201", "FANUC:EX2210", "FANUC:EX2201"]
    clamp = kb.row(0, named=True)
    assert clamp["message"] == "TOOL CLAMP PRESSURE LOW"
    assert clamp["description"].startswith("The clamp pressure switch did not close")
    assert clamp["causes"] == [
        "This is caused by low air supply pressure or a leaking clamp cylinder."
    ]
    assert clamp["remedies"] == [
        "Check the air supply (0.5 MPa minimum).",
        "Replace the clamp cylinder seals if the pressure drops.",
    ]
    arm = entry(kb, "FANUC:EX2210")
    assert arm["causes"] and "cam follower is worn" in arm["causes"][0]
    assert arm["remedies"][0].startswith("Replace the cam follower")
    note = kb.row(2, named=True)
    assert note["prevention"] == "Drain the air filter water trap every week."
    assert result.counters["entries_heading"] == 1
    merged = merge_knowledge_base(kb).kept  # the note joins the entry it names
    assert entry(merged, "FANUC:EX2201")["prevention"] == note["prevention"]


def test_symptom_table_is_keyed_by_symptom_and_impossible_ranges_are_rejected() -> None:
    path = ["Lathe troubleshooting guide"]
    doc = document(
        "lathe_guide.md",
        table(
            [["序号", "故障现象", "故障原因", "排除方法"],
             ["1", "主轴异响", "轴承磨损；皮带松动", "更换轴承；张紧皮带"],
             ["2", "刀架不能锁紧", "锁紧电磁阀损坏", "更换电磁阀"]],
            path,
        ),
        table([["报警号", "报警内容", "处理"], ["SV0001~SV9999", "全部", "无"]], path),
    )  # fmt: skip
    result = fault_entries(doc, CFG)
    assert result.kept["symptom"].to_list() == ["主轴异响", "刀架不能锁紧"]
    assert result.kept["code"].null_count() == 2
    assert result.kept.row(0, named=True)["causes"] == ["轴承磨损", "皮带松动"]
    assert result.rejected["reason"].to_list() == ["bad_code_range"]
    assert result.counters["fault_tables"] == 2


def test_a_labelled_item_whose_label_is_the_code() -> None:
    path = ["KND K1000MC 报警说明"]
    doc = document(
        "knd_alarms.txt",
        labelled([["ALM401", "X 轴伺服未准备好"], ["原因", "伺服驱动器未上电"]], path),
    )
    kb = fault_entries(doc, CFG).kept
    assert kb["code"].to_list() == ["KND:ALM401"]
    assert kb["message"].to_list() == ["X 轴伺服未准备好"]


def test_stage_function_reads_the_run_configuration() -> None:
    cfg = PipelineConfig().model_copy(update={"manuals": SERVO_CFG})
    result = extract_fault_tables(SERVO, cfg)
    assert set(result.kept["code"]) == EXPECTED["ds2_servo_manual.pdf"]


@pytest.mark.parametrize(
    ("cell", "field"),
    [
        ("报警号", "code"),
        ("报警号 Alarm No.", "code"),
        ("Fehlernummer", "code"),
        ("Alarm class", "_other"),
        ("Abhilfe", "remedy"),
        ("Cause of error", "cause"),
        ("参数号", "_other"),
        ("", None),
    ],
)
def test_header_synonyms(cell: str, field: str | None) -> None:
    assert header_field(cell) == field


def test_entries_of_a_parsed_table_point_at_their_rows_lines() -> None:
    """From the file to the knowledge base: a SINUMERIK alarm list in Markdown, one entry a
    row (25050's remedy wrapped with `<br>` stays on its row's line)."""
    text = (
        "# SINUMERIK 840D sl 诊断手册\n"
        "\n"
        "## NC 报警\n"
        "\n"
        "| 报警号 | 报警文本 | 处理 |\n"
        "| --- | --- | --- |\n"
        "| 25000 | 轴 %1 主动编码器硬件故障 | 检查编码器电缆 |\n"
        "| 25050 | 轴 %1 轮廓监控 | 检查 MD36400<br>降低加速度 |\n"
        "| 25201 | 轴 %1 驱动故障 | 检查驱动器报警 |\n"
    )
    blocks = block_frame(markdown_blocks(text), "sinumerik_alarms.md")
    kb = fault_entries(blocks, CFG).kept
    assert kb.select("code", "source_row").rows() == [
        ("SINUMERIK:25000", 7), ("SINUMERIK:25050", 8), ("SINUMERIK:25201", 9),
    ]  # fmt: skip


def test_field_sub_headings_under_a_code_heading() -> None:
    # A Chinese controller manual: the alarm a heading, its cause and remedy sub-headings.
    top = ["HNC-8 报警说明"]
    doc = document(
        "hnc8_alarms.html",
        heading("1001 主轴过热", [*top, "1001 主轴过热"], 2),
        heading("原因", [*top, "1001 主轴过热", "原因"], 3),
        para("主轴电机冷却风扇故障。", [*top, "1001 主轴过热", "原因"]),
        heading("处理方法", [*top, "1001 主轴过热", "处理方法"], 3),
        para("检查风扇并清洁散热片。", [*top, "1001 主轴过热", "处理方法"]),
        heading("处理方法", [*top, "处理方法"], 2),  # not below a code heading: ends it
        para("按复位键清除报警。", [*top, "处理方法"]),
    )
    kb = fault_entries(doc, CFG).kept
    assert kb.select("code", "message", "causes", "remedies").rows() == [
        ("HNC:1001", "主轴过热", ["主轴电机冷却风扇故障"], ["检查风扇并清洁散热片"])
    ]
