from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import InputFileError
from pipeline.ingest.workorders.reader import (
    IngestError,
    read_workorder_parts,
    resolve_columns,
)
from schemas.config import load_config
from schemas.ingest import IngestConfig, SourceMapping
from tests.pipeline.ingest.workorders.support import discover_files, read_workorder_file

ZH_HEADER = (
    "工单号,设备编号,机床型号,报修时间,故障现象,原因分析,处理措施,预防措施,维修人员,状态,备注\n"
)
ZH_ROWS = (
    "WO-2024-0101,VMC-03,FANUC 0i-MF,2024-03-15 08:30,"
    '"X轴移动时报警SV0401,\n伺服准备未完成",伺服放大器电源模块损坏,更换A06B-6117-H105放大器,'
    "定期检查电柜散热,张伟,已完成,\n"
    "WO-2024-0102,CK6150-02,SINUMERIK 828D,2024-03-16 10:00,主轴异响,轴承磨损,更换主轴轴承,"
    "每半年加注润滑脂,李强,已完成,客户电话13812345678\n"
)


def write(path: Path, text: str, encoding: str) -> Path:
    path.write_bytes(text.encode(encoding))
    return path


def read(path: Path, cfg: IngestConfig | None = None):
    return read_workorder_file(path, path.parent, cfg or IngestConfig())


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [("gbk", "gbk"), ("utf-8", "utf-8"), ("utf-8-sig", "utf-8-sig")],
)
def test_chinese_export_decoded_and_encoding_recorded(tmp_path, encoding, expected):
    got = read(write(tmp_path / "工单.csv", ZH_HEADER + ZH_ROWS, encoding))
    assert got.encoding == expected
    kept = got.result.kept
    assert kept.height == 2
    first = kept.row(0, named=True)
    assert first["order_id"] == "WO-2024-0101"
    assert first["symptom"] == "X轴移动时报警SV0401,\n伺服准备未完成"  # quoted comma and newline
    assert first["cause"] == "伺服放大器电源模块损坏"
    assert first["technician"] == "张伟"
    assert first["remarks"] is None  # blank cell -> null


def test_gb18030_only_characters_detected_as_gb18030(tmp_path):
    # 𠀀 (U+20000) and the euro sign exist in GB18030 but not in GBK.
    text = ZH_HEADER + ZH_ROWS.replace("客户电话13812345678", "零件号𠀀-7 价格€120")
    got = read(write(tmp_path / "extra.csv", text, "gb18030"))
    assert got.encoding == "gb18030"
    assert "𠀀" in got.result.kept["remarks"][1]


def test_quoted_newline_keeps_physical_line_numbers(tmp_path):
    got = read(write(tmp_path / "a.csv", ZH_HEADER + ZH_ROWS, "utf-8"))
    # Row 1 starts on line 2 and spans two lines, so row 2 starts on line 4.
    assert got.result.kept["source_row"].to_list() == [2, 4]
    assert got.result.kept["source_file"].unique().to_list() == ["a.csv"]


def test_malformed_row_quarantined_with_line(tmp_path):
    bad = "WO-2024-0103,VMC-04,FANUC,2024-03-17,only four fields\n"
    got = read(write(tmp_path / "a.csv", ZH_HEADER + ZH_ROWS + bad, "gbk"))
    assert got.result.kept.height == 2
    rejected = got.result.rejected.row(0, named=True)
    assert rejected["reason"] == "malformed_row"
    assert rejected["source_row"] == 5
    assert rejected["detail"] == "a.csv:5: expected 11 fields, found 5"
    assert "only four fields" in rejected["payload"]
    assert got.result.counters == {"read": 3, "kept": 2, "rejected": 1, "rejected_malformed_row": 1}


def test_record_id_stable_and_distinct(tmp_path):
    path = write(tmp_path / "a.csv", ZH_HEADER + ZH_ROWS, "utf-8")
    first = read(path).result.kept["record_id"].to_list()
    again = read(path).result.kept["record_id"].to_list()
    assert first == again
    assert len(set(first)) == 2


def test_english_headers_recognized_without_configuration(tmp_path):
    text = (
        "Order No,Asset,Machine Model,Reported At,Problem Description,Root Cause,"
        "Corrective Action,Preventive Action,Technician,Status,Remarks\n"
        "SO-881,HMC-2,Haas VF-2,2024-04-02,Spindle alarm 108 at 8000 rpm,"
        "Spindle drive overheated: fan clogged,Cleaned fan and filter,Monthly fan check,"
        "J. Miller,Closed,\n"
    )
    row = read(write(tmp_path / "en.csv", text, "utf-8-sig")).result.kept.row(0, named=True)
    assert row["symptom"] == "Spindle alarm 108 at 8000 rpm"
    assert row["cause"] == "Spindle drive overheated: fan clogged"
    assert row["action"] == "Cleaned fan and filter"
    assert row["prevention"] == "Monthly fan check"
    assert row["machine_model"] == "Haas VF-2"


