"""Alarm cascades: alarms raised together on one machine are one incident carrying every code,
in every log layout. The logs are hand-written in each vendor's documented layout (see the
parsers in pipeline/ingest/alarm_logs/): a drive fault and the axis alarms it causes, an
emergency stop and the alarms behind it, each followed minutes later by an unrelated alarm
that must stay an incident of its own."""

from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from pipeline.alarms.incidents import build_incidents
from pipeline.ingest.alarm_logs.reader import read_alarm_log_file
from schemas.alarm_logs import IncidentConfig

REPO = Path(__file__).resolve().parents[3]
NIST_LOG = REPO.parent / "shared/external/nist-smstestbed-mtconnect/Mazak01-20180220-20180221.txt"


CASCADES = REPO / "tests" / "fixtures" / "alarm_cascades"
CASES = [
    # file, layout, the cascade's codes, the unrelated alarm minutes later
    ("VMC-21_fanuc_alarm_history.txt", "fanuc",  # IPM alarm -> V READY OFF, excess error
     ["FANUC:SV0449", "FANUC:SV0401", "FANUC:SV0411"], ["FANUC:OT0500"]),
    ("ERRALL.LS", "fanuc_robot",  # operator-panel E-stop -> external E-stop, run request failed
     ["FANUC_ROBOT:INTP-105", "FANUC_ROBOT:SRVO-001", "FANUC_ROBOT:SRVO-007"],
     ["FANUC_ROBOT:SRVO-050"]),
    ("DMC-9_sinumerik_alarm_log.log", "sinumerik",  # E-stop -> controller enable, PLC E-stop
     ["SINUMERIK:3000", "SINUMERIK:21612", "SINUMERIK:700001"], ["SINUMERIK:700016"]),
    ("Mazak07_agent.txt", "mtconnect",  # amplifier overcurrent -> E-stop -> axis not ready
     ["MAZAK:25", "MAZAK:39", "MAZAK:403"], ["MAZAK:212"]),
    ("LATHE-4_m80_alarm_history.txt", "mitsubishi",  # servo alarm -> EMG SRV
     ["MITSUBISHI:S01-0032", "MITSUBISHI:EMG"], ["MITSUBISHI:M01-0005"]),
    ("VF-4_haas_alarm_history.txt", "haas",  # X drive fault -> servos off, emergency off
     ["HAAS:161", "HAAS:102", "HAAS:107"], ["HAAS:9101"]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "layout", "cascade", "later"), CASES)
def test_a_cascade_is_one_incident_in_every_layout(
    name: str, layout: str, cascade: list[str], later: list[str]
) -> None:
    read = read_alarm_log_file(CASCADES / name, root=CASCADES)
    assert read.layout == layout
    incidents = build_incidents(read.result.kept).kept.sort("first_at")
    # raises stamped the same second keep the file's order: compare the codes as sets
    assert incidents["alarm_codes"].list.sort().to_list() == [sorted(cascade), later]
    assert incidents["count"].to_list() == [len(cascade), 1]
    # with no cascade window, the same raises are one incident per code (same instant aside)
    apart = build_incidents(read.result.kept, IncidentConfig(cascade_window_s=0)).kept
    assert apart.height > 2


def test_the_window_is_counted_from_the_previous_raise_on_the_machine_only() -> None:
    from tests.pipeline.alarms.test_incidents import _events

    events = _events(
        ("VMC-03", "SV0449", 0),
        ("VMC-04", "SV0401", 1),  # another machine: never part of VMC-03's cascade
        ("VMC-03", "SV0401", 3),
        ("VMC-03", "SV0411", 7),  # 4 s after the previous raise: the cascade goes on
        ("VMC-03", "OT0500", 13),  # 6 s: a new incident
    )
    got = build_incidents(events, IncidentConfig(cascade_window_s=5)).kept.sort("machine")
    assert got.select("machine", "alarm_codes").rows() == [
        ("VMC-03", ["FANUC:SV0449", "FANUC:SV0401", "FANUC:SV0411"]),
        ("VMC-03", ["FANUC:OT0500"]),
        ("VMC-04", ["FANUC:SV0401"]),
    ]
    first = got.row(0, named=True)
    assert first["first_at"] == datetime(2024, 3, 16, 8, 0, 0) and first["count"] == 3


def test_a_cascade_clears_when_its_last_alarm_clears() -> None:
    path = CASCADES / "DMC-9_sinumerik_alarm_log.log"
    incidents = build_incidents(read_alarm_log_file(path, root=CASCADES).result.kept).kept
    assert incidents.sort("first_at")["cleared_at"].to_list() == [
        datetime(2024, 9, 3, 14, 23, 5, 100000),
        None,
    ]


