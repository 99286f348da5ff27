"""Knowledge-base rows from the manual layouts vendors and machine builders use, read as the
manual funnel reads them: a manual's document blocks through the block extractor.

Each fixture is written from how such a manual is laid out (FANUC/SINUMERIK alarm lists, a
machine builder's PLC user-alarm list, troubleshooting tables and numbered fault items, a
Haas-style alarm list in bold prose), not produced by our sample generator.
"""

from pathlib import Path

import polars as pl
import pytest

from pipeline.core.stage import StageResult
from pipeline.funnels.manuals import funnel, parse
from pipeline.ingest.documents.manuals import read_manual
from pipeline.kb.extract import fault_entries
from pipeline.kb.fault_codes import merge_knowledge_base
from pipeline.kb.layouts import split_codes
from schemas.config import PipelineConfig
from schemas.manuals import ManualsConfig, ManualSource

MD = ManualSource(pattern="**/*.md", format="markdown")
TXT = ManualSource(pattern="**/*.txt", format="text")


def entries(
    tmp_path: Path, text: str, source: ManualSource = MD, name: str = "m.md"
) -> StageResult:
    """The knowledge-base rows of one manual, read as the funnel reads it: its blocks through
    the block extractor."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    blocks = read_manual(path, source, tmp_path).state["blocks"]
    return fault_entries(blocks, ManualsConfig())


def kb(tmp_path: Path, text: str, source: ManualSource = MD, name: str = "m.md") -> pl.DataFrame:
    return entries(tmp_path, text, source, name).kept


def row(frame: pl.DataFrame, **where: str) -> dict:
    rows = frame.filter(*[pl.col(k) == v for k, v in where.items()])
    assert rows.height == 1, rows
    return rows.row(0, named=True)


def test_combined_and_ranged_code_cells_give_one_row_per_code(tmp_path: Path) -> None:
    text = """# FANUC 0i-F 报警一览

## 伺服报警

| 报警号 | 报警信息 | 原因 | 处理 |
| --- | --- | --- | --- |
| SV0410 / SV0411 | 停止时/移动中误差太大 | 位置偏差超过设定值 | 检查机械负载；确认参数设定 |
| SV0401~SV0403 | 伺服就绪信号异常 | 放大器未就绪 | 检查 MCC 回路 |
| SV0301～0305 | APC 报警 | 绝对位置通信异常 | 检查编码器电缆 |
| SV0001~SV9999 | 全部 | 无 | 无 |
"""
    result = entries(tmp_path, text)
    frame = result.kept
    codes = frame["code"].to_list()
    assert codes == [
        "FANUC:SV0410", "FANUC:SV0411",
        "FANUC:SV0401", "FANUC:SV0402", "FANUC:SV0403",
        "FANUC:SV0301", "FANUC:SV0302", "FANUC:SV0303", "FANUC:SV0304", "FANUC:SV0305",
    ]  # fmt: skip
    sv0411 = row(frame, code="FANUC:SV0411")
    assert sv0411["remedies"] == ["检查机械负载", "确认参数设定"]
    assert sv0411["source_row"] == row(frame, code="FANUC:SV0410")["source_row"]
    assert frame["record_id"].n_unique() == frame.height
    assert result.rejected["reason"].to_list() == ["bad_code_range"]


@pytest.mark.parametrize(
    ("cell", "family", "expected"),
    [
        ("700000-700003", "SINUMERIK", ["700000", "700001", "700002", "700003"]),
        ("8040-0001", "HEIDENHAIN", ["8040-0001"]),
        ("8B40-0001", None, ["8B40-0001"]),
        ("1000-1002", None, ["1000", "1001", "1002"]),
        ("2001、2003", None, ["2001", "2003"]),
        ("25000 and 25001", None, ["25000", "25001"]),
        ("S02 0031", "MITSUBISHI", ["S02 0031"]),
    ],
)
def test_split_codes(cell: str, family: str | None, expected: list[str]) -> None:
    assert split_codes(cell, family) == expected


def test_numbered_fault_items_with_chinese_labels_keyed_by_symptom(tmp_path: Path) -> None:
    text = """# VMC1060 维修手册

