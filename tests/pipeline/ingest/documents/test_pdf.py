"""PDF manuals read with pdfplumber: alarm tables over page breaks, wrapped cells, two-column
pages, scanned pages, damaged and encrypted files.

The fixtures are built with fpdf2 in the layouts FANUC and SINUMERIK print their alarm lists
in (code, message, cause/remedy columns; the header repeated on each page). No CJK font is
installed on the build machines, so the PDF text is English (the vendors' English manuals);
Chinese text is covered by the text, Markdown and HTML parsers.
"""

from pathlib import Path

import polars as pl
import pytest
from fpdf import FPDF

from pipeline.ingest.documents.blocks import ManualError
from pipeline.ingest.documents.manuals import read_manual
from pipeline.ingest.documents.pdf import pdf_blocks
from schemas.documents import DOCUMENT_BLOCK_SCHEMA
from schemas.manuals import ManualSource

PDF = ManualSource(pattern="*.pdf", format="pdf")
HEADER = ("Alarm No.", "Message", "Description / Remedy")
# 44 servo alarms: the table runs over three pages, its header repeated on each
ALARMS = [
    (
        f"SV{400 + i:04d}",
        f"SERVO ALARM {i} EXCESS ERROR",
        f"The position deviation of axis {i % 5 + 1} exceeded the limit set in parameter "
        f"{1828 + i}. Check the machine load and the servo amplifier.",
    )
    for i in range(44)
]


class _ManualPages(FPDF):
    """Pages with the running header vendors print at the top of every page."""

    def header(self) -> None:
        self.set_font("Helvetica", size=7)
        self.cell(0, 5, "B-64695EN/01 MAINTENANCE", new_x="LMARGIN", new_y="NEXT")
        self.ln(2)


def _alarm_pdf(
    path: Path, rows: list[tuple[str, ...]], title: str, pdf: FPDF | None = None
) -> None:
    pdf = pdf or FPDF()
    pdf.set_font("Helvetica", size=9)
    pdf.add_page()
    pdf.set_font("Helvetica", style="B", size=12)
    pdf.cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=9)
    pdf.multi_cell(
        0, 5, "The alarms below stop all axes. Reset with RESET after the cause is removed."
    )
    pdf.ln(2)
    with pdf.table(col_widths=(22, 50, 110), repeat_headings=1) as table:
        for values in [HEADER, *rows]:
            row = table.row()
            for value in values:
                row.cell(value)
    pdf.output(str(path))


def test_alarm_table_over_two_pages_is_one_table_without_the_repeated_header(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fanuc_servo_alarms.pdf"
    _alarm_pdf(path, ALARMS, "4.1 Servo alarms (SV alarm)")
    result = read_manual(path, PDF, tmp_path)
    blocks = result.state["blocks"]
    assert blocks.schema == pl.Schema(DOCUMENT_BLOCK_SCHEMA)
    assert result.counters["pages"] == 3  # the table continues on pages 2 and 3
    tables = blocks.filter(pl.col("kind") == "table")
    assert tables.height == 1
    table = tables.row(0, named=True)
    assert table["header_rows"] == 1 and table["page"] == 1
    assert table["cells"][0] == list(HEADER)
    body = table["cells"][1:]
    assert [r[0] for r in body] == [a[0] for a in ALARMS]  # every code once, header dropped
    assert body == [list(a) for a in ALARMS]  # wrapped remedies whole, one value per cell
    assert table["heading_path"] == ["4.1 Servo alarms (SV alarm)"]
    heading = blocks.row(0, named=True)
    assert (heading["kind"], heading["text"], heading["level"]) == (
        "heading",
        "4.1 Servo alarms (SV alarm)",
        2,
    )
    # no cell text became a heading or a paragraph
    assert blocks.filter(pl.col("kind") == "heading").height == 1
    assert not blocks.filter(
        pl.col("text").str.contains("SV0410") & (pl.col("kind") != "table")
    ).height
    section = result.kept.filter(pl.col("heading_path").list.len() == 1).row(0, named=True)
    assert "| Alarm No. | Message | Description / Remedy |" in section["text"]
    assert f"| SV0443 | {ALARMS[43][1]} | {ALARMS[43][2]} |" in section["text"]
    # title on line 1, the paragraph on 3, the table from 5: its header line, the ruler, then
    # one line a row, the rows of pages 2 and 3 right after those of page 1
    assert table["source_row"] == 5
    assert table["row_lines"] == [5, *range(7, 7 + len(ALARMS))]
    lines = section["text"].split("\n")
    for (code, *_), line in zip(ALARMS, table["row_lines"][1:], strict=True):
        assert lines[line - section["body_row"]].startswith(f"| {code} |"), code


def test_rows_continued_under_a_running_page_header_follow_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "fanuc_servo_alarms.pdf"
    _alarm_pdf(path, ALARMS, "4.1 Servo alarms (SV alarm)", _ManualPages())
    blocks = pdf_blocks(path).blocks
    (table,) = [b for b in blocks if b.kind == "table"]
    assert [r[0] for r in table.cells[1:]] == [a[0] for a in ALARMS]
    headers = [b for b in blocks if b.text == "B-64695EN/01 MAINTENANCE"]
    assert [b.page for b in headers] == [1, 2, 3]
    lines = table.row_lines
    assert len(lines) == len(table.cells) and lines == sorted(set(lines))
    for header in headers[1:]:  # the rows after a page header start on the line after it
        first = next(line for line in lines if line > header.row)
        assert first == header.row + 2, (header.page, lines)


def test_cells_wrapped_over_several_lines_and_a_merged_cell(tmp_path: Path) -> None:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=9)
    pdf.add_page()
    remedy = (
        "1. Check the connection of the spindle amplifier cable.\n"
        "2. Replace the spindle motor fan if it does not turn."
    )
    with pdf.table(col_widths=(20, 40, 60, 60)) as table:
        for values in [("Alarm", "Message", "Cause", "Remedy")]:
            row = table.row()
            for value in values:
                row.cell(value)
        row = table.row()
        row.cell("SP9001")
        row.cell("SPINDLE MOTOR OVERHEAT")
        row.cell("The temperature of the spindle motor winding rose above the limit value.")
        row.cell(remedy, rowspan=2)
        row = table.row()
        row.cell("SP9002")
        row.cell("SPINDLE FAN STOPPED")
        row.cell("The fan of the spindle motor stopped or turns too slowly.")
    path = tmp_path / "spindle.pdf"
    pdf.output(str(path))
    doc = pdf_blocks(path)
    (table,) = [b for b in doc.blocks if b.kind == "table"]
    assert table.cells == [
        ["Alarm", "Message", "Cause", "Remedy"],
        ["SP9001", "SPINDLE MOTOR OVERHEAT",
         "The temperature of the spindle motor winding rose above the limit value.", remedy],
        ["SP9002", "SPINDLE FAN STOPPED",
         "The fan of the spindle motor stopped or turns too slowly.", remedy],
    ]  # fmt: skip
    # a row wrapped over several PDF lines is one rendered line
    assert (table.row, table.row_lines) == (1, [1, 3, 4])


