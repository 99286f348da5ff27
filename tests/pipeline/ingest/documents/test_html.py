"""HTML alarm pages: a vendor's online alarm table with navigation and scripts around it, a
definition-list page, and a page without text.

Written from how controller vendors publish alarm lists on the web (Haas "Alarm list" pages:
a table of alarm number, title and description; help pages that list codes as <dl>).
"""

from pathlib import Path

import polars as pl

from pipeline.ingest.documents.html import html_blocks
from pipeline.ingest.documents.manuals import read_manual
from pipeline.ingest.sniff import sniff
from pipeline.kb.extract import fault_entries
from schemas.manuals import ManualsConfig, ManualSource

HTML = ManualSource(pattern="*.html", format="html")

TABLE_PAGE = """<!DOCTYPE html>
<html lang="en">
<head><title>Alarm list - NGC</title>
<script>window.dataLayer = []; function gtag(){dataLayer.push(arguments);}</script>
<style>.alarm td { padding: 4px }</style></head>
<body>
<header class="site-header"><a href="/">Home</a> <a href="/service">Service</a></header>
<nav class="breadcrumb"><ol><li>Service</li><li>Alarms</li></ol></nav>
<main>
<h1>Mill alarms</h1>
<p>Alarms stop the machine. Press <b>RESET</b> to clear an alarm
after you correct its cause.</p>
<h2>Spindle and tool changer</h2>
<table class="alarm">
<thead><tr><th>Alarm</th><th>Title</th><th>Description</th></tr></thead>
<tbody>
<tr><td>102</td><td>SERVOS OFF</td><td rowspan="2">The servo motors are off. Check the
air pressure<br>and the E-STOP circuit.</td></tr>
<tr><td>103</td><td>X SERVO ERROR TOO LARGE</td></tr>
<tr><td>113</td><td colspan="2">SHUTTLE IN FAULT</td></tr>
</tbody>
</table>
<ul><li>Tool changer alarms
  <ul><li>Alarm 113 needs a tool changer recovery.</li></ul></li></ul>
</main>
<aside class="sidebar"><h3>Related</h3><p>Parts store</p></aside>
<footer><p>&copy; Haas Automation</p></footer>
<div id="cookie-banner">We use cookies.</div>
</body></html>
"""


def test_table_page_drops_boilerplate_and_resolves_spans(tmp_path: Path) -> None:
    path = tmp_path / "mill_alarms.html"
    path.write_text(TABLE_PAGE, encoding="utf-8")
    assert sniff(path).reader == "manual:html"
    result = read_manual(path, HTML, tmp_path)
    blocks = result.state["blocks"]
    assert blocks["kind"].to_list() == [
        "heading", "heading", "paragraph", "heading", "table", "list_item", "list_item",
    ]  # fmt: skip
    title = blocks.row(0, named=True)  # <title>: the page's level-0 heading, on line 3
    assert (title["text"], title["level"], title["source_row"]) == ("Alarm list - NGC", 0, 3)
    blocks = blocks.slice(1)
    text = "\n".join(blocks["text"])
    for boilerplate in ("Home", "Service", "dataLayer", "padding", "Parts store", "cookies", "©"):
        assert boilerplate not in text
    assert blocks["text"][1] == (
        "Alarms stop the machine. Press RESET to clear an alarm after you correct its cause."
    )
    table = blocks.row(3, named=True)
    remedy = "The servo motors are off. Check the air pressure\nand the E-STOP circuit."
    assert table["cells"] == [
        ["Alarm", "Title", "Description"],
        ["102", "SERVOS OFF", remedy],
        ["103", "X SERVO ERROR TOO LARGE", remedy],
        ["113", "SHUTTLE IN FAULT", "SHUTTLE IN FAULT"],
    ]
    assert table["header_rows"] == 1
    assert table["heading_path"] == ["Alarm list - NGC", "Mill alarms", "Spindle and tool changer"]
    assert table["source_row"] == 14  # the line of <table>
    # the line of each <tr>: the header on 15, the 102 row's cell wraps onto line 18
    assert table["row_lines"] == [15, 17, 19, 20]
    assert blocks["level"].to_list()[4:] == [1, 2]
    assert blocks["text"][4:].to_list() == [
        "Tool changer alarms", "Alarm 113 needs a tool changer recovery.",
    ]  # fmt: skip
    sections = result.kept
    assert sections["heading_path"].to_list() == [
        ["Alarm list - NGC"],
        ["Alarm list - NGC", "Mill alarms"],
        ["Alarm list - NGC", "Mill alarms", "Spindle and tool changer"],
    ]
    assert (
        "| 102 | SERVOS OFF | The servo motors are off. Check the air pressure<br>and"
        in (sections["text"][2])
    )