## 5 常见故障及排除

1. 主轴不能启动
原因：
（1）主轴驱动器未上电；
（2）PLC 未输出主轴使能信号。
处理：
（1）检查主轴驱动器输入电源及断路器 QF3；
（2）在 PMC 诊断画面确认使能输出。
影响：主轴停止，自动运行无法继续。

2. 刀库回零位置不准
可能原因：原点开关松动；撞块位置偏移
排除方法：紧固原点开关，重新调整撞块位置后执行回零
"""
    frame = kb(tmp_path, text)
    assert frame["code"].null_count() == frame.height == 2
    spindle = row(frame, symptom="主轴不能启动")
    assert spindle["causes"] == ["主轴驱动器未上电", "PLC 未输出主轴使能信号"]
    assert spindle["remedies"] == [
        "检查主轴驱动器输入电源及断路器 QF3",
        "在 PMC 诊断画面确认使能输出",
    ]
    assert spindle["effect"] == "主轴停止，自动运行无法继续。"  # its own field, not a remedy
    magazine = row(frame, symptom="刀库回零位置不准")
    assert magazine["causes"] == ["原点开关松动", "撞块位置偏移"]
    assert magazine["remedies"] == ["紧固原点开关，重新调整撞块位置后执行回零"]
    assert magazine["language"] == "zh"


def test_plc_user_alarm_list_with_possible_causes_effect_and_rulers(tmp_path: Path) -> None:
    text = """SINUMERIK 828D 机床厂 PLC 用户报警说明

4 PLC 用户报警

700010 液压系统压力低
可能原因：
1. 液压泵电机过载保护跳闸
2. 压力继电器 SP1 损坏或设定值漂移
处理：检查液压泵电机保护开关 QF5；用压力表核对 SP1 动作压力（4 MPa）
影响：进给保持，禁止主轴启动
--------------------------------------------------
700011 润滑油位低
可能原因：润滑油箱油位低于下限
处理：加注 32# 导轨油
影响：当前程序结束后禁止循环启动
==================================================
"""
    frame = kb(tmp_path, text, TXT, "plc_alarms.txt")
    assert frame["code"].to_list() == ["SINUMERIK:700010", "SINUMERIK:700011"]
    hydraulic = row(frame, code="SINUMERIK:700010")
    assert hydraulic["message"] == "液压系统压力低"
    assert hydraulic["causes"] == ["液压泵电机过载保护跳闸", "压力继电器 SP1 损坏或设定值漂移"]
    assert hydraulic["remedies"] == [
        "检查液压泵电机保护开关 QF5",
        "用压力表核对 SP1 动作压力（4 MPa）",
    ]
    assert hydraulic["effect"] == "进给保持，禁止主轴启动"
    lube = row(frame, code="SINUMERIK:700011")
    assert lube["effect"] == "当前程序结束后禁止循环启动"
    assert not any("---" in r or "===" in r for r in lube["remedies"])


def test_symptom_cause_action_tables_without_a_code_column(tmp_path: Path) -> None:
    text = """# Lathe troubleshooting guide

## Spindle

| No. | Symptom | Possible Cause | Corrective Action |
| --- | --- | --- | --- |
| 1 | Spindle noise at speed | Worn bearings; loose drive belt | Replace bearings; re-tension belt |
| 2 | Spindle does not reach speed | Belt slipping | Check belt tension |

## 主轴

