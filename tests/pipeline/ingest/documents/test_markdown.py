"""Markdown manuals: a SINUMERIK-style alarm list as a pipe table, lists, labelled items and a
fenced code block whose `#` lines are no headings."""

from pipeline.ingest.documents.markdown import markdown_blocks

DOC = """# SINUMERIK 840D sl 诊断手册（节选）

## 2 NC 报警

| 报警号 | 报警文本 | 处理 |
| --- | --- | --- |
| 25000 | 轴 %1 主动编码器硬件故障 | 检查编码器电缆<br>更换编码器 |
| 25050 | 轴 %1 轮廓监控 | 检查 MD36400 \\| 降低加速度 |

处理步骤：
1. 记录报警号和轴号。
2. 按 RESET 复位。
   - 复位无效时断电重启。

原因：编码器电缆屏蔽层未接地。
处理：重新连接屏蔽层。

```
# 备份命令，不是标题
ARCHIVE /NC/ALL
```

2.1 Setext
----------
"""


def test_pipe_table_lists_labelled_items_and_code_fences() -> None:
    blocks = markdown_blocks(DOC)
    assert [(b.kind, b.row) for b in blocks] == [
        ("heading", 1), ("heading", 3), ("table", 5), ("paragraph", 10), ("list_item", 11),
        ("list_item", 12), ("list_item", 13), ("labelled", 15), ("labelled", 16),
        ("paragraph", 18), ("heading", 23),
    ]  # fmt: skip
    table = blocks[2]
    assert table.header_rows == 1
    assert table.cells == [
        ["报警号", "报警文本", "处理"],
        ["25000", "轴 %1 主动编码器硬件故障", "检查编码器电缆\n更换编码器"],
        ["25050", "轴 %1 轮廓监控", "检查 MD36400 | 降低加速度"],
    ]
    # the header on line 5, the ruler on 6, each row on its own line
    assert table.row_lines == [5, 7, 8]
    assert table.heading_path == ["SINUMERIK 840D sl 诊断手册（节选）", "2 NC 报警"]
    assert (
        table.text.split("\n")[2]
        == "| 25000 | 轴 %1 主动编码器硬件故障 | 检查编码器电缆<br>更换编码器 |"
    )
    assert [(b.text, b.level) for b in blocks[4:7]] == [
        ("1. 记录报警号和轴号。", 1), ("2. 按 RESET 复位。", 1), ("- 复位无效时断电重启。", 2),
    ]  # fmt: skip
    assert blocks[7].cells == [["原因", "编码器电缆屏蔽层未接地。"]]
    assert [b.row_lines for b in blocks[7:9]] == [[15], [16]]
    assert all(b.row_lines is None for b in blocks if b.kind not in ("table", "labelled"))
    assert blocks[8].cells == [["处理", "重新连接屏蔽层。"]]
    assert blocks[9].text.startswith("```\n# 备份命令，不是标题")
    # a setext heading underlined with --- is level 2: a sibling of "2 NC 报警"
    assert (blocks[10].level, blocks[10].heading_path) == (
        2, ["SINUMERIK 840D sl 诊断手册（节选）", "2.1 Setext"],
    )  # fmt: skip
