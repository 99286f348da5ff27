"""PDF manuals read with pdfplumber: alarm tables over page breaks, wrapped cells, two-column
pages, scanned pages, damaged and encrypted files.

The fixtures are built with fpdf2 in the layouts FANUC and SINUMERIK print their alarm lists
in (code, message, cause/remedy columns; the header repeated on each page), and in the layout
of GSK/KND Chinese lathe manuals (报警号 | 报警内容 | 处理方法 over many pages, running heads and
page numbers), that one with the committed font subset of tests/fixtures/fonts (no CJK font
needs to be installed).
"""

import tracemalloc
from pathlib import Path

import pdfplumber
import pdfplumber.page
import polars as pl
import pytest
from fontTools.ttLib import TTFont
from fpdf import FPDF, FontFace

from pipeline.ingest.documents.blocks import ManualError
from pipeline.ingest.documents.manuals import read_manual
from pipeline.ingest.documents.pdf import TooManyPagesError, pdf_blocks
from pipeline.kb.extract import fault_entries
from schemas.documents import DOCUMENT_BLOCK_SCHEMA
from schemas.manuals import ManualsConfig, ManualSource
from tests.pipeline.ingest.documents import gsk_alarms as gsk
from tests.pipeline.ingest.documents.support import one_line_pdf

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
    # the running page header is page furniture: no block, no line of its own
    assert not [b for b in blocks if "B-64695EN/01" in b.text]
    lines = table.row_lines
    assert len(lines) == len(table.cells) and lines == sorted(set(lines))
    body = lines[1:]  # rows continued on the next pages follow the last row's line
    assert body == list(range(body[0], body[0] + len(body)))


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


FONT = Path(__file__).parents[3] / "fixtures" / "fonts" / "wqy-microhei-subset.ttf"
GSK_WIDTHS = (16, 36, 76)  # mm: 报警号 | 报警内容 | 处理方法  # mm: 报警号 | 报警内容 | 处理方法


class _GskManual(FPDF):
    """A GSK manual page: running head (manual, chapter) over a rule, page number below."""

    def header(self) -> None:
        self.set_font("wqy", size=8)
        self.cell(95, 5, gsk.MANUAL, new_x="RIGHT")
        self.cell(0, 5, gsk.TITLE, align="R", new_x="LMARGIN", new_y="NEXT")
        self.line(10, 16, 200, 16)
        self.ln(4)

    def footer(self) -> None:
        self.set_y(-12)
        self.set_font("wqy", size=8)
        self.cell(0, 5, f"— {self.page_no() + 212} —", align="C")


