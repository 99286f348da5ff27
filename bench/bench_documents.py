"""Extraction time of the document parsers per 100 pages: a generated text-layer PDF
(each page an alarm table in the FANUC layout, wrapped cells, the header repeated, plus a
paragraph) and the same content as one HTML page per 100 PDF pages' worth of rows.

Usage: .venv/bin/python bench/bench_documents.py [--pages N] [--repeat R]
Prints seconds per 100 pages (median of R), blocks found, and the peak RSS of the process
(the PDF is read page by page, so the peak should not grow with --pages).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fpdf import FPDF

from pipeline.ingest.documents.html import html_blocks
from pipeline.ingest.documents.pdf import pdf_blocks

ROWS_PER_PAGE = 20  # what one A4 page of this table holds


def _rows(pages: int) -> list[tuple[str, str, str]]:
    return [
        (
            f"SV{i:04d}",
            f"SERVO ALARM {i} EXCESS ERROR IN MOVE",
            f"The position deviation during movement exceeded parameter {1828 + i % 9}. "
            "Check the machine load, the servo amplifier and the feedback cable.",
        )
        for i in range(pages * ROWS_PER_PAGE)
    ]


def _pdf(path: Path, pages: int) -> None:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=9)
    pdf.add_page()
    pdf.multi_cell(0, 5, "4 Alarm list. The alarms below stop all axes.")
    with pdf.table(col_widths=(22, 50, 110)) as table:
        for values in [("Alarm No.", "Message", "Description / Remedy"), *_rows(pages)]:
            row = table.row()
            for value in values:
                row.cell(value)
    pdf.output(str(path))


def _html(pages: int) -> str:
    body = "".join(f"<tr><td>{c}</td><td>{m}</td><td>{r}</td></tr>" for c, m, r in _rows(pages))
    return (
        "<html><body><nav><a href='/'>Home</a></nav><h1>4 Alarm list</h1>"
        "<table><thead><tr><th>Alarm No.</th><th>Message</th><th>Remedy</th></tr></thead>"
        f"<tbody>{body}</tbody></table></body></html>"
    )


def _median(fn: object, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "alarms.pdf"
        _pdf(path, args.pages)
        seconds, doc = _median(lambda: pdf_blocks(path), args.repeat)
        per_100 = seconds * 100 / doc.pages
        (table,) = [b for b in doc.blocks if b.kind == "table"]
        print(f"pdf : {doc.pages} pages, {len(doc.blocks)} blocks, {len(table.cells) - 1} rows "
              f"in one table: {seconds:.2f} s, {per_100:.2f} s per 100 pages")  # fmt: skip
    html = _html(args.pages)
    seconds, blocks = _median(lambda: html_blocks(html), args.repeat)
    per_100 = seconds * 100 / args.pages
    print(f"html: {args.pages * ROWS_PER_PAGE} rows ({len(html) / 1e6:.1f} MB), {len(blocks)} "
          f"blocks: {seconds:.3f} s, {per_100:.3f} s per 100 pages' rows")  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