| 序号 | 故障现象 | 故障原因 | 排除方法 |
| --- | --- | --- | --- |
| 1 | 主轴异响 | 轴承磨损<br>皮带松动 | 更换轴承<br>张紧皮带 |
"""
    frame = kb(tmp_path, text)
    assert frame["symptom"].to_list() == [
        "Spindle noise at speed",
        "Spindle does not reach speed",
        "主轴异响",
    ]
    assert frame["code"].null_count() == 3
    noise = row(frame, symptom="Spindle noise at speed")
    assert noise["causes"] == ["Worn bearings", "loose drive belt"]
    assert noise["remedies"] == ["Replace bearings", "re-tension belt"]
    assert row(frame, symptom="主轴异响")["language"] == "zh"


def test_number_column_is_the_code_in_an_alarm_list(tmp_path: Path) -> None:
    text = """# HAAS Mill alarm list

| No. | Alarm | Description |
| --- | --- | --- |
| 108 | X SERVO OVERLOAD | Excessive load on the X-axis motor. |
| 2001 | ... | see manual |
"""
    frame = kb(tmp_path, text)
    assert frame["code"].to_list()[0] == "HAAS:108"


def test_codes_in_bold_prose_and_headings_with_the_paragraphs_that_follow(tmp_path: Path) -> None:
    text = """# Tool changer alarms (machine builder, FANUC 0i-MF)

**EX2201 TOOL CLAMP PRESSURE LOW**

The clamp pressure switch did not close within 2 s after M06. This is caused by low air supply
pressure or a leaking clamp cylinder.
Check the air supply (0.5 MPa minimum). Replace the clamp cylinder seals if the pressure drops.

**EX2202 MAGAZINE POT NOT DOWN**: The pot-down sensor did not turn on. Adjust the sensor.

## EX2210 ATC ARM OVERTRAVEL

The ATC arm passed its end position because the cam follower is worn.
Replace the cam follower and re-teach the arm origin.
"""
    frame = kb(tmp_path, text)
    assert frame["code"].to_list() == ["FANUC:EX2201", "FANUC:EX2202", "FANUC:EX2210"]
    clamp = row(frame, code="FANUC:EX2201")
    assert clamp["message"] == "TOOL CLAMP PRESSURE LOW"
    assert clamp["description"].startswith("The clamp pressure switch did not close")
    assert clamp["causes"] == [
        "This is caused by low air supply pressure or a leaking clamp cylinder."
    ]
    assert clamp["remedies"] == [
        "Check the air supply (0.5 MPa minimum).",
        "Replace the clamp cylinder seals if the pressure drops.",
    ]
    assert row(frame, code="FANUC:EX2202")["remedies"] == ["Adjust the sensor."]
    arm = row(frame, code="FANUC:EX2210")
    assert arm["message"] == "ATC ARM OVERTRAVEL"
    assert arm["causes"] and "cam follower is worn" in arm["causes"][0]
    assert arm["remedies"][0].startswith("Replace the cam follower")


def test_sinumerik_diagnostics_entry_reaction_is_the_effect(tmp_path: Path) -> None:
    text = """# SINUMERIK 840D sl Diagnostics Manual

## NCK alarms

25201 Axis %1 drive fault
Explanation: The drive signals a fault; the SINAMICS alarm gives the details.
Reaction: NC not ready. Mode group not ready. Alarm display.
Remedy: Evaluate the drive alarm.
Eliminate the cause, then acknowledge.
Program continuation: Switch control OFF - ON.

Alarm 10720 Channel %1 block %2 axis %3 software limit switch minus
Explanation: The programmed position lies beyond the limit.
Remedy: Check the program and the work offsets.
"""
    frame = kb(tmp_path, text)
    drive = row(frame, code="SINUMERIK:25201")
    assert drive["message"] == "Axis %1 drive fault"
    assert drive["description"].startswith("The drive signals a fault")
    assert drive["effect"] == "NC not ready. Mode group not ready. Alarm display."
    assert drive["remedies"] == ["Evaluate the drive alarm. Eliminate the cause, then acknowledge."]
    assert row(frame, code="SINUMERIK:10720")["remedies"] == [
        "Check the program and the work offsets."
    ]


def test_mitsubishi_class_and_detail_number(tmp_path: Path) -> None:
    text = """# MITSUBISHI M80 Alarm manual (excerpt)

