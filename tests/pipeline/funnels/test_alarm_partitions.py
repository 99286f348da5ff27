"""The alarm funnel by machine partitions publishes what the one-step funnel publishes."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import polars as pl

from pipeline.alarms.incidents import WORKORDER_LINK_COLUMNS, machine_partition
from pipeline.funnels import alarm_logs
from pipeline.funnels import alarm_logs as alarm_funnel
from pipeline.funnels.incremental import collect_published
from pipeline.funnels.refresh import Sources, refresh
from schemas.config import PipelineConfig


def _shard_rows(cfg: PipelineConfig, rows: int) -> PipelineConfig:
    return cfg.model_copy(
        update={"execution": cfg.execution.model_copy(update={"shard_rows": rows})}
    )


def _published(path: Path) -> dict[str, pl.DataFrame]:
    sft = pl.read_parquet(sorted(path.glob("sft/tier=*/part-*.parquet")))
    rejects = pl.read_parquet(path / "rejects")
    return {
        "sft": sft.sort(sft.columns),
        "rejects": rejects.sort([c for c, t in rejects.schema.items() if t.is_(pl.String)]),
        "incidents": pl.read_parquet(path / "incidents"),
    }


def test_machines_typed_differently_share_a_partition() -> None:
    """Work orders link to incidents by machine compared loosely: VMC-03 = vmc 03 = VMC_03."""
    frame = pl.DataFrame({"asset": ["VMC-03", "vmc 03", "VMC_03", "DMU-07", None, "dmu07"]})
    part = machine_partition(frame, "asset", 64).to_list()
    assert part[0] == part[1] == part[2] and part[3] == part[5] and part[4] == 0
    split = alarm_logs.split(frame, "asset", 64)
    assert sum(r.kept.height for r in split.values()) == frame.height


# Service orders typed on the days of the sample alarm logs, the machine named as a
# technician types it (not as the controller exports it), the alarm number in the text.
ORDERS = [
    ("Order No", "Asset", "Machine Model", "Reported At", "Problem Description", "Cause",
     "Corrective Action", "Technician", "Status"),
    ("WO-3101", "vmc 03", "VMC850 (FANUC 0i-MF)", "2024-03-18 16:05",
     "Y axis stopped with SV0410 excess error at stop, then SV0401 V READY OFF; "
     "axis will not enable.",
     "Y servo amplifier DC link capacitor bulged, ripple on the 300 V bus.",
     "Replaced Y amplifier A06B-6117-H105, checked parameters 1825/1826, test cut OK.",
     "Li Wei", "Closed"),
    ("WO-3102", "DMU_07", "DMU 65 monoBLOCK (840D sl)", "2024-03-12 09:40",
     "Alarm 25201 drive fault X1 together with 25000 encoder hardware fault, machine "
     "stopped in cycle.",
     "Encoder cable plug on X1 motor loose, shield clamp missing.",
     "Re-seated and locked the encoder plug, fitted shield clamp, ran reference point.",
     "J. Weber", "Closed"),
    ("WO-3103", "VMC-03", "VMC850 (FANUC 0i-MF)", "2024-03-18 11:30",
     "Coolant low level alarm EX1002 twice this morning.",
     "Coolant tank at 20 %, evaporation over the weekend.",
     "Topped up coolant 60 L, concentration 6 %.", "Li Wei", "Closed"),
]  # fmt: skip


def test_alarm_funnel_in_machine_partitions_publishes_the_same(sample_data, tmp_path) -> None:
    root = tmp_path / "in"
    for kind in ("alarm_logs", "manuals"):
        shutil.copytree(sample_data / kind, root / kind)
    (root / "workorders").mkdir()
    with (root / "workorders" / "service_orders_march.csv").open("w", newline="") as f:
        csv.writer(f).writerows(ORDERS)
    folders = {k: root / k for k in ("workorders", "alarm_logs", "manuals")}
    sources = Sources(root, **folders)
    cfg = PipelineConfig()
    one = refresh("refresh-corpus", sources, tmp_path / "one", cfg)
    many = refresh("refresh-corpus", sources, tmp_path / "many", _shard_rows(cfg, 7))
    incidents = pl.read_parquet(one.path / "incidents")
    parts = -(-one.manifest.sources["alarm_log"]["events"] // 7)
    machines = machine_partition(incidents, "machine", parts).unique()
    assert parts > 1 and machines.len() > 1  # the machines really are in two partitions
    linked = incidents.filter(pl.col("workorder_id").is_not_null())
    print(linked.select("machine", "codes", "workorder_ids"))
    assert linked["machine"].n_unique() == 2  # and link work orders on both machines
    a, b = _published(one.path), _published(many.path)
    for name in a:
        assert a[name].equals(b[name]), name
    counts = json.loads((one.path / "manifest.json").read_text())["counts"]
    assert counts == json.loads((many.path / "manifest.json").read_text())["counts"]
    assert one.manifest.sources == many.manifest.sources


def test_incidents_link_carried_work_orders_read_in_pieces(
    sample_data, tmp_path, monkeypatch
) -> None:
    """A refresh that carries the work-order file over links the incidents to its published
    rows, read back a range of `shard_rows` rows at a time, as the first run linked them."""
    root = tmp_path / "in"
    shutil.copytree(sample_data / "alarm_logs", root / "alarm_logs")
    (root / "workorders").mkdir()
    with (root / "workorders" / "service_orders_march.csv").open("w", newline="") as f:
        csv.writer(f).writerows(ORDERS)
    sources = Sources(root, workorders=root / "workorders", alarm_logs=root / "alarm_logs")
    cfg = PipelineConfig()
    first = refresh("refresh-corpus", sources, tmp_path / "out", cfg)
    pieces: list[pl.DataFrame] = []

    def reading(rows: pl.LazyFrame, snapshot: Path) -> pl.DataFrame:  # the real read, noted
        pieces.append(collect_published(rows, snapshot))
        return pieces[-1]

    monkeypatch.setattr(alarm_funnel, "collect_published", reading)
    again = refresh("refresh-corpus", sources, tmp_path / "out", _shard_rows(cfg, 1))
    assert again.manifest.refresh.carried == first.manifest.refresh.processed
    assert [p.height for p in pieces] == [1] * (len(ORDERS) - 1)  # one work order a piece
    assert all(p.columns == list(WORKORDER_LINK_COLUMNS) for p in pieces)
    linked = pl.read_parquet(again.path / "incidents").filter(pl.col("workorder_id").is_not_null())
    assert linked["machine"].n_unique() == 2
    a, b = _published(first.path), _published(again.path)
    for name in a:
        assert a[name].equals(b[name]), name
