"""refresh-corpus with zero configuration on a flat folder of shop exports: every file is in the
manifest (read by a named reader, or skipped with a reason and a warning line), and the counts
add up from lines to events to incidents to samples."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from flows.refresh_corpus import refresh_corpus

EXPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "exports"


@pytest.fixture(scope="module")
def run(prefect_server, tmp_path_factory) -> tuple[Path, Path, str]:
    inputs = tmp_path_factory.mktemp("flat")
    for path in EXPORTS.iterdir():
        shutil.copy(path, inputs / path.name)
    out = tmp_path_factory.mktemp("corpus")
    return inputs, out, refresh_corpus(input=str(inputs), out=str(out))


def manifest(snapshot: str) -> dict:
    return json.loads((Path(snapshot) / "manifest.json").read_text())


def test_every_file_is_read_or_skipped_with_a_reason(run):
    inputs, _, snapshot = run
    m = manifest(snapshot)
    read = {i["path"]: i["reader"] for i in m["inputs"]}
    skipped = {s["path"]: s["reason"] for s in m["skipped"]}
    assert set(read) | set(skipped) == {p.name for p in inputs.iterdir()}
    assert not set(read) & set(skipped)
    assert set(skipped) == {"LICENSE", "README.md", "camera.jpg", "agent.log"}
    assert all(reason for reason in skipped.values())
    layouts = {r for r in read.values() if r.startswith("alarm_log:")}
    assert layouts == {
        f"alarm_log:{x}" for x in ("fanuc", "sinumerik", "mtconnect", "mitsubishi", "haas")
    }
    assert {"workorder:csv", "workorder:jsonl", "manual:markdown", "manual:text"} <= set(
        read.values()
    )


def test_counts_add_up_from_lines_to_samples(run):
    inputs, _, snapshot = run
    m = manifest(snapshot)
    counts, logs = m["counts"], m["sources"]["alarm_log"]
    logs_in = [i for i in m["inputs"] if i["source_kind"] == "alarm_log"]
    # lines: every physical line is an alarm line or skipped; events + bad lines = rows read
    assert logs["lines"] == sum(
        len((inputs / i["path"]).read_bytes().splitlines()) for i in logs_in
    )
    ingest = counts["stages"]["alarm_log/ingest"]
    assert ingest["read"] == sum(i["rows"] for i in logs_in)
    assert (
        ingest["kept"]
        == logs["events"]
        == logs["raises"] + logs["clears"] + logs["acknowledgements"]
    )
    assert ingest["rejected"] == logs["rejected_lines"]
    # events: each is an incident or folded into one (a repeat or a clear/acknowledgement)
    folded = counts["stages"]["alarm_log/incidents"]
    assert folded["read"] == logs["events"] == logs["incidents"] + logs["folded_events"]
    # the headline counts records: work-order rows and incidents
    workorder_rows = sum(i["rows"] for i in m["inputs"] if i["source_kind"] == "workorder")
    assert counts["read"] == workorder_rows + logs["incidents"]
    assert counts["read"] == counts["kept"] + counts["rejected"]
    assert counts["stages"]["alarm_log/cross_source"]["read"] == logs["incidents"]
    incidents = pl.read_parquet(Path(snapshot) / "incidents")
    assert incidents.height == logs["incidents"]
    assert incidents["occurrences"].sum() == logs["raises"]
    assert incidents["raise_lines"].list.len().sum() == logs["raises"]
    rejects = pl.read_parquet(Path(snapshot) / "rejects").height
    manuals = m["sources"]["manual"]["rejected_pages"] + m["sources"]["fault_table"]["rejected"]
    assert rejects == counts["rejected"] + logs["rejected_lines"] + logs["folded_events"] + manuals


def test_incidents_link_to_work_orders_and_unexplained_ones_stay(run):
    _, _, snapshot = run
    incidents = pl.read_parquet(Path(snapshot) / "incidents")
    sft = pl.read_parquet(Path(snapshot) / "sft")
    orders = dict(zip(sft["record_id"], sft["order_id"], strict=True))
    linked = {
        (r["machine"], r["codes"][0]): orders.get(r["workorder_id"])
        for r in incidents.filter(pl.col("workorder_id").is_not_null()).iter_rows(named=True)
    }
    assert linked[("VMC-11", "FANUC:SV0436")] == "WX2408-031"
    assert linked[("HMC-8", "SINUMERIK:25201")] == "SO-7781"
    unexplained = incidents.filter(~pl.col("fault_code_entry") & pl.col("workorder_id").is_null())
    assert unexplained.height > 0  # kept, not rejected
    samples = sft.filter(pl.col("source_kind") == "alarm_log")
    assert set(samples["record_id"]) <= set(
        incidents.filter(pl.col("fault_code_entry"))["incident_id"]
    )


def test_one_warning_line_per_skipped_file(tmp_path, prefect_server, capfd):
    (tmp_path / "in").mkdir()
    for name in ("HMC-21_30i_alarm.txt", "LICENSE", "camera.jpg"):
        shutil.copy(EXPORTS / name, tmp_path / "in" / name)
    refresh_corpus(input=str(tmp_path / "in"), out=str(tmp_path / "out"))
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert [w.split(":")[1].strip() for w in warnings] == ["LICENSE", "camera.jpg"]