| Alarm No. | Message | Remedy |
| --- | --- | --- |
| S02 0031 | Initial parameter error | Check the servo parameter shown in the detail number. |
"""
    frame = kb(tmp_path, text)
    assert frame["code"].to_list() == ["MITSUBISHI:S02-0031"]


def test_prose_without_codes_and_machine_models_give_no_rows(tmp_path: Path) -> None:
    text = """VMC850 立式加工中心 使用手册
适用系统：FANUC 0i-MF Plus

2 日常点检

2024 年起每班检查润滑油位。
1500 rpm 以上时注意主轴温升。
"""
    assert kb(tmp_path, text, TXT, "vmc.txt").height == 0


def test_merge_keeps_symptom_rows_apart_from_coded_rows(tmp_path: Path) -> None:
    text = """# Guide

| Symptom | Cause | Remedy |
| --- | --- | --- |
| Chatter | Worn insert | Replace insert |
| Poor finish | Dull insert | Replace insert |
| Chatter | Loose tool holder | Clean the taper |
"""
    merged = merge_knowledge_base(kb(tmp_path, text))
    assert merged.kept["causes"].to_list() == [
        ["Worn insert", "Loose tool holder"],
        ["Dull insert"],
    ]
    assert merged.counters["rejected_merged_duplicate_code"] == 1


def test_consecutive_rows_of_one_key_are_one_entry(tmp_path: Path) -> None:
    text = """# Guide

| Symptom | Cause | Remedy |
| --- | --- | --- |
| Chatter | Worn insert | Replace insert |
| Chatter | Loose tool holder | Clean the taper |
"""
    frame = kb(tmp_path, text)  # a merged cell repeated on each row it spans
    assert frame["causes"].to_list() == [["Worn insert", "Loose tool holder"]]
    assert frame["remedies"].to_list() == [["Replace insert", "Clean the taper"]]


def test_provenance_files_are_not_pretraining_text_and_pii_is_redacted(tmp_path: Path) -> None:
    (tmp_path / "SOURCE.md").write_text(
        "# Vendor table\n\n- Origin repository: https://example.org/x\n\n## License\n\nMIT\n",
        encoding="utf-8",
    )
    (tmp_path / "notes.md").write_text(
        "# Copied table\n\nCopied unchanged. SHA-256: `abc`\n\n## License\n\nMIT License\n",
        encoding="utf-8",
    )
    (tmp_path / "manual.md").write_text(
        "# 维修手册\n\n售后服务电话 13812345678，邮箱 service@example.com。\n\n"
        "700020 冷却泵过载\n原因：冷却泵电机过载\n处理：联系人：张伟 13912345678\n",
        encoding="utf-8",
    )
    cfg = PipelineConfig()
    sections, blocks = [], []
    for name in ("SOURCE.md", "notes.md", "manual.md"):
        source = ManualSource(pattern=name, format="markdown")
        results = parse(tmp_path / name, source, tmp_path)
        parsed = results["parse"]
        assert parsed.counters["read"] == parsed.kept.height + parsed.rejected.height
        if name != "manual.md":
            assert parsed.kept.height == 0 and results["blocks"].kept.height == 0
            assert set(parsed.rejected["reason"]) == {"not_manual_text"}
        sections.append(parsed.kept)
        blocks.append(results["blocks"].kept)
    result = funnel(pl.concat(sections), pl.concat(blocks), tmp_path, cfg)
    pretrain = result["chunks"].kept
    assert pretrain["source_file"].unique().to_list() == ["manual.md"]
    text = "\n".join(pretrain["text"])
    assert "13812345678" not in text and "service@example.com" not in text
    assert "[PHONE]" in text and "[EMAIL]" in text
    code = result["fault_codes"].kept.row(0, named=True)
    assert code["remedies"] == ["联系人：[NAME] [PHONE]"]
    assert result["fault_codes"].counters["pii_redacted"] == 2
    assert result["chunks"].counters["pii_redacted"] >= 4


def test_numbered_fault_items_in_english_as_a_service_guide_prints_them(tmp_path: Path) -> None:
    text = """Haas VF-2 service guide: spindle troubleshooting

