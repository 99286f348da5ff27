"""File kinds by content, on hand-written shop exports (tests/fixtures/exports/).

Each fixture follows a vendor's documented export layout (see the comment at each parser
in pipeline/ingest/alarm_logs/<layout>.py): FANUC 0i-MF memory-card output (`%` framed, newest
first, GBK) and the 30i two-line history screen; SINUMERIK Operate alarm logs (`;` events with
Chinese states, a German fixed-column Kommen/Gehen/Quittieren table, an English `;` table);
an MTConnect SHDR adapter log with device-prefixed items and a hex native code; a Mitsubishi
M80 alarm history (class, message, detail, axis); a Haas alarm history (number, text, date).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.ingest.inventory import inventory
from pipeline.ingest.non_corpus import what_text
from pipeline.ingest.sniff import sniff
from schemas.alarm_logs import AlarmLogsConfig, AlarmLogSource
from schemas.config import PipelineConfig

EXPORTS = Path(__file__).resolve().parents[2] / "fixtures" / "exports"


@pytest.mark.parametrize(
    ("name", "kind", "layout"),
    [
        ("VMC-11_0i-MF_alarm_history.txt", "alarm_log", "fanuc"),
        ("HMC-21_30i_alarm.txt", "alarm_log", "fanuc"),
        ("DMC-5_alarmlog.csv", "alarm_log", "sinumerik"),  # a .csv that is no work-order table
        ("Alarmprotokoll_20240816.txt", "alarm_log", "sinumerik"),
        ("HMC-8_operate_alarms.csv", "alarm_log", "sinumerik"),
        ("cell3_agent.shdr", "alarm_log", "mtconnect"),
        ("LATHE-2_M80_alarm_history.txt", "alarm_log", "mitsubishi"),
        ("Haas_VF-2_alarm_history.txt", "alarm_log", "haas"),
        ("维修工单_2024Q3.csv", "workorder", "csv"),
        ("service_orders.jsonl", "workorder", "jsonl"),
        ("fanuc_servo_alarms.md", "manual", "markdown"),
        ("保养手册_VMC.txt", "manual", "text"),
    ],
)
def test_kind_and_layout_from_content(name: str, kind: str, layout: str) -> None:
    found = sniff(EXPORTS / name)
    assert (found.kind, found.layout) == (kind, layout)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("LICENSE", "licence"),
        ("README.md", "readme"),
        ("camera.jpg", "binary"),
        ("agent.log", "no known alarm-log layout"),
    ],
)
def test_skipped_with_a_reason(name: str, reason: str) -> None:
    found = sniff(EXPORTS / name)
    assert found.kind == "skip" and reason in (found.reason or "")


def test_names_do_not_decide(tmp_path: Path) -> None:
    # A FANUC history named like a manual, a manual named like a log, a table without suffix.
    (tmp_path / "notes.txt").write_text("2024/08/16 14:02:51  SV0436 OVC ALARM (Z)\n" * 3)
    (tmp_path / "fanuc_alarm_history.txt").write_text("主轴保养说明\n每周清理主轴锥孔。\n")
    (tmp_path / "export").write_text("工单号,设备编号,故障现象\nA1,M1,异响\nA2,M2,漏油\n")
    (tmp_path / "settings.toml").write_text("# comment\n[a]\nb = 1\n")
    (tmp_path / "book.pdf").write_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    kinds = {p.name: sniff(p) for p in tmp_path.iterdir()}
    assert kinds["notes.txt"].reader == "alarm_log:fanuc"
    assert kinds["fanuc_alarm_history.txt"].reader == "manual:text"
    assert kinds["export"].reader == "workorder:csv"
    assert kinds["settings.toml"].kind == "skip"
    assert kinds["book.pdf"].reader == "manual:pdf"


def test_configured_encoding_is_used_for_sniffing(tmp_path: Path) -> None:
    log = tmp_path / "DMU-50_protokoll.txt"
    log.write_bytes(
        "Nr.      Kommen                    Gehen                     Text\n"
        "700016   16.08.2024 09:00:00.000   16.08.2024 09:05:00.000   Kühlmittel\n".encode("cp1252")
    )
    assert sniff(log, "cp1252").reader == "alarm_log:sinumerik"


def test_inventory_accounts_for_every_file_and_honours_overrides(tmp_path: Path) -> None:
    entries = inventory(EXPORTS, {"workorder": EXPORTS, "alarm_log": EXPORTS, "manual": None},
                        PipelineConfig())  # fmt: skip
    assert len(entries) == len([p for p in EXPORTS.iterdir() if p.is_file()])
    by_name = {e.path.name: e.sniffed for e in entries}
    assert by_name["fanuc_servo_alarms.md"].kind == "skip"  # manuals are not read by this run
    assert "manual:markdown file; this run reads: workorder, alarm_log" in (
        by_name["fanuc_servo_alarms.md"].reason or ""
    )
    forced = PipelineConfig(
        alarm_logs=AlarmLogsConfig(sources=[AlarmLogSource(pattern="Haas_*", format="fanuc")])
    )
    entries = inventory(EXPORTS, {"alarm_log": EXPORTS}, forced)
    haas = next(e for e in entries if e.path.name.startswith("Haas_"))
    assert haas.sniffed.reader == "alarm_log:fanuc" and haas.source is not None


VENDOR_TABLES = EXPORTS.parent / "vendor_tables"


@pytest.mark.parametrize(
    ("name", "layout"),
    [
        ("sigma7_servopack_alarms.csv", "csv"),  # a key line above the header
        ("asda_b3_alarms.jsonl", "jsonl"),  # a comment line above the records
        ("sv660n_faults.yaml", "yaml"),  # a .yaml file that is no configuration
        ("syntec_servo_alarms.json", "json"),  # nested zh_CN / en objects
        ("minas_a6_alarm_messages.txt", "text"),  # $Cause / $Remedy blocks
        ("mr_j4_alarm_list.txt", "text"),  # AL.16 Encoder ... lines
    ],
)
def test_vendor_code_tables_are_fault_tables(name: str, layout: str) -> None:
    assert sniff(VENDOR_TABLES / name).reader == f"fault_table:{layout}"


def test_fault_tables_are_read_with_the_manuals_only() -> None:
    folders = {"workorder": VENDOR_TABLES, "alarm_log": None, "manual": None}
    entries = inventory(VENDOR_TABLES, folders, PipelineConfig())
    assert {e.sniffed.kind for e in entries} == {"skip"}  # never read as work orders
    assert all("fault_table:" in (e.sniffed.reason or "") for e in entries)
    entries = inventory(VENDOR_TABLES, {**folders, "manual": VENDOR_TABLES}, PipelineConfig())
    assert {e.sniffed.kind for e in entries} == {"fault_table"}


# Text beside the manuals that is not corpus text, as projects and shops really write it.
CHANGELOG = """# Changelog

