"""The funnel as Markdown, for the console and the Prefect artifact."""

from __future__ import annotations

from pipeline.publish.report.markdown import funnel_markdown
from tests.pipeline.publish.report.fixtures import manifest


def test_totals_stages_reasons_and_extra_sections() -> None:
    counts = manifest().counts
    text = funnel_markdown(counts, {"Manuals": {"files": 3, "chunks": 7}})
    assert f"Rows read **186**, kept **{counts.kept}**, rejected **{counts.rejected}**" in text
    assert "| workorder/dedup | 107 | 100 | 7 | exact_dup 4, near_dup 3 |" in text
    assert "- state_change: 16" in text
    assert text.endswith("Manuals:\n\n- files: 3\n- chunks: 7\n")