def _gsk_pdf(path: Path) -> None:
    """The GSK alarm chapter as a PDF."""
    pdf = _GskManual()
    pdf.add_font("wqy", fname=str(FONT))
    pdf.add_page()
    pdf.set_font("wqy", size=14)
    pdf.cell(0, 9, gsk.MANUAL, new_x="LMARGIN", new_y="NEXT")
    pdf.cell(0, 10, gsk.TITLE, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("wqy", size=10)
    pdf.multi_cell(0, 6, gsk.INTRO, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(2)
    pdf.set_font("wqy", size=12)
    pdf.cell(0, 8, "7.1 报警一览表", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("wqy", size=10)
    style = FontFace(emphasis="")
    with pdf.table(
        col_widths=GSK_WIDTHS, repeat_headings=1, line_height=6, headings_style=style, padding=2
    ) as table:
        for values in [gsk.HEADER, *gsk.alarm_rows()]:
            row = table.row()
            for value in values:
                row.cell(value)
    pdf.output(str(path))


def _printed_lines(path: Path) -> list[int]:
    """How many lines each message and remedy cell is printed over."""
    with pdfplumber.open(path) as pdf:
        return [
            value.count("\n") + 1
            for page in pdf.pages
            for table in page.extract_tables()
            for row in table
            for value in row[1:]
        ]


def _bare(text: str) -> str:
    return "".join(text.split())


def test_font_subset_holds_every_character_the_chinese_fixture_prints() -> None:
    cmap = TTFont(FONT).getBestCmap()
    assert [c for c in gsk.font_text() if ord(c) not in cmap] == []  # else see its README


def test_chinese_alarm_table_wrapped_over_many_pages_gives_every_code_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gsk980tdi_alarms.pdf"
    _gsk_pdf(path)
    assert {2, 3, 4} <= set(_printed_lines(path))  # cells wrapped over two to four lines
    result = read_manual(path, PDF, tmp_path)
    assert result.counters["pages"] == 5
    blocks = result.state["blocks"]
    rows = gsk.alarm_rows()
    assert len(rows) == 60
    # One table over every page: the repeated header dropped, each cell's lines one value
    (table,) = blocks.filter(pl.col("kind") == "table").iter_rows(named=True)
    assert table["page"] == 1 and table["header_rows"] == 1
    assert table["cells"][0] == list(gsk.HEADER)
    body = table["cells"][1:]
    assert [[_bare(c) for c in row] for row in body] == [[_bare(c) for c in r] for r in rows]
    # exactly so where the source has no space: no space put into a wrapped word (参数No.1828)
    exact = [
        (c, v)
        for row, r in zip(body, rows, strict=True)
        for c, v in zip(row, r, strict=True)
        if " " not in v
    ]
    assert len(exact) > 150 and all(c == v for c, v in exact)
    # No cell, running head or page number became a heading or a paragraph
    headings = blocks.filter(pl.col("kind") == "heading")
    assert headings["text"].to_list() == [gsk.TITLE, "7.1 报警一览表"]
    assert headings["page"].to_list() == [1, 1]
    others = blocks.filter(pl.col("kind") != "table")["text"].to_list()
    assert others == [gsk.MANUAL, gsk.TITLE, others[2], "7.1 报警一览表"]
    assert _bare(others[2]) == _bare(gsk.INTRO)
    assert table["heading_path"] == [gsk.TITLE, "7.1 报警一览表"]

    kb = fault_entries(blocks, ManualsConfig())
    assert kb.rejected.height == 0 and kb.counters["entries_table"] == 60
    entries = kb.kept.sort("code")
    assert entries["code"].to_list() == sorted(f"GSK:{code}" for code, _, _ in rows)
    assert entries["family"].unique().to_list() == ["GSK"]
    by_code = {row["code"]: row for row in entries.iter_rows(named=True)}
    row_line = dict(zip((r[0] for r in rows), table["row_lines"][1:], strict=True))
    for code, message, remedy in rows:
        entry = by_code[f"GSK:{code}"]
        assert _bare(entry["message"]) == _bare(message), code
        items = [_bare(part).rstrip("。") for part in remedy.split("；")]
        assert [_bare(r) for r in entry["remedies"]] == items, code
        # lineage: the file, the line of the entry's row, the heading path
        assert (entry["source_file"], entry["source_row"]) == (path.name, row_line[code])
        assert entry["source"] == f"{path.name} > {gsk.TITLE} > 7.1 报警一览表"


def test_pdf_over_the_page_limit_raises_before_any_page_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "service_manual_complete.pdf"
    one_line_pdf(path, 5000, "Spindle maintenance log, page {n}: check the belt tension.")

    def no_page(*args: object) -> None:
        raise AssertionError("a page was read")

    monkeypatch.setattr(pdfplumber.page.Page, "__init__", no_page)
    with pytest.raises(TooManyPagesError) as raised:
        read_manual(path, PDF, tmp_path, max_pdf_pages=2000)
    assert raised.value.reason == "too_many_pages"
    assert str(raised.value) == (
        f"{path}: 5000 pages, more than manuals.max_pdf_pages (2000); not read"
    )


def test_pdf_within_the_limit_is_read_page_by_page_in_bounded_memory(tmp_path: Path) -> None:
    peaks = {}
    for pages in (60, 300):
        path = tmp_path / f"log_{pages}.pdf"
        one_line_pdf(path, pages, "Spindle maintenance log, page {n}: check the belt tension.")
        tracemalloc.start()
        doc = pdf_blocks(path, max_pages=pages)
        peaks[pages] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert doc.pages == pages and [b.page for b in doc.blocks] == list(range(1, pages + 1))
        assert doc.blocks[-1].text == (
            f"Spindle maintenance log, page {pages}: check the belt tension."
        )
    # what stays per page is its block and the page's PDF objects (about 9 KB here); a parsed
    # page kept open would add its characters and layout (about 115 KB here)
    assert (peaks[300] - peaks[60]) / 240 < 30_000