class _Oracle:
    """Incidents of one SHDR log read line by line from the MTConnect semantics (not with the
    parser): raises linked by cascade (the previous raise on the machine within `cascade_s`),
    burst (the previous raise of the code within `gap_s`) and continuation (the code still
    active, or raised within `gap_s` of its clear; a `Normal` right after `Unavailable`
    clears nothing); the incidents are the union-find's sets."""

    def __init__(self, path: Path, gap_s: float) -> None:
        self.gap_s, self.raises, self.parent = gap_s, [], []
        self.active: dict[str, set[str]] = {}
        self.ended: dict[tuple[str, str], datetime | None] = {}
        self.last: dict[tuple[str, str], int] = {}
        previous: dict[str, str] = {}
        for line in path.read_text().splitlines():
            f = line.split("|")
            if len(f) >= 7 and f[2] in ("Normal", "Warning", "Fault", "Unavailable"):
                t = datetime.fromisoformat(f[0].rstrip("Z"))
                self.condition(t, f[1], f[2], f[3], previous.get(f[1]))
                previous[f[1]] = f[2]

    def root(self, i: int) -> int:
        while self.parent[i] != i:
            i = self.parent[i]
        return i

    def link(self, i: int, j: int) -> None:
        self.parent[self.root(i)] = self.root(j)

    def condition(self, t: datetime, item: str, level: str, code: str, before: str | None) -> None:
        codes = self.active.setdefault(item, set())
        if level in ("Warning", "Fault"):
            key, i = (item, code), len(self.raises)
            self.parent.append(i)
            self.raises.append((t, code))
            end = self.ended.get(key)
            if key in self.last and (end is None or (t - end).total_seconds() <= self.gap_s):
                self.link(i, self.last[key])
            self.last[key], self.ended[key] = i, None
            codes.add(code)
        elif level == "Normal" and code in codes:
            codes.discard(code)
            self.ended[(item, code)] = t
        elif level == "Normal" and not code and before != "Unavailable":
            self.ended.update({(item, c): t for c in codes})
            codes.clear()

    def incidents(self, cascade_s: float) -> int:
        order = sorted(range(len(self.raises)), key=lambda i: self.raises[i][0])
        by_code: dict[str, int] = {}
        for a, b in zip([None, *order], order, strict=False):
            t, code = self.raises[b]
            if a is not None and (t - self.raises[a][0]).total_seconds() <= cascade_s:
                self.link(b, a)
            if (
                code in by_code
                and (t - self.raises[by_code[code]][0]).total_seconds() <= self.gap_s
            ):
                self.link(b, by_code[code])
            by_code[code] = b
        return len({self.root(i) for i in range(len(self.raises))})


@pytest.mark.skipif(not NIST_LOG.exists(), reason="../shared not present: NIST MTConnect log")
@pytest.mark.parametrize(("cascade_s", "gap_s"), [(5, 600), (0, 600), (5, 3600), (3, 60)])
def test_nist_incidents_agree_with_a_line_by_line_reading(cascade_s: float, gap_s: float) -> None:
    read = read_alarm_log_file(NIST_LOG, root=NIST_LOG.parent)
    cfg = IncidentConfig(cascade_window_s=cascade_s, burst_gap_s=gap_s)
    incidents = build_incidents(read.result.kept, cfg).kept
    assert incidents.height == _Oracle(NIST_LOG, gap_s).incidents(cascade_s)
    assert incidents["count"].sum() == 242


@pytest.mark.skipif(not NIST_LOG.exists(), reason="../shared not present: NIST MTConnect log")
def test_nist_alarm_active_across_adapter_reconnects_is_one_incident() -> None:
    # DATA RENEWAL NOT ALLOWED (442, system_cond): raised 18:54:30; Unavailable 18:55:27;
    # the reconnect's Normal 19:03:17; raised 19:29:15; Unavailable 19:30:10; Normal 19:52:03;
    # raised 20:01:18; no clear: one incident of 3 raises, still active at the end of the day.
    read = read_alarm_log_file(NIST_LOG, root=NIST_LOG.parent)
    incidents = build_incidents(read.result.kept).kept
    renewal = incidents.filter(
        pl.col("alarm_codes") == ["MAZAK:442"], pl.col("first_at") > datetime(2018, 2, 20, 18)
    )
    assert renewal.select("count", "last_at", "cleared_at").rows() == [
        (3, datetime(2018, 2, 20, 20, 1, 18, 573000), None)
    ]
