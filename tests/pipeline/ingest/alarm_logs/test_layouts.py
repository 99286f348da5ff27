"""Report titles and header blocks above the column header, in every alarm-log layout."""

from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.alarm_logs.layouts import detect_layout
from pipeline.ingest.alarm_logs.reader import AlarmLogError, read_alarm_log_file
from pipeline.ingest.sniff import sniff
from schemas.alarm_logs import AlarmLogsConfig, AlarmLogSource
from tests.pipeline.ingest.alarm_logs.support import alarm_log_files

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "alarm_logs"
_EVENT = ("event", "alarm_code", "level", "message", "occurred_at")

# name, layout, lines of title and header block above the column header (hand-counted), the
# machine its `Machine:`/`Device:`/`机床编号:` line names, and the events (code, event) in order.
CASES = [
    (
        "fanuc_alarm_history.txt", "fanuc", 8, "VMC-03",
        [("FANUC:SV0401", "raised"), ("FANUC:SV0410", "raised"), ("FANUC:OH0700", "raised"),
         ("FANUC:PS0010", "raised")],
    ),
    (
        "报警履历_sinumerik.csv", "sinumerik", 5, "DMC-5",
        [("SINUMERIK:27001", "raised"), ("SINUMERIK:27001", "acknowledged"),
         ("SINUMERIK:27001", "cleared"), ("SINUMERIK:700023", "raised")],
    ),
    (
        "alarm_log_export.csv", "sinumerik", 6, "HMC-8",
        [("SINUMERIK:25201", "raised"), ("SINUMERIK:25201", "cleared"),
         ("SINUMERIK:25201", "acknowledged"), ("SINUMERIK:21000", "raised")],
    ),
    (
        "agent_export.shdr", "mtconnect", 4, "Okuma-MB5000",
        [("OKUMA:81000061", "raised"), ("OKUMA:2011", "raised"), (None, "cleared")],
    ),
    (
        "m80_alarm_history.txt", "mitsubishi", 5, "LATHE-2",
        [("MITSUBISHI:S02-2201", "raised"), ("MITSUBISHI:M01-0005", "raised"),
         ("MITSUBISHI:EMG", "raised")],
    ),
    (
        "haas_alarm_history.txt", "haas", 5, "VF-2",
        [("HAAS:108", "raised"), ("HAAS:108", "raised"), ("HAAS:9101", "raised")],
    ),
]  # fmt: skip


def _without_header(path: Path, lines: int, tmp_path: Path) -> Path:
    """The same export with its first `lines` lines (title and header block) cut, bytes kept."""
    body = path.read_bytes().split(b"\n", lines)[lines]
    out = tmp_path / path.name
    out.write_bytes(body)
    return out


@pytest.mark.parametrize(("name", "layout", "header", "machine", "expected"), CASES)
def test_header_block_gives_the_same_events(
    name: str, layout: str, header: int, machine: str, expected: list, tmp_path: Path
) -> None:
    path = FIXTURES / name
    assert sniff(path).kind == "alarm_log"
    read = read_alarm_log_file(path, root=FIXTURES)
    assert (read.layout, read.machine) == (layout, machine)
    kept = read.result.kept
    assert kept.select("alarm_code", "event").rows() == expected
    bare = read_alarm_log_file(_without_header(path, header, tmp_path), root=tmp_path)
    assert bare.layout == layout
    assert bare.machine != machine  # the file name names no machine: only the header did
    same = kept.select(_EVENT)
    if layout == "mtconnect":  # only the header's `Device: Okuma-MB5000` names the controller
        same = same.with_columns(pl.col("alarm_code").str.replace("^OKUMA:", "MTCONNECT:"))
        assert "names no controller" in (bare.warning or "")
    assert same.equals(bare.result.kept.select(_EVENT))
    assert (kept["source_row"] - header).to_list() == bare.result.kept["source_row"].to_list()
    c, b = read.result.counters, bare.result.counters
    # every title and header line is counted as a non-alarm line, none is malformed
    assert c["skipped_non_alarm"] == b["skipped_non_alarm"] + header
    assert (c["kept"], c["rejected"], c["read"]) == (b["kept"], b["rejected"], b["read"])
    assert c["lines_total"] == c["alarm_lines"] + c["skipped_non_alarm"]


def test_cut_entry_below_the_header_is_still_malformed() -> None:
    read = read_alarm_log_file(FIXTURES / "fanuc_alarm_history.txt", root=FIXTURES)
    assert read.encoding == "gbk"
    assert read.result.rejected.select("source_row", "reason").rows() == [(12, "malformed_line")]


def test_mtconnect_title_lines_are_not_malformed(tmp_path: Path) -> None:
    read = read_alarm_log_file(FIXTURES / "agent_export.shdr", root=FIXTURES)
    assert read.result.rejected.height == 0
    # below the first condition a stray line is malformed as before
    log = tmp_path / "HMC-5.shdr"
    log.write_text(
        "Adapter log\n2024-08-16T08:00:01.250Z|system|Fault|1|1|HIGH|OVERHEAT\ngarbage\n",
        encoding="utf-8",
    )
    rejected = read_alarm_log_file(log).result.rejected
    assert rejected.select("source_row", "reason").rows() == [(3, "malformed_line")]


def test_long_header_block_with_one_alarm_is_detected(tmp_path: Path) -> None:
    # 9 header lines and one entry: a fifth of the lines below the header, not of the file
    head = "".join(f"Field {k}: value {k}\n" for k in range(8))
    log = tmp_path / "export.txt"
    log.write_text(f"ALARM HISTORY\n{head}2024/03/18 08:00:00 SV0401 V READY OFF\n")
    assert detect_layout(log.read_text().splitlines()) == "fanuc"
    assert read_alarm_log_file(log).result.counters["skipped_non_alarm"] == 9


def test_header_only_far_above_the_entries_is_not_a_log(tmp_path: Path) -> None:
    # the first entry after line 30 is no report header: the file's prose counts
    text = "".join(f"Paragraph {k} of a maintenance note.\n" for k in range(40))
    doc = tmp_path / "notes.txt"
    doc.write_text(text + "2024/03/18 08:00:00 SV0401 V READY OFF\n")
    assert detect_layout(doc.read_text().splitlines()) is None
    with pytest.raises(AlarmLogError, match="no known alarm-log layout"):
        read_alarm_log_file(doc)


def test_configured_machine_wins_over_the_header() -> None:
    source = AlarmLogSource(pattern="*", machine="VMC-99")
    read = read_alarm_log_file(FIXTURES / "fanuc_alarm_history.txt", source, FIXTURES)
    assert set(read.result.kept["machine"]) == {"VMC-99"}


def test_directory_finds_every_fixture_by_content() -> None:
    found = {p.name: read_alarm_log_file(p, s).layout for p, s in alarm_log_files(
        FIXTURES, AlarmLogsConfig())}  # fmt: skip
    assert found == {name: layout for name, layout, *_ in CASES} | {
        "ERRALL.LS": "fanuc_robot",
        "cell5_ERRACT.LS": "fanuc_robot",
        "alarm_history_weld.txt": "fanuc_robot",
    }
