"""refresh-corpus over every sample source: one snapshot that accounts for every input line."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from flows.refresh_corpus import refresh_corpus


@pytest.fixture(scope="module")
def snapshot(prefect_server, sample_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    return Path(refresh_corpus(input=str(sample_data), out=str(out)))


def manifest(snapshot: Path) -> dict:
    return json.loads((snapshot / "manifest.json").read_text())


def physical_lines(path: Path) -> int:
    return len(path.read_bytes().splitlines())


def test_every_source_is_published(snapshot):
    kinds = pl.read_parquet(snapshot / "sft")["source_kind"].unique().sort().to_list()
    assert kinds == ["alarm_log", "workorder"]
    pretrain = pl.read_parquet(snapshot / "pretrain")
    assert pretrain.height > 0 and pretrain["n_tokens"].min() > 0
    codes = pl.read_parquet(snapshot / "fault_codes")
    assert {"FANUC:SV0401", "SINUMERIK:25000"} <= set(codes["code"])
    plan = json.loads((snapshot / "plan.json").read_text())
    corpora = ["pretrain", "tier_A", "tier_B", "sft_tools", "tier_C"]
    assert [s["corpus"] for s in plan["stages"]] == corpora
    tools = pl.read_parquet(snapshot / "sft_tools")
    assert tools.height > 0 and set(tools["kb_ids"].explode()) <= set(codes["record_id"])
    assert (snapshot / "trainer" / "dataset_info.json").exists()
    assert (snapshot / "trainer" / "llamafactory" / "sft-tools.yaml").exists()
    assert '<section id="timeline">' in (snapshot / "report.html").read_text(encoding="utf-8")


def test_manifest_accounts_for_every_line_and_row(snapshot, sample_data):
    m = manifest(snapshot)
    inputs = {i["path"]: i for i in m["inputs"]}
    assert {i["source_kind"] for i in m["inputs"]} == {"workorder", "alarm_log", "manual"}
    for path, info in inputs.items():
        if info["source_kind"] == "alarm_log":  # alarm-like lines + the other lines = the file
            assert info["rows"] + info["skipped_lines"] == physical_lines(sample_data / path)
    manual_lines = sum(
        physical_lines(sample_data / p) for p, i in inputs.items() if i["source_kind"] == "manual"
    )
    assert m["sources"]["manual"]["lines"] == manual_lines
    counts = m["counts"]
    logs = m["sources"]["alarm_log"]
    # Records: work-order rows and alarm incidents; alarm lines and events are counted before.
    assert counts["read"] == logs["incidents"] + sum(
        i["rows"] for i in m["inputs"] if i["source_kind"] == "workorder"
    )
    assert counts["read"] == counts["kept"] + counts["rejected"]
    assert counts["stages"]["alarm_log/ingest"]["read"] == sum(
        i["rows"] for i in m["inputs"] if i["source_kind"] == "alarm_log"
    )
    for kind in ("workorder", "alarm_log"):
        chain = [v for k, v in counts["stages"].items() if k.startswith(f"{kind}/")]
        for before, after in zip(chain, chain[1:], strict=False):
            assert after["read"] == before["kept"]
    rejects = pl.read_parquet(snapshot / "rejects").height
    side = m["sources"]["manual"]["rejected_pages"] + m["sources"]["fault_table"]["rejected"]
    events = logs["rejected_lines"] + logs["folded_events"]
    assert rejects == counts["rejected"] + side + events
    assert {s["path"] for s in m["skipped"]} >= {"workorders/README.md"}
    assert pl.read_parquet(snapshot / "sft").height == counts["kept"]


def test_bursts_merge_into_incidents_with_pointers(snapshot):
    rejects = pl.read_parquet(snapshot / "rejects").filter(pl.col("stage") == "incidents")
    merged = rejects.filter(pl.col("reason") == "merged_into_incident")
    assert merged.height > 0
    incidents = set(pl.read_parquet(snapshot / "sft")["record_id"]) | set(
        pl.read_parquet(snapshot / "rejects").filter(pl.col("stage") != "incidents")["record_id"]
    )
    assert set(merged["duplicate_of"]) <= incidents


def test_alarm_samples_are_fault_log_tier_unless_complete(snapshot):
    alarms = pl.read_parquet(snapshot / "sft").filter(pl.col("source_kind") == "alarm_log")
    assert alarms.height > 0
    incomplete = alarms.filter(pl.col("prevention").is_null() | pl.col("diagnosis").is_null())
    assert incomplete["tier"].unique().to_list() == ["C"]
    assert all(m[-1]["role"] == "assistant" for m in alarms["messages"].to_list())


def test_second_refresh_parses_only_what_changed(prefect_server, sample_data, tmp_path):
    import shutil

    inputs = tmp_path / "in"
    for kind in ("workorders", "alarm_logs", "manuals"):
        shutil.copytree(sample_data / kind, inputs / kind)
    out = tmp_path / "corpus"
    first = Path(refresh_corpus(input=str(inputs), out=str(out)))
    again = Path(refresh_corpus(input=str(inputs), out=str(out)))
    refresh = manifest(again)["refresh"]
    assert refresh["processed"] == []
    assert len(refresh["carried"]) == len(manifest(first)["inputs"])
    digests = [
        {o["path"]: o["sha256"] for o in manifest(s)["outputs"] if ".parquet" in o["path"]}
        for s in (first, again)
    ]
    assert digests[0] == digests[1]  # nothing changed, nothing differs

    log = next((inputs / "alarm_logs").glob("*sinumerik*"))
    log.write_bytes(
        log.read_bytes() + b"13.03.2024 16:02:11.250 came 25000 NCK Axis X1 "
        b"hardware fault of active encoder\n"
    )
    third = Path(refresh_corpus(input=str(inputs), out=str(out)))
    assert manifest(third)["refresh"]["processed"] == [f"alarm_logs/{log.name}"]
    counts = manifest(third)["counts"]
    assert counts["stages"]["alarm_log/ingest"]["read"] == (
        manifest(first)["counts"]["stages"]["alarm_log/ingest"]["read"] + 1
    )
    assert counts["read"] == counts["kept"] + counts["rejected"]
