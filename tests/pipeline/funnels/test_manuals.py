"""The manual funnel in a real refresh (`pipeline.funnels.refresh`, in process): a PDF over
`manuals.max_pdf_pages` beside a normal manual."""

from __future__ import annotations

from pathlib import Path

import pdfplumber.page
import polars as pl
import pytest

from pipeline.funnels.refresh import Sources, refresh
from schemas.config import PipelineConfig
from tests.pipeline.ingest.documents.support import one_line_pdf

GUIDE = """# Spindle maintenance

## Belt tension

Check the spindle belt tension every 500 operating hours. A belt that slips raises alarm
SP9031 SPINDLE SPEED DEVIATION during heavy cuts; retension it to the value on the plate.
"""


def test_pdf_over_the_page_limit_is_quarantined_unread_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "in"
    (root / "manuals").mkdir(parents=True)
    one_line_pdf(
        root / "manuals" / "shift_reports_2019_2024.pdf",
        5000,
        "Shift report {n}: spindle warm-up done, no alarm.",
    )
    (root / "manuals" / "spindle_guide.md").write_text(GUIDE, encoding="utf-8")

    def no_page(*args: object, **kwargs: object) -> None:
        raise AssertionError("a page of the PDF was read")

    monkeypatch.setattr(pdfplumber.page.Page, "__init__", no_page)
    published = refresh(
        "clean-manuals", Sources(root, manuals=root / "manuals"), tmp_path / "out", PipelineConfig()
    )
    (quarantined,) = published.manifest.quarantined
    assert (quarantined.path, quarantined.reason) == (
        "manuals/shift_reports_2019_2024.pdf",
        "too_many_pages",
    )
    assert quarantined.detail == (
        "manuals/shift_reports_2019_2024.pdf: 5000 pages, more than manuals.max_pdf_pages "
        "(2000); not read"
    )
    rejects = pl.read_parquet(published.path / "rejects")
    row = rejects.filter(pl.col("stage") == "quarantine").row(0, named=True)
    assert (row["source_file"], row["reason"]) == (quarantined.path, "too_many_pages")
    # the manual beside it is read
    assert {i.path for i in published.manifest.inputs} == {"manuals/spindle_guide.md"}
    pretrain = pl.read_parquet(published.path / "pretrain")
    assert pretrain["source_file"].unique().to_list() == ["manuals/spindle_guide.md"]
    assert "retension it to the value on the plate" in "\n".join(pretrain["text"])