1) Spindle does not start
Cause: Spindle drive not enabled; door interlock open
Remedy: Close the door. Check the interlock switch wiring.

2) Spindle overheats at low speed
Possible causes:
1. Fan filter blocked
2. Wrong motor parameters
Corrective action: Clean the fan filter; load the factory parameters

3) Spindle noise
Notes: seen after bearing replacement
"""
    frame = kb(tmp_path, text, TXT, "vf2_spindle.txt")
    assert frame["symptom"].to_list() == [
        "Spindle does not start",
        "Spindle overheats at low speed",
    ]  # item 3 has no cause or remedy; "1." / "2." under the label are the causes
    assert frame["code"].null_count() == 2
    start = row(frame, symptom="Spindle does not start")
    assert start["causes"] == ["Spindle drive not enabled", "door interlock open"]
    assert start["remedies"] == ["Close the door. Check the interlock switch wiring."]
    hot = row(frame, symptom="Spindle overheats at low speed")
    assert hot["causes"] == ["Fan filter blocked", "Wrong motor parameters"]
    assert hot["remedies"] == ["Clean the fan filter", "load the factory parameters"]
    assert hot["language"] == "en"


def test_a_loose_numbered_list_under_a_label_stays_in_its_field(tmp_path: Path) -> None:
    text = """# 数控车床维修指南

1. 卡盘夹紧无力

原因：

1. 液压站压力不足

2. 卡盘油缸密封损坏

处理：调整液压站压力至 2.5 MPa，更换油缸密封圈
"""
    frame = kb(tmp_path, text)
    assert frame.height == 1
    chuck = row(frame, symptom="卡盘夹紧无力")
    assert chuck["causes"] == ["液压站压力不足", "卡盘油缸密封损坏"]
    assert chuck["remedies"] == ["调整液压站压力至 2.5 MPa，更换油缸密封圈"]


def test_numbered_items_that_name_a_code_are_keyed_by_it(tmp_path: Path) -> None:
    text = """# GSK 980TDi 常见报警处理

1. ALM 1001 主轴过热
原因：主轴电机风扇停转
处理：检查风扇电源
"""
    frame = kb(tmp_path, text)
    assert frame["code"].to_list() == ["GSK:1001"]
    assert row(frame, code="GSK:1001")["message"] == "主轴过热"


def test_prevention_notes_in_prose_are_entries_for_their_code(tmp_path: Path) -> None:
    text = """# SINUMERIK 840D sl maintenance notes

## Encoder

25000 Axis %1 hardware fault of active encoder
Remedy: Check the encoder cable.

Prevention for alarm 25000: inspect encoder cables in the cable chain every 6 months.

## 主轴

预防报警700016：每周清理冷却液过滤网。
"""
    frame = kb(tmp_path, text)
    assert frame["code"].to_list() == [
        "SINUMERIK:25000", "SINUMERIK:25000", "SINUMERIK:700016"
    ]  # fmt: skip
    notes = frame.filter(pl.col("prevention").is_not_null())
    assert notes["prevention"].to_list() == [
        "inspect encoder cables in the cable chain every 6 months.",
        "每周清理冷却液过滤网。",
    ]
    assert frame["remedies"].to_list()[0] == ["Check the encoder cable."]
    merged = merge_knowledge_base(frame).kept
    encoder = row(merged, code="SINUMERIK:25000")
    assert encoder["prevention"].startswith("inspect encoder cables")
    assert encoder["remedies"] == ["Check the encoder cable."]
