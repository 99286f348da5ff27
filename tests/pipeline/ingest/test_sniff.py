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
