"""Every manual under a folder, read at once: the tests' shortcut (the flows read one file at
a time through `pipeline.funnels.manuals`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
from fpdf import FPDF

from pipeline.core.stage import StageResult, empty_rejects, stage_result
from pipeline.ingest.documents.manuals import read_manual
from schemas.documents import DOCUMENT_BLOCK_SCHEMA
from schemas.manuals import MANUAL_SECTION_SCHEMA, ManualsConfig, ManualSource
from tests.pipeline.ingest.support import claimed_files


def manual_files(root: str | Path, cfg: ManualsConfig) -> list[tuple[Path, ManualSource]]:
    """Files under `root` that a source of `cfg` claims (first matching source wins), sorted."""
    return claimed_files(root, cfg.sources)


def read_manuals(root: str | Path, cfg: ManualsConfig | None = None) -> StageResult:
    """Every manual under `root` → sections; counters add up over files (plus `files`)."""
    cfg = cfg or ManualsConfig()
    results = [read_manual(path, source, root) for path, source in manual_files(root, cfg)]
    totals: Counter[str] = Counter()
    for result in results:
        totals.update({k: result.counters[k] for k in ("lines_total", "pages")})
    kept = (
        pl.concat([r.kept for r in results])
        if results
        else pl.DataFrame(schema=MANUAL_SECTION_SCHEMA)
    )
    rejected = pl.concat([r.rejected for r in results]) if results else empty_rejects()
    return stage_result(
        kept,
        rejected,
        read=kept.height + rejected.height,
        lines_total=totals["lines_total"],
        pages=totals["pages"],
        files=len(results),
    )


def read_blocks(root: str | Path, cfg: ManualsConfig | None = None) -> pl.DataFrame:
    """The document blocks (DOCUMENT_BLOCK_SCHEMA) of every manual under `root`."""
    cfg = cfg or ManualsConfig()
    frames = [
        read_manual(path, source, root).state["blocks"] for path, source in manual_files(root, cfg)
    ]
    return pl.concat(frames) if frames else pl.DataFrame(schema=DOCUMENT_BLOCK_SCHEMA)


def one_line_pdf(path: Path, pages: int, line: str) -> None:
    """A PDF of `pages` pages, one short line of text each (`line`, `{n}` the page number)."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.text(20, 30, line.format(n=number))
    pdf.output(str(path))