All notable changes to this project will be documented in this file.

The format is based on [Keep a Changelog](https://keepachangelog.com/en/1.1.0/),
and this project adheres to [Semantic Versioning](https://semver.org/spec/v2.0.0.html).

## [Unreleased]

### Added
- FOCAS2 reader for the 0i-F Plus alarm history (`cnc_rdalmhistry5`).

## [1.2.0] - 2024-03-01

### Added
- MTConnect SHDR output for SINUMERIK 840D sl alarms.
- Retry on Ethernet timeout (EW_SOCKET).

### Fixed
- Alarm text with GBK characters was cut at 32 bytes.

### Changed
- Default poll interval is now 5 s (was 2 s).

## [1.1.3] - 2023-11-20

### Fixed
- Crash when the controller returned an empty history.

[Unreleased]: https://github.com/example/cnc-agent/compare/v1.2.0...HEAD
[1.2.0]: https://github.com/example/cnc-agent/compare/v1.1.3...v1.2.0
"""
RELEASE_NOTES = """KND K1000TiC 系统软件版本说明

V3.2.5 (2024-05-10)
1. 新增：G71 复合循环支持 II 型轮廓。
2. 修复：主轴倍率在 MDI 方式下不生效的问题。
3. 优化：报警履历保存条数由 200 条增加到 500 条。

V3.2.4 (2023-12-01)
1. 修复：ALM 0414 在上电时误报。
2. 修复：U 盘文件列表中文名乱码。
"""
MIT = """MIT License

Copyright (c) 2024 Example Automation GmbH

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""
BSD = """Copyright (c) 2023, Example Robotics Ltd.
All rights reserved.

Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met:

1. Redistributions of source code must retain the above copyright notice, this
   list of conditions and the following disclaimer.

2. Redistributions in binary form must reproduce the above copyright notice,
   this list of conditions and the following disclaimer in the documentation.

THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
AND ANY EXPRESS OR IMPLIED WARRANTIES ARE DISCLAIMED.
"""
SCRIPT = '''#!/usr/bin/env python3
"""Pull the alarm history from the FANUC controllers over FOCAS and write CSV."""
import csv
import sys

import focas

MACHINES = {"VMC-03": "192.168.1.23", "VMC-05": "192.168.1.25"}


def read_history(host: str) -> list[dict]:
    rows = []
    for alarm in focas.read_alarm_history(host, count=50):
        rows.append({"time": alarm.time, "code": alarm.code, "text": alarm.text})
    return rows


if __name__ == "__main__":
    writer = csv.writer(sys.stdout)
    for name, host in MACHINES.items():
        for row in read_history(host):
            writer.writerow([name, row["time"], row["code"], row["text"]])
'''
GCODE = """%
O1234 (VMC850 SPINDLE WARM-UP)
N10 G21 G17 G40 G49 G80 G90
N20 G91 G28 Z0.
N30 S1000 M03
N40 G04 X300.
N50 S3000
N60 G04 X300. (5 MIN)
N70 S6000
N80 G04 X300.
N90 M05
N100 M30
%
"""
HEIDENHAIN = """0  BEGIN PGM WARMUP MM
1  BLK FORM 0.1 Z X+0 Y+0 Z-40
2  BLK FORM 0.2  X+100  Y+100  Z+0
3  TOOL CALL 1 Z S2000
4  L  Z+100 R0 FMAX M3
5  L  X+50  Y+50 R0 FMAX
6  CYCL DEF 9.0 DWELL TIME
7  CYCL DEF 9.1 DWELL 300
8  END PGM WARMUP MM
"""
CONFIG_YAML = """# MTConnect adapter settings for cell 3
adapter:
  port: 7878
  heartbeat_ms: 10000
devices:
  - name: VMC-03
    controller: fanuc
    host: 192.168.1.23
    focas_port: 8193
  - name: DMU-07
    controller: sinumerik
    host: 192.168.1.40
logging:
  level: INFO
  file: /var/log/cnc-agent/agent.log
"""
DOTENV = "FOCAS_HOST=192.168.1.23\nFOCAS_PORT=8193\nMQTT_BROKER=tcp://10.0.0.5:1883\nPOLL_S=5\n"
SETTINGS_JSON = '{"adapter": {"port": 7878, "heartbeat_ms": 10000}, "logging": {"level": "INFO"}}'
SYSLOG = """Aug 16 14:02:51 cell3-gw cnc-agent[812]: connected to VMC-03 (192.168.1.23:8193)
Aug 16 14:02:52 cell3-gw cnc-agent[812]: poll ok, 0 new alarms
Aug 16 14:07:52 cell3-gw cnc-agent[812]: EW_SOCKET timeout, retry 1/3
Aug 16 14:07:57 cell3-gw cnc-agent[812]: reconnected to VMC-03
Aug 16 14:12:52 cell3-gw systemd[1]: Started Daily apt upgrade and clean activities.
Aug 16 14:12:53 cell3-gw cnc-agent[812]: poll ok, 1 new alarm
"""
# Manuals that mention a licence, versions, settings and G-code: still manuals.
MANUAL_WITH_HISTORY = """# VMC850 主轴维护手册

文档版本 V1.3，发布日期 2024-06-01。本手册中的示例宏程序以 MIT License 发布。

## 修订记录

| 版本 | 日期 | 说明 |
|---|---|---|
| V1.2 | 2024-03-01 | 新增拉刀力检测 |
| V1.3 | 2024-06-01 | 修正润滑周期 |

## 1 主轴润滑

1. 每班检查油气润滑压力，应为 0.3–0.5 MPa。
2. 每周清理油雾过滤器，检查排油管是否堵塞。

## 2 主轴预热程序

长时间停机后执行以下预热程序：

    O1234 (WARM-UP)
    S1000 M03
    G04 X300.
    M30

执行完毕后确认主轴温升不超过 15 ℃。
"""
LABELLED_GUIDE = """Haas Mill Alarm Guide (excerpt)

Alarm: 108
Message: SERVO OVERLOAD
Cause: excessive load on an axis motor
Remedy: check the axis for binding, then the ballscrew support bearings

Alarm: 160
Message: LOW VOLTAGE
Cause: incoming line voltage below 190 VAC
Remedy: check the transformer taps and the line voltage
"""


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("cnc-agent-notes.md", CHANGELOG, "changelog"),
        ("CHANGELOG.md", CHANGELOG, "changelog"),
        ("K1000_软件.txt", RELEASE_NOTES, "changelog"),
        ("terms.txt", MIT, "licence"),
        ("LICENSE", MIT, "licence"),
        ("legal.md", BSD, "licence"),
        ("pull_alarms.txt", SCRIPT, "source_code"),
        ("pull_alarms.py", SCRIPT, "source_code"),
        ("O1234.txt", GCODE, "source_code"),
        ("O1234", GCODE, "source_code"),
        ("WARMUP.H", HEIDENHAIN, "source_code"),
        ("WARMUP.txt", HEIDENHAIN, "source_code"),
        ("config.yaml", CONFIG_YAML, "configuration"),
        ("adapter.txt", CONFIG_YAML, "configuration"),
        (".env.txt", DOTENV, "configuration"),
        ("gateway.env", DOTENV, "configuration"),
        ("settings.json", SETTINGS_JSON, "configuration"),
        ("gateway_dump.txt", SYSLOG, "log_dump"),
    ],
)
def test_text_that_is_no_manual_is_skipped_with_its_reason_code(
    tmp_path: Path, name: str, text: str, reason: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    found = sniff(path, expect="manual")
    assert found.kind == "skip", found
    assert (found.reason or "").startswith(f"{reason}: "), found.reason


@pytest.mark.parametrize(
    ("name", "text", "layout"),
    [
        ("主轴维护手册.md", MANUAL_WITH_HISTORY, "markdown"),
        ("haas_alarms.txt", LABELLED_GUIDE, "text"),
    ],
)
def test_a_manual_mentioning_a_licence_versions_or_gcode_stays_a_manual(
    tmp_path: Path, name: str, text: str, layout: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert sniff(path, expect="manual").reader == f"manual:{layout}"


def test_a_yaml_fault_table_is_not_taken_for_configuration() -> None:
    table = (
        "alarms:\n  - code: SV0401\n    message: V READY OFF\n"
        "    cause: 伺服放大器 MCC 未吸合\n    remedy: 检查急停回路和 MCC\n"
        "  - code: SV0436\n    message: SOFTTHERMAL (OVC)\n    cause: 电机过载\n"
        "    remedy: 检查负载与切削条件\n"
    )
    assert what_text(table, table.splitlines()) is None


GSK_UTF16 = "\ufeff报警号：0301\r\n报警内容：X轴正向硬限位超程\r\n处理方法：手动反向移出限位。\r\n"
HNC_UTF16 = "报警号：SP 080\n原因：主轴使能信号 Y1.2 未输出。\n处理方法：检查继电器 KA3。\n"


@pytest.mark.parametrize(
    ("data", "layout"),
    [
        # a GSK guide saved by Notepad as "Unicode" (UTF-16 LE, BOM) and an HNC one without BOM
        (GSK_UTF16.encode("utf-16-le"), "manual:text"),
        (HNC_UTF16.encode("utf-16-be"), "manual:text"),
    ],
)
def test_utf16_text_is_sniffed_with_or_without_bom(
    tmp_path: Path, data: bytes, layout: str
) -> None:
    path = tmp_path / "guide.txt"
    path.write_bytes(data)
    assert sniff(path).reader == layout


def test_a_latin1_german_alarm_log_is_sniffed_as_sinumerik(tmp_path: Path) -> None:
    log = tmp_path / "Alarmprotokoll_DMU-50.txt"
    log.write_bytes(
        "Nr.      Kommen                    Gehen                     Text\n"
        "22050    16.08.2024 09:00:00.000   16.08.2024 09:01:30.000   Überwachung Spindeldrehzahl\n"
        "700016   16.08.2024 10:12:44.100   16.08.2024 10:15:00.000   Stößel Klemmung öffnen\n"
        .encode("latin-1")
    )  # fmt: skip
    assert sniff(log).reader == "alarm_log:sinumerik"