def test_explicit_mapping_joins_columns_and_fills_down(tmp_path):
    text = (
        "Component,Failure Mode,Effect,Cause,Recommended Action\n"
        "Spindle,Bearing noise,Poor finish,Lubrication starved,Re-grease bearings\n"
        ",,,Contaminated coolant,Replace coolant seals\n"
    )
    cfg = IngestConfig(
        sources=[
            SourceMapping(
                pattern="*.csv",
                columns={
                    "asset": "Component",
                    "symptom": ["Failure Mode", "Effect"],
                    "cause": "Cause",
                    "action": "Recommended Action",
                },
                fill_down=["asset", "symptom"],
                use_builtin_headers=False,
            )
        ]
    )
    kept = read(write(tmp_path / "fmea.csv", text, "utf-8"), cfg).result.kept
    assert kept["symptom"].to_list() == ["Bearing noise; Poor finish"] * 2
    assert kept["asset"].to_list() == ["Spindle", "Spindle"]
    assert kept["cause"].to_list() == ["Lubrication starved", "Contaminated coolant"]


def test_configured_column_missing_names_file_and_headers(tmp_path):
    path = write(tmp_path / "a.csv", ZH_HEADER + ZH_ROWS, "utf-8")
    cfg = IngestConfig(sources=[SourceMapping(pattern="*", columns={"symptom": "Fault"})])
    with pytest.raises(IngestError, match=r"a\.csv: configured column\(s\) \['Fault'\]"):
        read(path, cfg)


def test_unrecognizable_file_fails_naming_it(tmp_path):
    path = write(tmp_path / "prices.csv", "sku,price\nA1,3\n", "utf-8")
    with pytest.raises(IngestError, match=r"prices\.csv: no column recognized"):
        read(path)


def test_undecodable_file_fails_naming_it(tmp_path):
    path = tmp_path / "broken.csv"
    path.write_bytes(b"\x81\x30\xff\xfe\x00\xd8" * 50)
    with pytest.raises(InputFileError, match=r"broken\.csv"):  # quarantined by a refresh
        read(path)


def test_xlsx_with_merged_cells_filled_down(tmp_path):
    frame = pl.DataFrame(
        {
            "设备编号": ["VMC-07", None, None],
            "机床型号": ["FANUC 0i-TF", None, None],
            "故障描述": ["刀库换刀卡刀", "刀库计数错误", "ATC机械手不回原位"],
            "维修措施": ["调整刀套", "重新设定刀号", "更换接近开关"],
        }
    )
    path = tmp_path / "export.xlsx"
    frame.write_excel(path)
    cfg = IngestConfig(
        sources=[SourceMapping(pattern="*.xlsx", fill_down=["asset", "machine_model"])]
    )
    got = read(path, cfg)
    kept = got.result.kept
    assert got.encoding == "binary"
    assert kept["asset"].to_list() == ["VMC-07"] * 3
    assert kept["machine_model"].to_list() == ["FANUC 0i-TF"] * 3
    assert kept["action"].to_list() == ["调整刀套", "重新设定刀号", "更换接近开关"]
    assert kept["source_row"].to_list() == [2, 3, 4]


def test_jsonl_bad_line_quarantined(tmp_path):
    text = (
        '{"text": "hydraulic pump leaking at shaft seal"}\n'
        "{not json\n"
        '{"text": "replace coolant filter"}\n'
    )
    cfg = IngestConfig(sources=[SourceMapping(pattern="*.jsonl", columns={"symptom": "text"})])
    got = read(write(tmp_path / "mwo.jsonl", text, "utf-8"), cfg)
    assert got.result.kept["source_row"].to_list() == [1, 3]
    assert got.result.rejected["source_row"].to_list() == [2]


