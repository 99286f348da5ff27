from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.alarm_logs.reader import (
    AlarmLogError,
    machine_from_name,
    read_alarm_log,
    read_alarm_log_file,
)
from schemas.alarm_logs import ALARM_EVENT_SCHEMA, AlarmLogsConfig, AlarmLogSource
from tests.pipeline.ingest.alarm_logs.support import alarm_log_files, read_alarm_logs

REPO = Path(__file__).resolve().parents[4]
SAMPLES = REPO / "sample_data" / "alarm_logs"
FANUC = SAMPLES / "VMC-03_fanuc_alarm_history_20240318.txt"
SINUMERIK = SAMPLES / "DMU-07_sinumerik_alarm_log_20240313.log"
NIST = REPO.parent / "shared" / "external" / "nist-smstestbed-mtconnect"
NIST_LOG = NIST / "Mazak01-20180220-20180221.txt"
NIST_SOURCE = AlarmLogSource(
    pattern="Mazak*.txt",
    format="mtconnect",
    family="MTCONNECT/MAZAK",
    machine_pattern=r"^(?P<machine>[^-]+)-",
)


def test_fanuc_gbk_export() -> None:
    raw = FANUC.read_bytes()
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")  # the sample really is GBK
    result = read_alarm_log(FANUC, AlarmLogSource(pattern="*", format="fanuc"), SAMPLES)
    c = result.counters
    # 29 lines: 6 header lines, 21 numbered entries, a ruler and "（完）"; entry 4 is cut off
    # mid-time, entry 13 has the 0000/00/00 date a controller writes after losing its clock.
    assert (c["lines_total"], c["read"], c["kept"], c["rejected"]) == (29, 21, 19, 2)
    assert c["skipped_non_alarm"] == 8
    assert c["rejected_malformed_line"] == 1 and c["rejected_bad_timestamp"] == 1
    kept = result.kept
    assert kept.schema == pl.Schema(ALARM_EVENT_SCHEMA)
    assert set(kept["machine"]) == {"VMC-03"}
    assert set(kept["event"]) == {"raised"}
    assert kept["alarm_code"].value_counts().sort("alarm_code").rows() == [
        ("FANUC:DS0307", 2),
        ("FANUC:EX1002", 3),
        ("FANUC:OT0500", 1),
        ("FANUC:PS0010", 1),
        ("FANUC:SP9001", 2),
        ("FANUC:SV0401", 6),
        ("FANUC:SV0410", 1),
        ("FANUC:SV0436", 3),
    ]
    first = kept.filter(pl.col("source_row") == 7).row(0, named=True)
    assert first["message"] == "V就绪信号关闭 (Y轴)"  # decoded, CR of the CRLF export gone
    assert str(first["occurred_at"]) == "2024-03-18 15:46:03"
    rejects = {r["source_row"]: r for r in result.rejected.iter_rows(named=True)}
    assert rejects[10]["reason"] == "malformed_line"
    assert rejects[10]["detail"].startswith("VMC-03_fanuc_alarm_history_20240318.txt:10: ")
    assert '"raw":"   4   2024/03/18   11:1"' in rejects[10]["payload"]
    assert rejects[19]["reason"] == "bad_timestamp"


def test_sinumerik_came_went_acknowledged() -> None:
    result = read_alarm_log(SINUMERIK, AlarmLogSource(pattern="*", format="sinumerik"))
    c = result.counters
    assert (c["lines_total"], c["read"], c["kept"], c["rejected_malformed_line"]) == (35, 27, 26, 1)
    kept = result.kept
    assert kept.group_by("event").len().sort("event").rows() == [
        ("acknowledged", 6),
        ("cleared", 10),
        ("raised", 10),
    ]
    assert set(kept["level"]) == {"NCK", "PLC"}
    encoder = kept.filter(pl.col("alarm_code") == "SINUMERIK:25000", pl.col("event") == "raised")
    assert encoder["occurred_at"].dt.to_string("%d.%m %H:%M:%S%.3f").to_list() == [
        "12.03 09:14:05.117",
        "12.03 09:21:33.640",
        "13.03 15:40:18.090",
    ]
    assert encoder["message"][0] == "Axis X1 hardware fault of active encoder"
    assert result.rejected["source_row"].to_list() == [30]


