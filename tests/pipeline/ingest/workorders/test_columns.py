"""Work-order columns found without configuration: synonyms, contents, header rows below
report titles, the data sheet of a workbook; the mapping recorded for the manifest.

The exports are written here from how maintenance systems lay them out (a GB18030 export of
a domestic CMMS, an Excel report with a title block, a workbook with code-list and summary
sheets), not produced by our sample generator.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import xlsxwriter

from pipeline.funnels.workorders import ingest
from pipeline.ingest.workorders.columns import header_field
from pipeline.ingest.workorders.reader import IngestError
from schemas.config import PipelineConfig
from schemas.ingest import IngestConfig, SourceMapping
from schemas.manifest import InputFile
from tests.pipeline.ingest.workorders.support import read_workorder_file

CFG = IngestConfig()

# A domestic CMMS export (written here in UTF-8, encoded to GB18030 by the tests).
GB18030_EXPORT = (Path(__file__).parents[2] / "data" / "cmms_export.csv").read_text("utf-8")


def test_gb18030_export_with_unfamiliar_headers(tmp_path: Path) -> None:
    path = tmp_path / "维修台账导出.csv"
    path.write_bytes(GB18030_EXPORT.encode("gb18030"))
    got = read_workorder_file(path, tmp_path, CFG)
    assert got.columns == {
        "order_id": "单据号",
        "asset": "机台",
        "machine_model": "数控系统",
        "reported_at": "登记日期",  # by its dates
        "symptom": "情况",  # by its wording
        "cause": "分析结论",
        "action": "处置",
        "prevention": "后续",
        "technician": "执行人",
    }  # 序号 and 完成时间 are read as none of the fields
    kept = got.result.kept
    assert kept.height == 6 and kept["action"].null_count() == 0
    assert kept["order_id"].to_list()[0] == "BX240301"
    assert kept["source_row"].to_list() == [2, 3, 4, 5, 6, 7]


def test_csv_header_below_a_report_title_and_blank_rows(tmp_path: Path) -> None:
    text = (
        "设备维修记录表（2024年3月）,,,\n"
        "导出时间：2024-04-01,,,\n"
        ",,,\n"
        "工单号,设备编号,故障现象,处理经过\n"
        "WO-1,VMC-1,主轴异响,更换轴承\n"
        "WO-2,VMC-2,X轴抖动,调整增益\n"
    )
    path = tmp_path / "report.csv"
    path.write_text(text, encoding="utf-8")
    got = read_workorder_file(path, tmp_path, CFG)
    assert got.columns == {
        "order_id": "工单号",
        "asset": "设备编号",
        "symptom": "故障现象",
        "action": "处理经过",
    }
    assert got.result.kept["source_row"].to_list() == [5, 6]
    assert got.rows == 2 and got.skipped == 3


def test_xlsx_report_title_above_the_header_row(tmp_path: Path) -> None:
    path = tmp_path / "Maintenance Report.xlsx"
    book = xlsxwriter.Workbook(str(path))
    sheet = book.add_worksheet("Report")
    sheet.merge_range(0, 0, 0, 5, "Plant 2 - CNC Maintenance Report")
    sheet.write(1, 0, "Period: 2024-05-01 to 2024-05-31")
    header = ["WO Number", "Machine ID", "Date Reported", "Problem Reported", "Root Cause",
              "Work Performed"]  # fmt: skip
    sheet.write_row(3, 0, header)
    sheet.merge_range(4, 1, 5, 1, "HMC-12")  # one machine, two orders
    rows = [
        ["WO-5501", None, "2024-05-03", "Pallet changer stuck", "Worn guide roller",
         "Replaced guide roller"],
        ["WO-5502", None, "2024-05-09", "Spindle alarm 9001", "Blocked fan filter",
         "Cleaned the spindle motor fan"],
        ["WO-5503", "VMC-4", "2024-05-20", "Coolant leak at door", "Damaged seal",
         "Replaced door seal"],
    ]  # fmt: skip
    for i, row in enumerate(rows, start=4):
        for j, value in enumerate(row):
            if value is not None:
                sheet.write(i, j, value)
    book.close()
    got = read_workorder_file(path, tmp_path, CFG)
    kept = got.result.kept
    assert got.columns == {
        "order_id": "WO Number",
        "asset": "Machine ID",
        "reported_at": "Date Reported",
        "symptom": "Problem Reported",
        "cause": "Root Cause",
        "action": "Work Performed",
    }
    assert kept["source_row"].to_list() == [5, 6, 7]  # sheet rows
    assert kept["asset"].to_list() == ["HMC-12", "HMC-12", "VMC-4"]  # merged block filled
    assert kept["action"][1] == "Cleaned the spindle motor fan"


def test_workbook_data_sheet_chosen_over_code_list_and_summary(tmp_path: Path) -> None:
    path = tmp_path / "设备科工作簿.xlsx"
    book = xlsxwriter.Workbook(str(path))
    notes = book.add_worksheet("填写说明")
    notes.write(0, 0, "本表每月汇总一次，请按格式填写。")
    codes = book.add_worksheet("报警代码表")
    codes.write_row(0, 0, ["报警代码", "报警内容", "处理方法"])
    for i in range(1, 30):
        codes.write_row(i, 0, [f"EX{1000 + i}", f"外部报警{i}", "检查对应输入信号"])
    data = book.add_worksheet("维修记录")
    data.write_row(0, 0, ["日期", "设备名称", "故障描述", "原因分析", "维修内容", "维修人"])
    data.write_row(
        1, 0, ["2024-06-01", "数控车床CK6150", "卡盘夹不紧", "卡盘油缸内泄", "更换油缸密封", "周明"]
    )
    data.write_row(
        2, 0, ["2024-06-03", "加工中心V850", "刀库乱刀", "刀号表错乱", "重新设定刀号", "吴刚"]
    )
    summary = book.add_worksheet("汇总")
    summary.write_row(0, 0, ["月份", "故障次数", "停机时长"])
    summary.write_row(1, 0, ["6月", 2, 5.5])
    book.close()
    got = read_workorder_file(path, tmp_path, CFG)
    kept = got.result.kept
    assert kept["symptom"].to_list() == ["卡盘夹不紧", "刀库乱刀"]
    assert got.columns["action"] == "维修内容" and got.columns["asset"] == "设备名称"
    # every other sheet holding rows is one reject naming it: nothing is left out unsaid
    not_read = got.result.rejected["detail"].to_list()
    assert len(not_read) == 3 and all("not read" in d for d in not_read)
    assert {"填写说明", "报警代码表", "汇总"} == {d.split("'")[1] for d in not_read}
    configured = IngestConfig(sources=[SourceMapping(pattern="*.xlsx", sheet="报警代码表")])
    override = read_workorder_file(path, tmp_path, configured)  # override still works
    assert override.result.kept.height == 29 and override.result.rejected.height == 3


@pytest.mark.parametrize(
    ("header", "field"),
    [
        ("处理经过", "action"),
        ("处理结果", "action"),
        ("纠正措施", "action"),
        ("预防对策", "prevention"),
        ("整改建议", "prevention"),
        ("设备名称", "asset"),
        ("机床编号", "asset"),
        ("Corrective Action Taken", "action"),
        ("Resolution", "action"),
        ("Work Performed", "action"),
        ("故障现象描述", "symptom"),
        ("处理人员", "technician"),
        ("维修完成时间", "_ignored"),
    ],
)
def test_header_synonyms(header: str, field: str) -> None:
    assert header_field(header, CFG)[0] == field


def test_unknown_headers_without_readable_contents_still_fail_clearly(tmp_path: Path) -> None:
    path = tmp_path / "codes.csv"
    path.write_text("代码,数量\nA1,3\nB2,4\n", encoding="utf-8")
    with pytest.raises(IngestError, match="no column recognized"):
        read_workorder_file(path, tmp_path, CFG)


def test_mapping_recorded_in_the_ledger_and_manifest(tmp_path: Path) -> None:
    path = tmp_path / "维修台账导出.csv"
    path.write_bytes(GB18030_EXPORT.encode("gb18030"))
    ledger = dict(ingest(path, tmp_path, PipelineConfig()))["part-00000/ingest"].state["ledger"]
    row = ledger.row(0, named=True)
    assert json.loads(row["columns"])["action"] == "处置"
    entry = InputFile(**row)
    assert entry.columns is not None and entry.columns["symptom"] == "情况"
    assert entry.encoding == "gb18030"
    assert ledger.schema["columns"] == pl.String
