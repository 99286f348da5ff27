# ruff: noqa: E501 - work-order lines are kept whole
"""Customer and company names from the configured list never reach a published table: kept
work orders, rejected rows' payloads, manuals' pretraining text and their rejects (issue 12)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.funnels.refresh import Sources, refresh
from schemas.config import PipelineConfig
from schemas.normalize import NormalizeConfig

CUSTOMERS = ["宁波精工机械有限公司", "Acme Tooling GmbH"]
WORKORDERS = (
    "工单号,设备编号,故障现象,故障原因,处理措施\n"
    "WO-1,VMC-850-02,宁波精工机械有限公司现场反映主轴高速异响,前轴承磨损,更换主轴前轴承 7014C 并重新预紧\n"
    "WO-2,HMC-630-01,ACME TOOLING GMBH reports X axis alarm SV0401 at start-up,amplifier fault,"
    "replaced the servo amplifier and reset\n"
    "WO-3,VMC-850-03,宁波精工机械有限公司来电,多出一列,无,x\n"  # one field too many: a reject
)
MANUAL = (
    "# 主轴维护\n\n## 轴承更换\n\n本手册为宁波精工机械有限公司定制。拆下主轴端盖，用拉马取出前轴承 7014C，"
    "装配新轴承后按规定力矩预紧，并空运转 30 分钟检查温升。\n"
)


def _published_text(snapshot: Path) -> str:
    """Every string cell of every published parquet table, joined."""
    cells = []
    for path in sorted(snapshot.rglob("*.parquet")):
        frame = pl.read_parquet(path)
        for name, dtype in frame.schema.items():
            if dtype == pl.String:
                cells += frame[name].drop_nulls().to_list()
    return "\n".join(cells)


def test_configured_customer_names_are_redacted_everywhere(tmp_path: Path) -> None:
    root = tmp_path / "in"
    root.mkdir()
    (root / "orders.csv").write_text(WORKORDERS, encoding="utf-8")
    (root / "spindle.md").write_text(MANUAL, encoding="utf-8")
    cfg = PipelineConfig(normalize=NormalizeConfig(customer_names=CUSTOMERS))
    published = refresh("x", Sources.everything(root), tmp_path / "out", cfg)
    text = _published_text(published.path)
    assert "[CUSTOMER]" in text
    for name in ("宁波精工", "Acme", "ACME"):
        assert name not in text
    rejects = pl.read_parquet(sorted((published.path / "rejects").rglob("*.parquet")))
    row3 = rejects.filter(pl.col("source_row") == 4)
    assert row3.height == 1 and "[CUSTOMER]" in row3["payload"][0]


def test_without_the_list_the_names_stay(tmp_path: Path) -> None:
    root = tmp_path / "in"
    root.mkdir()
    (root / "orders.csv").write_text(WORKORDERS, encoding="utf-8")
    published = refresh("x", Sources.everything(root), tmp_path / "out", PipelineConfig())
    assert "宁波精工机械有限公司" in _published_text(published.path)  # the list is what decides
