"""What the report shows of the SFT rows and of earlier snapshots."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.publish.report.data import SampleDigest, snapshot_history
from pipeline.publish.report.page import render_report
from schemas.plan import Plan
from tests.pipeline.publish.report.fixtures import manifest, work_orders


def _section_html(page: str, key: str) -> str:
    start = page.index(f'<section id="{key}">')
    return page[start : page.index("</section>", start)]


def test_digest_merged_chunk_by_chunk_shows_what_the_whole_table_shows() -> None:
    """Top codes, machines (distinct codes over all chunks, not summed) and examples are the
    same whether the SFT rows are digested at once or a chunk at a time."""
    rows = work_orders()
    plan = Plan(headroom=0.15, stages=[])
    tokens = pl.DataFrame(schema={"tier": pl.String, "n_tokens": pl.Int32})
    whole = render_report(manifest(), plan, tokens, None, samples=SampleDigest.of(rows))
    merged = SampleDigest.of(rows.slice(0, 3))
    for chunk in (rows.slice(3, 2), rows.slice(5, 3)):
        merged = merged.merge(SampleDigest.of(chunk))
    chunked = render_report(manifest(), plan, tokens, None, samples=merged)
    assert merged.rows == rows.height
    for key in ("top", "examples"):
        assert _section_html(chunked, key) == _section_html(whole, key)
    machines = dict(zip(merged.machines["asset"], merged.machines["codes"].list.len(), strict=True))
    assert machines == {"CNC-25": 2, "M-205": 1, "M-102": 1}  # SV0436 in 3 chunks, counted once
    samples = dict(zip(merged.machines["asset"], merged.machines["len"], strict=True))
    assert samples == {"CNC-25": 4, "M-205": 2, "M-102": 1}
    codes = dict(zip(merged.codes["code"], merged.codes["len"], strict=True))
    assert codes["FANUC:SV0436"] == 3 and codes["FANUC:SV0401"] == 2
    assert merged.examples.group_by("tier").len().sort("tier")["len"].to_list() == [3, 2, 1]


def test_history_is_the_published_snapshots_oldest_first(tmp_path: Path) -> None:
    for snapshot_id in ("20240320T080000000000Z", "20240310T080000000000Z", ".staging-x"):
        folder = tmp_path / "snapshots" / snapshot_id
        folder.mkdir(parents=True)
        m = manifest().model_copy(update={"snapshot_id": snapshot_id})
        (folder / "manifest.json").write_text(m.model_dump_json(), encoding="utf-8")
    ids = [m.snapshot_id for m in snapshot_history(tmp_path)]
    assert ids == ["20240310T080000000000Z", "20240320T080000000000Z"]