def test_discover_files_sorted_and_filtered(tmp_path):
    for name in ["b.csv", "a.csv", "notes.txt", "sub/c.xlsx"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    cfg = IngestConfig(exclude=["sub/*"])
    assert [p.name for p in discover_files(tmp_path, cfg)] == ["a.csv", "b.csv"]


def test_alias_matching_ignores_case_spaces_and_punctuation(tmp_path):
    mapping = resolve_columns(
        ["CORRECTIVE_ACTION", "Problem  Description", "故障原因"],
        SourceMapping(pattern="*"),
        IngestConfig(),
        tmp_path / "x.csv",
    )
    assert mapping == {
        "action": ["CORRECTIVE_ACTION"],
        "symptom": ["Problem  Description"],
        "cause": ["故障原因"],
    }


def test_fmea_sheet_through_configuration_alone(external, repo):
    """The real mining FMEA sheet: blank cells mean 'same as above'; mapped by a config file."""
    cfg = load_config(repo / "sample_data" / "configs" / "uwa_fmea.toml")
    path = external / "uwa-fmea-mining" / "fmea_dataset_combined.csv"
    got = read_workorder_file(path, path.parent, cfg.ingest)
    kept = got.result.kept
    assert got.encoding == "utf-8-sig"
    assert got.rows == 330
    assert kept["asset"].null_count() == 0  # filled down
    second = kept.row(1, named=True)
    assert second["asset"].startswith("Power Unit / Fuel System / Fuel Tank")
    assert second["cause"] == "Physical impact to tank"


def test_maintie_texts_through_configuration_alone(external, repo):
    cfg = load_config(repo / "sample_data" / "configs" / "uwa_maintie.toml")
    path = external / "uwa-maintie" / "gold_release.json"
    got = read_workorder_file(path, path.parent, cfg.ingest)
    assert got.rows == 1076
    assert got.result.kept["symptom"][0] == "<id> air conditioner thermostat not working"


def test_xlsx_merged_cells_filled_without_configuration(tmp_path):
    import xlsxwriter

    path = tmp_path / "merged.xlsx"
    book = xlsxwriter.Workbook(str(path))
    sheet = book.add_worksheet("维修记录")
    sheet.write_row(0, 0, ["设备编号", "故障描述", "维修措施", "备注"])
    sheet.merge_range(1, 0, 3, 0, "VMC-09")  # A2:A4
    rows = [
        ["主轴过热", "清洗主轴冷却机滤网", ""],
        ["Z轴抖动", "调整伺服增益参数", ""],
        ["刀库报警", "更换刀套检测开关", ""],
        ["液压站漏油", "更换O型圈", "新设备"],
    ]
    for i, row in enumerate(rows, start=1):
        sheet.write_row(i, 1, row)
    book.close()
    kept = read(path).result.kept
    assert kept["asset"].to_list() == ["VMC-09", "VMC-09", "VMC-09", None]
    assert kept["remarks"].to_list() == [None, None, None, "新设备"]  # blank, not merged


def test_sample_xlsx_merged_blocks_filled(sample_data):
    root = sample_data / "workorders"
    kept = read_workorder_file(root / "工单导出_merged.xlsx", root, IngestConfig()).result.kept
    assert kept["asset"].null_count() == 0
    assert kept["machine_model"].null_count() == 0


def _parts(path: Path, rows: int | None, cfg: IngestConfig | None = None) -> list:
    return list(read_workorder_parts(path, path.parent, cfg or IngestConfig(), rows))


def _joined(parts: list) -> tuple[pl.DataFrame, pl.DataFrame]:
    kept = pl.concat([p.result.kept for p in parts])
    rejected = pl.concat([p.result.rejected for p in parts])
    return kept, rejected


def test_csv_read_in_parts_equals_the_whole_read(tmp_path):
    """A titled GBK export with quoted newlines, a short row and an unbalanced quote, read in
    parts of 2 rows: the same records, rejects, lines and ids as one read, each reject in
    the part its line falls in, and the fill-down carried across parts."""
    title = "设备维修记录导出,,,,,,,,,,\n导出时间：2024-04-01,,,,,,,,,,\n"
    rows = (
        ZH_ROWS
        + "WO-2024-0103,VMC-04,FANUC,2024-03-17,only four fields\n"
        + "WO-2024-0104,,FANUC 0i-MF,2024-03-18,刀库换刀卡滞,刀套气缸磨损,更换气缸,"
        + "每月检查气压,王芳,已完成,\n"
        + 'WO-2024-0105,VMC-05,FANUC 0i-MF,2024-03-19,"Z轴抖动,丝杠异响,,,,,,\n'
        + "WO-2024-0106,,FANUC 0i-MF,2024-03-20,主轴报警SP9031,编码器线松动,重新紧固,"
        + "加装线缆固定,张伟,已完成,\n"
    )
    path = write(tmp_path / "维修记录.csv", title + ZH_HEADER + rows, "gbk")
    cfg = IngestConfig(sources=[SourceMapping(pattern="*.csv", fill_down=["asset"])])
    whole = _parts(path, None, cfg)
    parts = _parts(path, 2, cfg)
    assert len(whole) == 1 and [p.rows for p in parts] == [3, 3]
    assert [p.result.kept.height for p in parts] == [2, 2]
    kept, rejected = _joined(parts)
    assert kept.equals(whole[0].result.kept)
    assert rejected.equals(whole[0].result.rejected)
    assert kept["source_row"].to_list() == [4, 6, 8, 10]
    assert kept["asset"].to_list() == ["VMC-03", "CK6150-02", "CK6150-02", "CK6150-02"]
    assert [r.result.rejected["source_row"].to_list() for r in parts] == [[7], [9]]
    assert rejected["detail"][1].startswith("维修记录.csv:9: expected 11 fields")
    assert {p.columns["symptom"] for p in parts} == {"故障现象"}
    assert {p.skipped for p in parts} == {2}  # the two title lines


def test_jsonl_in_parts_keeps_record_ids_whatever_keys_other_lines_have(tmp_path):
    lines = [
        {"wo": "MWO-1", "text": "hydraulic pump leaking at shaft seal", "action": "replaced seal"},
        {"wo": "MWO-2", "text": "conveyor belt tracking off", "action": "realigned idlers"},
        {"wo": "MWO-3", "text": "coolant pump noisy", "action": "replaced bearing", "crew": "B"},
    ]
    text = "".join(json.dumps(o) + "\n" for o in lines) + "[1, 2]\n"
    path = write(tmp_path / "mwo.jsonl", text, "utf-8")
    whole = _parts(path, None)
    parts = _parts(path, 1)
    kept, rejected = _joined(parts)
    assert kept.equals(whole[0].result.kept)
    assert kept["record_id"].n_unique() == 3
    assert rejected["detail"].to_list() == ["mwo.jsonl:4: line is not a JSON object"]


def test_a_bad_byte_late_in_a_file_comes_after_its_first_parts(tmp_path):
    """The export is read as a stream: the parts before a damaged line (past the rows the
    column mapping looks at) are given before the reader reaches it; the error names it."""
    body = ZH_ROWS * 300 + "WO-2024-0199,VMC-09,FANUC,2024-03-30,"
    path = tmp_path / "export.csv"
    path.write_bytes((ZH_HEADER + body).encode() + "坏".encode("gbk") + b",,,,,,\n")
    cfg = IngestConfig(sources=[SourceMapping(pattern="*.csv", encoding="utf-8")])
    reading = read_workorder_parts(path, tmp_path, cfg, 100)
    first = next(reading)
    assert first.result.kept["order_id"].to_list()[:2] == ["WO-2024-0101", "WO-2024-0102"]
    with pytest.raises(InputFileError, match=r"export\.csv:902: not valid utf-8"):
        list(reading)


def test_json_array_with_a_record_in_another_encoding_quarantines_that_record(tmp_path):
    records = [
        {"工单号": f"WO-{i:03d}", "设备编号": "VMC-03", "故障现象": "主轴异响，温度偏高",
         "处理措施": "更换主轴前轴承，重新预紧"}
        for i in range(40)
    ]  # fmt: skip
    lines = json.dumps(records, ensure_ascii=False, indent=1).encode("utf-8").split(b"\n")
    at = next(i for i, line in enumerate(lines) if b"WO-017" in line) + 2
    lines[at] = lines[at].decode("utf-8").encode("gb18030")  # one record pasted from a GBK tool
    path = tmp_path / "orders.json"
    path.write_bytes(b"\n".join(lines))
    got = read(path)
    assert got.result.kept.height == 39
    assert got.result.rejected.height == 1
    assert got.result.rejected["reason"].to_list() == ["malformed_row"]


def test_mapped_column_holding_json_objects_is_a_warning_not_text(tmp_path):
    # A CMMS JSON export whose "problem" field is a nested record, not the technician's words.
    path = tmp_path / "cmms_orders.json"
    orders = [
        {"order no": "WO-1", "machine": "VMC-03", "date": "2024-03-18",
         "problem": {"code": "SV0401", "text": "V READY OFF"},
         "action taken": "更换 MCC 接触器，试机正常"},
        {"order no": "WO-2", "machine": "VMC-04", "date": "2024-03-19",
         "problem": {"code": "SV0436", "text": "SOFT THERMAL"},
         "action taken": "降低切削负载，清理电机风扇"},
    ]  # fmt: skip
    path.write_text(json.dumps(orders, ensure_ascii=False), encoding="utf-8")
    read = read_workorder_file(path, tmp_path, IngestConfig())
    assert read.warning == (
        "cmms_orders.json: column 'problem' (mapped to symptom) holds JSON objects: "
        "not used as sample text"
    )
    records = read.result.kept
    assert records["symptom"].null_count() == records.height == 2
    assert records["action"].to_list()[0] == "更换 MCC 接触器，试机正常"
    assert "symptom" not in read.columns
