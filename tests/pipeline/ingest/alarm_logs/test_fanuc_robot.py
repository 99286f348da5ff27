"""FANUC robot controller error logs (ERRALL.LS / ERRACT.LS, the alarm-history screen)."""

from pathlib import Path

import polars as pl

from pipeline.ingest.alarm_logs.fanuc_robot import parse
from pipeline.ingest.alarm_logs.fields import lines_frame
from pipeline.ingest.alarm_logs.layouts import detect_layout
from pipeline.ingest.alarm_logs.reader import read_alarm_log_file
from pipeline.ingest.sniff import sniff
from schemas.alarm_logs import AlarmLogSource

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "alarm_logs"


def test_errall_ls_from_the_md_device() -> None:
    read = read_alarm_log_file(FIXTURES / "ERRALL.LS", root=FIXTURES)
    assert sniff(FIXTURES / "ERRALL.LS").layout == "fanuc_robot"
    assert (read.layout, read.machine) == ("fanuc_robot", "CELL3-R1")  # "Robot Name CELL3-R1"
    c = read.result.counters
    # 11 lines: title, blank, 9 entries; entry 819 is dated 31-FEB, entry 820 is cut off.
    assert (c["lines_total"], c["skipped_non_alarm"], c["alarm_lines"]) == (11, 2, 9)
    assert (c["read"], c["kept"], c["rejected_bad_timestamp"], c["rejected_malformed_line"]) == (
        9, 7, 1, 1,
    )  # fmt: skip
    kept = read.result.kept
    assert kept.select("alarm_code", "event", "level").rows() == [
        ("FANUC_ROBOT:SRVO-050", "raised", "SERVO"),
        ("FANUC_ROBOT:SRVO-053", "raised", "WARN"),
        (None, "cleared", "RESET"),  # R E S E T: the operator's reset clears the alarms
        ("FANUC_ROBOT:INTP-105", "raised", "STOP.L"),
        ("FANUC_ROBOT:MOTN-017", "raised", "STOP.G"),
        ("FANUC_ROBOT:SYST-026", "raised", "NONE"),
        ("FANUC_ROBOT:PWD-067", "raised", "WARN"),  # "PWD -067": the space is no part of it
    ]
    assert set(kept["family"]) == {"FANUC_ROBOT"}
    intp = kept.filter(pl.col("source_row") == 6).row(0, named=True)
    assert intp["native_code"] == "INTP-105"
    assert intp["message"] == "(MAIN, 12) Run request failed; MCTL-014 Waiting for Servo ready"
    assert str(intp["occurred_at"]) == "2024-03-18 10:19:47"
    assert kept["message"][0] == "Collision Detect alarm (G:1 A:2)"  # padding gone
    rejects = read.result.rejected.select("source_row", "reason").rows()
    assert rejects == [(10, "bad_timestamp"), (11, "malformed_line")]


def test_each_field_quoted_and_default_robot_name() -> None:
    read = read_alarm_log_file(FIXTURES / "cell5_ERRACT.LS", root=FIXTURES)
    assert read.machine == "cell5"  # "Robot Name ROBOT" is the factory default: the file name
    kept = read.result.kept
    assert kept.select("alarm_code", "event", "level").rows() == [
        ("FANUC_ROBOT:SRVO-050", "raised", "FAULT"),
        ("FANUC_ROBOT:SRVO-002", "raised", "SERVO"),
        ("FANUC_ROBOT:TPIF-013", "raised", "WARN"),
        (None, "cleared", "RESET"),
    ]
    assert str(kept["occurred_at"][0]) == "2018-03-24 10:22:31"  # 24-MAR-18: day first
    assert read.result.counters["skipped_non_alarm"] == 2


def test_history_screen_in_columns_below_a_report_header() -> None:
    read = read_alarm_log_file(FIXTURES / "alarm_history_weld.txt", root=FIXTURES)
    assert (read.layout, read.machine) == ("fanuc_robot", "WELD-2")
    kept = read.result.kept
    assert kept.select("source_row", "alarm_code", "level", "message").rows() == [
        (6, "FANUC_ROBOT:ARC-013", "STOP.G", "Arc Start failed (E1:L1)"),
        (7, "FANUC_ROBOT:MOTN-023", "STOP.G", "In singularity"),  # state bits dropped
        (8, "FANUC_ROBOT:SRVO-062", "SERVO2", "BZAL alarm (G:1 A:3)"),
        (9, "FANUC_ROBOT:SYST-026", None, "System normal power up"),
    ]
    assert read.result.counters["skipped_non_alarm"] == 5  # title, 2 header lines, blank, columns


def test_cnc_histories_and_programs_are_not_robot_logs() -> None:
    cnc = ["  1  2024/03/18  15:46:03  SV0401  V READY OFF (Y)"]
    assert parse(lines_frame(cnc))["kind"].to_list() == ["malformed"]  # no FAMILY-nnn code
    program = ["/PROG  MAIN", "/ATTR", "/MN", "   1:  J P[1] 100% FINE    ;", "/END"]
    assert detect_layout(program, "MAIN.LS") is None
    assert set(parse(lines_frame(program))["kind"]) == {"skip"}


def test_configured_family_and_format(tmp_path: Path) -> None:
    log = tmp_path / "R2_errall.ls"
    log.write_text('5" 02-JAN-25 06:00:00 " SRVO-001 Operator panel E-stop " " SERVO 00110110"\n')
    source = AlarmLogSource(pattern="*", format="fanuc_robot", family="FANUC_R30IB")
    read = read_alarm_log_file(log, source)
    assert (read.machine, read.result.kept["alarm_code"].to_list()) == (
        "R2",
        ["FANUC_R30IB:SRVO-001"],
    )