DL_PAGE = """<html><body>
<h1>FANUC 0i-F 程序报警（PS 报警）</h1>
<dl>
  <dt>PS0010</dt><dd>不正确的 G 代码：指令了不能使用的 G 代码。</dd>
  <dt>PS0011</dt><dd>未指令进给速度。</dd><dd>请修改程序，指令 F 代码。</dd>
  <div><dt>PS0070</dt><dd>程序存储器容量不足。</dd></div>
</dl>
<p><strong>处理：</strong>修改程序后按 RESET 键。</p>
</body></html>"""


def test_definition_list_page_gives_one_definition_per_term(tmp_path: Path) -> None:
    blocks = html_blocks(DL_PAGE)
    defs = [b for b in blocks if b.kind == "definition"]
    assert [b.cells for b in defs] == [
        [["PS0010", "不正确的 G 代码：指令了不能使用的 G 代码。"]],
        [["PS0011", "未指令进给速度。\n请修改程序，指令 F 代码。"]],
        [["PS0070", "程序存储器容量不足。"]],
    ]
    assert all(b.heading_path == ["FANUC 0i-F 程序报警（PS 报警）"] for b in defs)
    assert [b.row for b in defs] == [4, 5, 6]
    assert [b.row_lines for b in defs] == [[4], [5], [6]]
    labelled = blocks[-1]
    assert (labelled.kind, labelled.cells) == ("labelled", [["处理", "修改程序后按 RESET 键。"]])


def test_page_without_text_gives_no_blocks_and_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "redirect.html"
    path.write_text(
        "<!DOCTYPE html><html><head><script>location.href='/alarms/'</script></head>"
        "<body><nav><a href='/'>Home</a></nav><img src='logo.png'></body></html>",
        encoding="utf-8",
    )
    assert html_blocks(path.read_text()) == []
    result = read_manual(path, HTML, tmp_path)
    assert result.kept.height == 0
    assert result.rejected.select("reason", "detail").rows() == [
        ("no_text", "redirect.html: no text in the document")
    ]
    assert result.state["blocks"].height == 0 and isinstance(result.state["blocks"], pl.DataFrame)


HAAS_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Haas Mill Alarm List</title>
</head>
<body>
<h1>Mill alarms</h1>
<table>
<tr><th>Alarm</th><th>Title</th><th>Description</th></tr>
<tr><td>101</td><td>MOCON COMM. FAILURE</td><td>The control did not get a reply from the
motor controller. Check the cables between the processor and the MOCON board.</td></tr>
<tr><td>108</td><td>X SERVO OVERLOAD</td><td>Excessive load on the X-axis motor.</td></tr>
<tr><td>9003</td><td>LOW AIR PRESSURE</td><td>Check the air supply at the regulator.</td></tr>
</table>
</body></html>
"""


def test_a_page_naming_its_controller_only_in_its_title_gives_that_family(tmp_path: Path) -> None:
    path = tmp_path / "mill_alarm_list.html"
    path.write_text(HAAS_PAGE, encoding="utf-8")
    blocks = read_manual(path, HTML, tmp_path).state["blocks"]
    assert "haas" not in "\n".join(blocks.slice(1)["text"]).lower()  # only in <title>
    assert blocks.row(0, named=True)["text"] == "Haas Mill Alarm List"
    assert blocks["heading_path"][-1].to_list() == ["Haas Mill Alarm List", "Mill alarms"]
    kb = fault_entries(blocks, ManualsConfig()).kept
    assert kb["code"].to_list() == ["HAAS:101", "HAAS:108", "HAAS:9003"]
    assert kb["message"].to_list()[1] == "X SERVO OVERLOAD"
    untitled = HAAS_PAGE.replace("<title>Haas Mill Alarm List</title>", "")
    path.write_text(untitled, encoding="utf-8")
    blocks = read_manual(path, HTML, tmp_path).state["blocks"]
    assert fault_entries(blocks, ManualsConfig()).kept["code"].str.starts_with("UNKNOWN:").all()


def test_a_title_that_the_first_heading_repeats_is_not_a_heading_of_its_own() -> None:
    page = HAAS_PAGE.replace("<h1>Mill alarms</h1>", "<h1>Haas Mill  Alarm List</h1>")
    blocks = html_blocks(page)
    assert [(b.kind, b.level) for b in blocks] == [("heading", 1), ("table", 0)]
    assert blocks[1].heading_path == ["Haas Mill Alarm List"]