def test_sinumerik_iso_dates_and_german_event_words(tmp_path: Path) -> None:
    log = tmp_path / "HMC-2_sinumerik.log"
    log.write_text(
        "2024-05-02 10:00:01.5  kommt  25000  NCK  Achse X1 Hardwarefehler aktiver Geber\n"
        "02.05.24 10:00:09      quittiert 25000\n"
        "02.05.24 10:00:09.1    geht   25000  NCK  Achse X1 Hardwarefehler aktiver Geber\n",
        encoding="utf-8",
    )
    kept = read_alarm_log(log, AlarmLogSource(pattern="*", format="sinumerik")).kept
    assert kept["event"].to_list() == ["raised", "acknowledged", "cleared"]
    assert kept["occurred_at"].dt.to_string("%F %T%.3f").to_list() == [
        "2024-05-02 10:00:01.500",
        "2024-05-02 10:00:09.000",
        "2024-05-02 10:00:09.100",
    ]
    assert kept["machine"][0] == "HMC-2"
    assert kept["message"][1] is None


def test_mtconnect_conditions_among_samples(tmp_path: Path) -> None:
    shdr = tmp_path / "HMC-5_agent.shdr"
    shdr.write_text(
        "2024-04-01T08:00:00.000Z|Xload|12|Yload|9\n"
        "2024-04-01T08:00:01.000Z|logic_cond|Unavailable||||\n"
        "\n"
        "2024-04-01T08:00:02.120Z|logic_cond|FAULT|2011|2|HIGH|SPINDLE|OVERLOAD\n"
        "2024-04-01T08:00:05.000Z|servo_cond|Warning|||| LUBE LOW\n"
        "garbage without pipes\n"
        "2024-04-31T08:00:06.000Z|logic_cond|Warning|2011|||SPINDLE OVERLOAD\n"
        "2024-04-01T08:01:00.000Z|logic_cond|Normal|2011|||\n"
        "2024-04-01T08:01:00.000Z|servo_cond|normal||||\n",
        encoding="utf-8",
    )
    source = AlarmLogSource(pattern="*.shdr", format="mtconnect", machine="HMC-5")
    result = read_alarm_log(shdr, source)
    c = result.counters
    assert (c["lines_total"], c["skipped_non_alarm"], c["read"]) == (9, 3, 6)
    assert (c["rejected_malformed_line"], c["rejected_bad_timestamp"]) == (1, 1)
    rows = result.kept.select("event", "alarm_code", "channel", "message").rows()
    assert rows == [
        ("raised", "MTCONNECT:2011", "logic_cond", "SPINDLE|OVERLOAD"),
        ("raised", "MTCONNECT:SERVO_COND", "servo_cond", "LUBE LOW"),  # no native code
        ("cleared", "MTCONNECT:2011", "logic_cond", None),
        ("cleared", None, "servo_cond", None),  # Normal without a code clears the item
    ]


@pytest.mark.skipif(not NIST.exists(), reason="../shared not present: NIST MTConnect log")
def test_real_nist_mazak_log() -> None:
    # Hand check (242 Warning events, 28 codes, 364 Normal, 193 Unavailable, 23181 lines):
    #   awk -F'|' 'NF>=7{print $3}' Mazak01-20180220-20180221.txt | sort | uniq -c
    #   awk -F'|' 'NF>=7 && $3=="Warning"{print $4}' Mazak01-20180220-20180221.txt | sort -u | wc -l
    #   wc -l Mazak01-20180220-20180221.txt
    # Of the 364 Normal lines 197 clear an active code (the rest report an idle item or the
    # adapter reconnecting after Unavailable), counted with this state machine:
    #   awk -F'|' 'NF>=7 { it=$2; lv=$3; c=$4;
    #     if (lv=="Warning"||lv=="Fault") act[it SUBSEP c]=1
    #     else if (lv=="Normal" && c!="") { k=it SUBSEP c; if (k in act) { n++; delete act[k] } }
    #     else if (lv=="Normal" && prev[it]!="Unavailable") { any=0
    #       for (k in act) { split(k,p,SUBSEP); if (p[1]==it) { any=1; delete act[k] } }
    #       n+=any }
    #     prev[it]=lv } END { print n }' Mazak01-20180220-20180221.txt
    result = read_alarm_log(NIST_LOG, NIST_SOURCE, NIST)
    c = result.counters
    assert c["lines_total"] == 23181
    assert (c["read"], c["kept"], c["rejected"]) == (242 + 197, 242 + 197, 0)
    assert c["skipped_non_alarm"] == 23181 - 439
    assert (result.kept["event"] == "cleared").sum() == 197
    raised = result.kept.filter(pl.col("event") == "raised")
    assert raised.height == 242
    assert raised["alarm_code"].n_unique() == 28
    assert set(raised["machine"]) == {"Mazak01"}
    top = raised["alarm_code"].value_counts(sort=True).row(0)
    assert top == ("MTCONNECT/MAZAK:212", 63)
    first = raised.row(0, named=True)
    assert (first["source_row"], first["message"], first["channel"]) == (
        110,
        "MOVE INH.(ATC ARM)",
        "logic_cond",
    )
    assert str(first["occurred_at"]) == "2018-02-20 12:50:12.420000"
    soft_limit = raised.filter(pl.col("channel") == "Ytravel").row(0, named=True)
    assert (soft_limit["alarm_code"], soft_limit["source_row"]) == ("MTCONNECT/MAZAK:101", 4569)


