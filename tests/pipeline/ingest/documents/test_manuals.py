from pathlib import Path

import polars as pl
import pytest
from fpdf import FPDF

from pipeline.ingest.documents.manuals import chunk_sections, read_manual
from schemas.manuals import (
    MANUAL_SECTION_SCHEMA,
    PRETRAIN_CHUNK_SCHEMA,
    ChunkConfig,
    ManualsConfig,
    ManualSource,
)
from tests.pipeline.ingest.documents.support import manual_files, read_manuals

REPO = Path(__file__).resolve().parents[4]
MANUALS = REPO / "sample_data" / "manuals"
FANUC_MD = MANUALS / "fanuc_0i-F_维修说明书_节选.md"
TEXT_GBK = MANUALS / "VMC850_机床保养手册.txt"

SPINDLE = (
    "Spindle alarm 9001 indicates motor overheating. Check the spindle fan and clean the air "
    "duct. Reduce the cutting load if the alarm recurs during heavy roughing."
)


def _pdf(path: Path, outline: bool, blank_page: bool = False) -> None:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, "HMC-500 Maintenance Manual\nRevision C, for service technicians.")
    for level, title, body in [
        (0, "1 Safety", "Switch off the main power and lock out before opening the cabinet."),
        (0, "2 Spindle", "The spindle unit is grease-lubricated for life."),
        (1, "2.1 Spindle alarms", SPINDLE),
        (1, "2.2 Belt tension", "Check belt tension every 2000 operating hours."),
    ]:
        if outline:
            pdf.start_section(title, level=level)
        pdf.set_font("Helvetica", style="B", size=13 if level == 0 else 12)
        pdf.cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, body)
        pdf.ln(2)
    if blank_page:
        pdf.add_page()  # a scanned page: no text layer
    pdf.output(str(path))


@pytest.mark.parametrize("outline", [True, False], ids=["outline", "numbered-headings"])
def test_pdf_sections_with_heading_paths(tmp_path: Path, outline: bool) -> None:
    path = tmp_path / "HMC-500_manual.pdf"
    _pdf(path, outline=outline, blank_page=True)
    result = read_manual(path, ManualSource(pattern="*.pdf", format="pdf"), tmp_path)
    kept = result.kept
    assert kept.schema == pl.Schema(MANUAL_SECTION_SCHEMA)
    assert kept["heading_path"].to_list() == [
        [],
        ["1 Safety"],
        ["2 Spindle"],
        ["2 Spindle", "2.1 Spindle alarms"],
        ["2 Spindle", "2.2 Belt tension"],
    ]
    assert kept["level"].to_list() == [0, 1, 1, 2, 2]
    alarms = kept.row(3, named=True)
    assert " ".join(alarms["text"].split()) == SPINDLE
    assert alarms["page"] == 1 and alarms["source_file"] == "HMC-500_manual.pdf"
    assert "Revision C" in kept["text"][0]
    c = result.counters
    assert (c["pages"], c["read"], c["kept"], c["rejected_no_text_layer"]) == (2, 6, 5, 1)
    assert result.rejected["detail"][0] == "HMC-500_manual.pdf: page 2 has no text layer (scanned?)"


def test_markdown_sections_follow_heading_levels_and_skip_code_fences(tmp_path: Path) -> None:
    result = read_manual(FANUC_MD, ManualSource(pattern="*", format="markdown"), MANUALS)
    paths = [" > ".join(p[1:]) for p in result.kept["heading_path"].to_list()]
    assert paths == [
        "",
        "1 报警的显示与履历",
        "2 伺服报警（SV 报警）",
        "2 伺服报警（SV 报警） > 2.1 报警一览",
        "2 伺服报警（SV 报警） > 2.2 伺服放大器风扇",
        "3 主轴报警（SP 报警）",
        "4 日常保养",
        "4 日常保养 > 4.1 每日点检",
        "4 日常保养 > 4.2 电池更换周期",
    ]
    assert set(result.kept["family"]) == {"FANUC"}
    table = result.kept.row(3, named=True)
    assert table["source_row"] == 14 and table["body_row"] == 16
    assert table["text"].startswith("| 报警号 | 报警信息 | 原因 | 处理 |")

    fenced = tmp_path / "notes.md"
    fenced.write_text("# Backup\n```\n# not a heading\n```\n## Restore\nLoad the archive.\n")
    kept = read_manual(fenced, ManualSource(pattern="*", format="markdown")).kept
    assert kept["heading_path"].to_list() == [["Backup"], ["Backup", "Restore"]]
    assert "# not a heading" in kept["text"][0]


def test_gbk_plain_text_manual_numbered_headings() -> None:
    with pytest.raises(UnicodeDecodeError):
        TEXT_GBK.read_bytes().decode("utf-8")
    result = read_manual(TEXT_GBK, ManualSource(pattern="*", format="text"))
    kept = result.kept
    assert kept["heading_path"].list.last().to_list() == [
        None,
        "1 安全注意事项",
        "2 日常点检",
        "2.1 开机前检查",
        "2.2 运行中检查",
        "3 常见报警处理",
        "3.1 冷却液液位低",
        "3.2 润滑油不足",
    ]
    assert kept["text"][0].startswith("VMC850 立式加工中心 使用与保养手册（节选）")
    # "1 安全注意事项" is a heading, a sentence starting with a number is not
    assert all("操作者必须" not in p for path in kept["heading_path"] for p in path)
    assert result.counters["lines_total"] == 37  # wc -l


def test_directory_of_manuals_and_chunking_at_section_boundaries() -> None:
    assert [p.name for p, _ in manual_files(MANUALS, ManualsConfig())] == [
        "VMC850_机床保养手册.txt",
        "fanuc_0i-F_维修说明书_节选.md",
        "sinumerik_840d_sl_diagnostics_excerpt.md",
    ]
    sections = read_manuals(MANUALS)
    assert sections.counters["files"] == 3
    assert sections.kept["record_id"].n_unique() == sections.kept.height
    bodies = sections.kept.filter(pl.col("text") != "")

    result = chunk_sections(sections.kept, ChunkConfig(max_chars=600))
    chunks = result.kept
    assert chunks.schema == pl.Schema(PRETRAIN_CHUNK_SCHEMA)
    assert chunks["n_chars"].max() <= 600
    assert result.counters["empty_sections"] == sections.kept.height - bodies.height
    # every section body reaches the corpus, and a chunk never spans two files
    corpus = "\n".join(chunks["text"])
    for body in bodies["text"]:
        for paragraph in body.split("\n\n"):
            assert paragraph.strip()[:40] in corpus
    ids = chunks["section_ids"].explode()
    assert set(ids) == set(bodies["record_id"])
    # the SINUMERIK alarm table (1.4k chars) is split; its pieces keep the heading path
    table = chunks.filter(pl.col("heading_path").list.last() == "2.1 Axis and encoder alarms")
    assert table.height >= 3 and result.counters["split_sections"] >= 1
    assert all(t.startswith("SINUMERIK 840D sl Diagnostics Manual") for t in table["text"])

    whole = chunk_sections(sections.kept, ChunkConfig(max_chars=4000)).kept
    assert whole.height == 3  # small sections packed: one chunk per document
    single = chunk_sections(sections.kept, ChunkConfig(max_chars=4000, merge_small_sections=False))
    assert single.kept.height == bodies.height