LEFT = [
    "Spindle warm-up. Run the spindle at 500 rpm for ten minutes",
    "before the first cut of the day, then at 2000 rpm for five",
    "minutes. A cold spindle loses accuracy by thermal growth.",
]
RIGHT = [
    "Way lubrication. Check the oil level of the central lube unit",
    "every shift and top up with ISO VG 68 way oil. Alarm 1005",
    "LUBE LEVEL LOW stops the cycle at the end of the program.",
]


def test_two_column_page_is_read_column_by_column(tmp_path: Path) -> None:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", style="B", size=12)
    pdf.cell(0, 8, "3 Daily maintenance", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=8)
    top = pdf.get_y() + 2
    for x, lines in ((10, LEFT * 3), (110, RIGHT * 3)):
        for i, line in enumerate(lines):
            pdf.text(x, top + 5 * i + (8 if i >= 3 else 0) + (8 if i >= 6 else 0), line)
    path = tmp_path / "two_column.pdf"
    pdf.output(str(path))
    blocks = read_manual(path, PDF, tmp_path).state["blocks"]
    texts = blocks.filter(pl.col("kind") == "paragraph")["text"].to_list()
    assert texts == ["\n".join(LEFT)] * 3 + ["\n".join(RIGHT)] * 3
    assert blocks["heading_path"].to_list()[1:] == [["3 Daily maintenance"]] * 6


def test_scanned_page_is_flagged_and_damaged_or_encrypted_files_raise(tmp_path: Path) -> None:
    path = tmp_path / "with_scan.pdf"
    _alarm_pdf(path, ALARMS[:3], "Alarm list")
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=10)
    pdf.cell(0, 8, "Page one")
    pdf.add_page()  # a scanned page: no text layer
    pdf.output(str(path))
    result = read_manual(path, PDF, tmp_path)
    assert result.rejected["reason"].to_list() == ["no_text_layer"]
    assert result.rejected["detail"][0] == "with_scan.pdf: page 2 has no text layer (scanned?)"

    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(path.read_bytes()[:400])
    with pytest.raises(ManualError, match=r"damaged\.pdf: not a readable PDF"):
        read_manual(damaged, PDF, tmp_path)

    locked = FPDF()
    locked.set_encryption(owner_password="service", user_password="1234")
    locked.add_page()
    locked.set_font("Helvetica", size=10)
    locked.cell(0, 8, "Confidential service manual")
    encrypted = tmp_path / "encrypted.pdf"
    locked.output(str(encrypted))
    with pytest.raises(ManualError, match=r"encrypted\.pdf: not a readable PDF \(encrypted\)"):
        read_manual(encrypted, PDF, tmp_path)