def test_directory_read_finds_logs_by_content_and_adds_up() -> None:
    files = alarm_log_files(SAMPLES, AlarmLogsConfig())
    assert [p.name for p, _ in files] == [
        "DMU-07_sinumerik_alarm_log_20240313.log",
        "VMC-03_fanuc_alarm_history_20240318.txt",
    ]
    assert [read_alarm_log_file(p, s).layout for p, s in files] == ["sinumerik", "fanuc"]
    result = read_alarm_logs(SAMPLES)
    c = result.counters
    assert c["files"] == 2
    assert c["lines_total"] == 29 + 35 == c["alarm_lines"] + c["skipped_non_alarm"]
    assert c["read"] == c["kept"] + c["rejected"] == 48
    again = read_alarm_logs(SAMPLES)
    assert again.kept["record_id"].to_list() == result.kept["record_id"].to_list()
    assert result.kept["record_id"].n_unique() == result.kept.height


def test_configured_pattern_overrides_content(tmp_path: Path) -> None:
    log = tmp_path / "VMC-9_history.txt"
    log.write_text("2024/03/18 08:00:00 401 SERVO ALARM\n", encoding="utf-8")
    assert read_alarm_log_file(log).layout == "fanuc"  # bare numbers: FANUC unless Haas is named
    cfg = AlarmLogsConfig(sources=[AlarmLogSource(pattern="VMC-9_*", format="haas")])
    [(path, source)] = alarm_log_files(tmp_path, cfg)
    read = read_alarm_log_file(path, source)
    assert (read.layout, read.result.kept["alarm_code"][0]) == ("haas", "HAAS:401")


def test_machine_from_config_content_or_name(tmp_path: Path) -> None:
    log = tmp_path / "alarmlog.txt"
    log.write_text("2024/03/18 08:00:00 SV0401 V READY OFF\n", encoding="utf-8")
    assert read_alarm_log_file(log).machine is None  # nothing names it: null, not a guess
    with pytest.raises(AlarmLogError, match=r"alarmlog\.txt: file name does not match"):
        read_alarm_log(log, AlarmLogSource(pattern="*", machine_pattern=r"^(?P<machine>M\d+)_"))
    named = AlarmLogSource(pattern="*", format="fanuc", machine="LATHE-1")
    kept = read_alarm_log(log, named).kept
    assert kept.select("machine", "alarm_code").row(0) == ("LATHE-1", "FANUC:SV0401")
    header = tmp_path / "export.txt"
    header.write_text(
        "Machine No.: HMC-12   Series 30i-B\n2024/03/18 08:00:00 SV0401 V READY OFF\n",
        encoding="utf-8",
    )
    assert read_alarm_log_file(header).machine == "HMC-12"
    for name, machine in [
        ("alarm_history_VMC-03_0i-MF.txt", "VMC-03"),
        ("Mazak01-20180220-20180221.txt", "Mazak01"),
        ("报警履历_CK6150_20240818.txt", "CK6150"),
        ("sinumerik 840D alarm log.csv", None),
    ]:
        assert machine_from_name(name) == machine


EXPORTS = REPO / "tests" / "fixtures" / "exports"


def _read(name: str, source: AlarmLogSource | None = None):
    return read_alarm_log_file(EXPORTS / name, source, EXPORTS)


def test_fanuc_0i_mf_memory_card_output() -> None:
    read = _read("VMC-11_0i-MF_alarm_history.txt")
    c = read.result.counters
    assert (read.layout, read.machine, read.encoding) == ("fanuc", "VMC-11", "gbk")
    # 10 lines: 2 '%', title, machine line; 6 entries, entry 5 cut off mid-time.
    assert (c["lines_total"], c["alarm_lines"], c["kept"], c["rejected_malformed_line"]) == (
        10, 6, 5, 1,
    )  # fmt: skip
    kept = read.result.kept
    assert kept["alarm_code"].to_list()[:2] == ["FANUC:SV0436", "FANUC:SV0401"]  # newest first
    assert kept["message"][0] == "软件热继电器(OVC) (Z轴)"


def test_fanuc_30i_two_line_screen() -> None:
    read = _read("HMC-21_30i_alarm.txt")
    kept = read.result.kept
    assert kept.select("source_row", "alarm_code", "message").rows() == [
        (2, "FANUC:SV0410", "EXCESS ERROR (STOP) (X)"),
        (4, "FANUC:SV0401", "V-READY OFF (X)"),
        (6, "FANUC:OH0700", "OVERHEAT:CONTROL UNIT"),
    ]
    assert read.result.counters["skipped_non_alarm"] == 4  # title + three code lines


