"""The shared block pieces: wrapped cell text, the one table rendering, the block frame and
sections cut from blocks at headings (line positions kept for lineage)."""

import polars as pl
import pytest

from pipeline.ingest.documents.blocks import (
    Block,
    HeadingStack,
    block_frame,
    join_wrapped,
    render_table,
    sections_from_blocks,
    table_block,
)
from pipeline.ingest.documents.manuals import chunk_sections
from schemas.documents import DOCUMENT_BLOCK_SCHEMA
from schemas.manuals import MANUAL_SECTION_SCHEMA, ChunkConfig


def test_join_wrapped_cells() -> None:
    assert join_wrapped(["检查主轴驱动器", "输入电源"]) == "检查主轴驱动器输入电源"
    assert join_wrapped(["Check the spindle", "amplifier cable."]) == (
        "Check the spindle amplifier cable."
    )
    assert join_wrapped(["1. Check the fuse.", "2. Replace the", "fan."]) == (
        "1. Check the fuse.\n2. Replace the fan."
    )
    # Chinese is wrapped at any character: a Latin run cut by the wrap is joined whole
    assert join_wrapped(["检查参数N", "o.1828的设定值"]) == "检查参数No.1828的设定值"
    assert join_wrapped(["按住超程解除键，把", "X轴移出限位"]) == "按住超程解除键，把X轴移出限位"
    # a number at the start of a wrapped line is no list item; 1．(full-width) is one
    assert join_wrapped(["气源压力是否达到", "0.5MPa。"]) == "气源压力是否达到0.5MPa。"
    assert join_wrapped(["1．检查刀架电机。", "2．检查刀位信号。"]) == (
        "1．检查刀架电机。\n2．检查刀位信号。"
    )


def test_table_rendering_merges_header_rows_and_escapes() -> None:
    cells = [
        ["Alarm", "Reaction", "Reaction"],
        ["", "NC", "Drive"],
        ["25000", "NC stop | alarm", "Pulse off\nafter 2 s"],
    ]
    assert render_table(cells, 2) == (
        "| Alarm | Reaction NC | Reaction Drive |\n"
        "| --- | --- | --- |\n"
        "| 25000 | NC stop \\| alarm | Pulse off<br>after 2 s |"
    )
    assert render_table([["a", "b"]], 0) == "| --- | --- |\n| a | b |"


def test_a_table_block_needs_the_line_of_every_row() -> None:
    block = table_block([["Code", "Message"], ["1005", "LUBE LOW"]], 1, [8, 10], row=7)
    assert (block.row, block.row_lines) == (7, [8, 10])
    assert table_block([["1005", "LUBE LOW"]], 0, [4]).row == 4
    with pytest.raises(ValueError, match="2 rows given 1 row lines"):
        table_block([["Code", "Message"], ["1005", "LUBE LOW"]], 1, [8])


def test_sections_from_blocks_keep_lines_and_chunk_at_headings() -> None:
    stack = HeadingStack()
    blocks = [
        stack.place(Block("paragraph", "HMC-500 service manual", 1)),
        stack.heading(1, "5 Alarms", 3),
        stack.place(Block("paragraph", "Alarms stop the spindle.\nReset after repair.", 5)),
        stack.place(table_block([["Code", "Message"], ["1005", "LUBE LOW"]], 1, [8, 10])),
        stack.heading(2, "5.1 Lube", 12),
        stack.place(Block("labelled", "Remedy: refill way oil.", 13, cells=[["Remedy", "refill"]])),
        stack.heading(1, "6 Parts", 15),
    ]
    frame = block_frame(blocks, "hmc.txt")
    assert frame.schema == pl.Schema(DOCUMENT_BLOCK_SCHEMA)
    assert frame["block"].to_list() == list(range(7))
    assert frame["heading_path"].to_list()[5] == ["5 Alarms", "5.1 Lube"]
    assert frame["record_id"].n_unique() == 7
    # a table's rows each at their line; a labelled item at its one line; others none
    assert frame["row_lines"].to_list() == [None, None, None, [8, 10], None, [13], None]
    sections = sections_from_blocks(frame, "FANUC")
    assert sections.schema == pl.Schema(MANUAL_SECTION_SCHEMA)
    assert sections.select("source_row", "body_row", "level").rows() == [
        (1, 1, 0), (3, 5, 1), (12, 13, 2), (15, 15, 1),
    ]  # fmt: skip
    body = sections["text"][1].split("\n")
    # each block at its own line from the body's first line (5): the table starts on line 8
    assert body[8 - 5 :] == ["| Code | Message |", "| --- | --- |", "| 1005 | LUBE LOW |"]
    assert sections["text"][3] == ""  # a heading without body is kept, not chunked
    chunks = chunk_sections(sections, ChunkConfig(merge_small_sections=False)).kept
    assert chunks["heading_path"].to_list() == [[], ["5 Alarms"], ["5 Alarms", "5.1 Lube"]]
    assert chunks["text"][2] == "5 Alarms > 5.1 Lube\n\nRemedy: refill way oil."
