"""Plain-text manuals: an aligned-column alarm grid (GSK/KND manuals print their alarm lists
so, columns padded with spaces, a long message wrapped under its column) and a labelled-item
troubleshooting guide in Chinese saved as UTF-16, as Windows tools write it."""

from pathlib import Path

from pipeline.ingest.documents.manuals import read_manual
from pipeline.ingest.documents.text import text_blocks
from pipeline.kb.extract import fault_entries
from schemas.manuals import ManualsConfig, ManualSource

GRID = """GSK 980TDi 报警一览

3.1 PLC 报警

报警号    报警内容                处理方法
------    --------------------    ------------------------
1000      急停报警                松开急停按钮后按复位键
1001      X 轴正向硬限位          手动反向移出限位，检查
                                  限位开关
1002      主轴报警                检查主轴驱动器报警号

以上报警在复位后清除。
"""


def test_aligned_column_grid_is_one_table_with_wrapped_cells() -> None:
    blocks = text_blocks(GRID.split("\n"))
    assert [(b.kind, b.row) for b in blocks] == [
        ("paragraph", 1), ("heading", 3), ("table", 5), ("paragraph", 12),
    ]  # fmt: skip
    table = blocks[2]
    assert table.header_rows == 1 and table.heading_path == ["3.1 PLC 报警"]
    assert table.cells == [
        ["报警号", "报警内容", "处理方法"],
        ["1000", "急停报警", "松开急停按钮后按复位键"],
        ["1001", "X 轴正向硬限位", "手动反向移出限位，检查限位开关"],
        ["1002", "主轴报警", "检查主轴驱动器报警号"],
    ]
    # header on line 5 (ruler on 6); 1001 wrapped over lines 8 and 9: its first line
    assert table.row_lines == [5, 7, 8, 10]
    assert table.text.split("\n")[:2] == ["| 报警号 | 报警内容 | 处理方法 |", "| --- | --- | --- |"]


def test_tab_separated_grid() -> None:
    lines = [
        "Code\tMessage\tRemedy",
        "E-102\tSpindle overload\tReduce the cut",
        "E-103\tLube low\tRefill",
    ]
    (table,) = text_blocks(lines, first_row=41)
    assert table.cells[2] == ["E-103", "Lube low", "Refill"]
    assert table.row_lines == [41, 42, 43]


def test_prose_with_double_spaces_is_not_a_grid() -> None:
    lines = ["Check the oil level.  Top up if needed.", "Clean the filter.  Replace it yearly."]
    assert [b.kind for b in text_blocks(lines)] == ["paragraph"]


GUIDE = """KND K1000TDi 故障排除指南

二、伺服报警

ALM 401 X 轴伺服准备未就绪
原因：伺服驱动器未上电，或 MCC 接触器未吸合。
处理：
1. 检查驱动器输入电源 AC 220V。
2. 检查急停回路与 MCC 线圈。
影响：所有轴停止，自动运行中断。

ALM 411 X 轴跟随误差过大
原因：负载过重或加减速时间太短。
处理：减轻负载，或增大参数 P52 的加减速时间。
"""


def test_labelled_guide_in_utf16_gives_labelled_blocks_and_kb_entries(tmp_path: Path) -> None:
    path = tmp_path / "K1000TDi_故障排除.txt"
    path.write_bytes(GUIDE.encode("utf-16"))  # with a BOM, little-endian
    result = read_manual(path, ManualSource(pattern="*", format="text"), tmp_path)
    blocks = result.state["blocks"]
    labelled = blocks.filter(blocks["kind"] == "labelled")
    assert labelled["cells"].to_list() == [
        [["原因", "伺服驱动器未上电，或 MCC 接触器未吸合。"]],
        [["处理", ""]],
        [["影响", "所有轴停止，自动运行中断。"]],
        [["原因", "负载过重或加减速时间太短。"]],
        [["处理", "减轻负载，或增大参数 P52 的加减速时间。"]],
    ]
    assert labelled["source_row"].to_list() == [6, 7, 10, 13, 14]
    assert labelled["row_lines"].to_list() == [[6], [7], [10], [13], [14]]
    assert set(labelled["heading_path"].to_list()[0]) == {"二、伺服报警"}
    items = blocks.filter(blocks["kind"] == "list_item")["text"].to_list()
    assert items == ["1. 检查驱动器输入电源 AC 220V。", "2. 检查急停回路与 MCC 线圈。"]
    kb = fault_entries(blocks, ManualsConfig()).kept
    # the family is the KB extractor's part (no KND family yet): the codes and fields are ours
    assert kb["code"].str.split(":").list.last().to_list() == ["401", "411"]
    assert kb["source_row"].to_list() == [5, 12]  # the code lines in the file
    alm401 = kb.row(0, named=True)
    assert alm401["effect"] == "所有轴停止，自动运行中断。"
    assert alm401["remedies"] == ["检查驱动器输入电源 AC 220V", "检查急停回路与 MCC 线圈"]


def test_a_ruler_or_a_label_not_kept_ends_the_labelled_item_above() -> None:
    lines = [
        "700010 液压系统压力低",
        "影响：进给保持，禁止主轴启动",
        "--------------------------------",
        "700011 润滑油位低",
        "Remedy: Evaluate the drive alarm.",
        "Eliminate the cause, then acknowledge.",
        "Program continuation: Switch control OFF - ON.",
    ]
    blocks = text_blocks(lines)
    assert [(b.kind, b.row) for b in blocks] == [
        ("paragraph", 1), ("labelled", 2), ("paragraph", 3), ("paragraph", 4),
        ("labelled", 5), ("paragraph", 7),
    ]  # fmt: skip
    assert blocks[1].cells == [["影响", "进给保持，禁止主轴启动"]]
    assert blocks[4].cells == [
        ["Remedy", "Evaluate the drive alarm. Eliminate the cause, then acknowledge."]
    ]
    assert "\n".join(b.text for b in blocks) == "\n".join(lines)  # every line kept