def test_sinumerik_semicolon_events_in_chinese() -> None:
    read = _read("DMC-5_alarmlog.csv")
    kept = read.result.kept
    assert kept.select("event", "alarm_code").rows() == [
        ("raised", "SINUMERIK:27001"),
        ("acknowledged", "SINUMERIK:27001"),
        ("cleared", "SINUMERIK:27001"),
        ("raised", "SINUMERIK:700023"),
        ("cleared", "SINUMERIK:700023"),
    ]
    assert read.result.rejected["source_row"].to_list() == [6]  # "…;出现;" without a number


def test_sinumerik_fixed_column_table_in_german() -> None:
    read = _read("Alarmprotokoll_20240816.txt")
    assert read.machine == "DMU-50"  # from "Maschine: DMU-50" in the header
    kept = read.result.kept
    assert kept.filter(pl.col("source_row") == 4)["event"].to_list() == [
        "raised", "cleared", "acknowledged",
    ]  # fmt: skip
    went = kept.filter(pl.col("source_row") == 4, pl.col("event") == "cleared")
    assert str(went["occurred_at"][0]) == "2024-08-16 08:05:10.001000"
    assert kept.filter(pl.col("source_row") == 5)["message"][0] == "Kühlmittelstand zu niedrig"
    assert read.result.rejected.select("source_row", "reason").rows() == [(7, "bad_timestamp")]
    c = read.result.counters
    assert c["read"] == c["kept"] + c["rejected"] == 7  # 6 events + the 25:00 hour
    assert c["alarm_lines"] + c["skipped_non_alarm"] == c["lines_total"] == 7


def test_sinumerik_semicolon_table_in_english() -> None:
    read = _read("HMC-8_operate_alarms.csv")
    kept = read.result.kept
    assert kept.select("event", "alarm_code", "level").rows() == [
        ("raised", "SINUMERIK:25201", "NCK"),
        ("cleared", "SINUMERIK:25201", "NCK"),
        ("acknowledged", "SINUMERIK:25201", "NCK"),
        ("raised", "SINUMERIK:21000", "NCK"),
    ]
    assert kept["record_id"].n_unique() == 4  # one line, three events, three ids
    assert read.result.rejected.select("source_row", "reason").rows() == [(3, "malformed_line")]


def test_mtconnect_device_prefix_and_hex_codes() -> None:
    read = _read("cell3_agent.shdr")
    assert read.machine == "Okuma-MB5000"
    assert read.result.kept.select("event", "alarm_code", "channel").rows() == [
        ("raised", "OKUMA:81000061", "system"),  # the device names the controller
        ("raised", "OKUMA:2011", "Stravel"),
        ("cleared", None, "system"),
    ]


def test_mitsubishi_class_and_detail_number() -> None:
    read = _read("LATHE-2_M80_alarm_history.txt")
    kept = read.result.kept
    assert kept["alarm_code"].to_list() == [
        "MITSUBISHI:S02-2201",
        "MITSUBISHI:M01-0005",
        "MITSUBISHI:S03-0031",
        "MITSUBISHI:EMG",
    ]
    assert str(kept["occurred_at"][0]) == "2024-08-16 11:02:03"  # 24/08/16: year first


def test_haas_number_text_date() -> None:
    read = _read("Haas_VF-2_alarm_history.txt")
    assert (read.layout, read.machine) == ("haas", "VF-2")
    kept = read.result.kept
    assert kept["alarm_code"].to_list() == ["HAAS:108", "HAAS:108", "HAAS:9101"]
    assert str(kept["occurred_at"][2]) == "2024-08-16 13:20:01"  # 08/16/2024: month first


def test_configured_encoding_is_honoured(tmp_path: Path) -> None:
    log = tmp_path / "DMU-50_log.txt"
    log.write_bytes("16.08.2024 09:00:00 kommt 700016 PLC Kühlmittel\n".encode("cp1252"))
    read = read_alarm_log_file(log, AlarmLogSource(pattern="*", encoding="cp1252"))
    assert (read.encoding, read.result.kept["message"][0]) == ("cp1252", "Kühlmittel")


def test_warning_when_most_lines_do_not_parse(tmp_path: Path) -> None:
    log = tmp_path / "VMC-1_fanuc.txt"
    log.write_text(
        "2024/08/16 14:02:51 SV0436 OVC\n2024/08/16 14:0\n2024/08/1x 1\n2024/08/16 oops\n"
    )
    read = read_alarm_log_file(log, AlarmLogSource(pattern="*", format="fanuc"))
    assert read.warning is not None
    assert read.warning.startswith("VMC-1_fanuc.txt: 3 of 4 alarm lines do not parse")
    assert 'first bad line 2: "2024/08/16 14:0"' in read.warning
