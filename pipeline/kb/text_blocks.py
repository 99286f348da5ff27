"""Fault entries from a document's text blocks, read in order.

A heading, paragraph or list item that names a code (`报警 1010 主轴过热`, `**EX2201 TOOL
CLAMP PRESSURE LOW**`, `25201 Axis %1 drive fault`), a definition whose term holds a code
(Heidenhain `8B40-0001` / its text), or a labelled item naming one (`报警号：1010`) opens an
entry. The labelled items that follow (原因：…, Cause: …, 处理方法, Remedy, Ursache), the list
items under a label, the labelled lines inside a definition and the text under a sub-heading
naming a field (SINUMERIK `Explanation` / `Reaction` / `Remedy`) fill its fields (label →
field by `LABELS`). Unlabelled paragraphs after a heading or bold code are classified as remedy,
cause or description (`classify_prose`). A heading or a table ends the entry; a paragraph ends
a label's field once it has text, as a blank line does in a text manual; a ruler (`-----`)
ends the field and the prose.

A numbered item without a code that labelled items follow (`1. 主轴不能启动` / `原因：…`,
`2) Spindle does not start` / `Cause: …`) opens an entry keyed by its symptom, unless it
continues the numbered list of the field being filled. A prevention note in prose
(`Prevention for alarm 25000: …`, `预防报警1234：…`) is an entry of its own for that code.
"""

from __future__ import annotations

import re

from pipeline.kb.layouts import (
    BOLD,
    DECORATIVE,
    NUMBERED,
    classify_prose,
    code_start,
    join_text,
    label_of,
)
from pipeline.kb.tables import code_cell, header_field

_CONTENT = ("description", "cause", "remedy", "effect", "prevention")
# A prevention note in prose: `Prevention for alarm 25000: …`, `预防（SP9001）：…`.
PREVENTION_FOR = re.compile(
    r"^(?:prevention\s+for\s+alarm|预防\s*(?:报警)?)\s*[(（]?(?P<code>[A-Z]{2}\s?\d{3,4}|\d{3,6})"
    r"[)）]?\s*[:：]\s*(?P<text>\S.*)$",
    re.I,
)
# A label inside running text, after a sentence: `… lies beyond the limit. Remedy: Check …`.
_INLINE_LABEL = re.compile(
    r"(?<=[.。;；!?！？])\s*(?=(?:[A-Z][A-Za-zäöüß ]{1,24}?|[\u4e00-\u9fff]{2,6})[:：])"
)


def split_labels(text: str) -> list[str]:
    """The non-blank lines of a block's text, a line cut before each label that follows a
    sentence inside it."""
    out: list[str] = []
    for line in (part.strip() for part in text.split("\n")):
        pieces = _INLINE_LABEL.split(line) if line else []
        for index, piece in enumerate(pieces):
            if index > 0 and label_of(piece) is None:
                out[-1] = f"{out[-1]} {piece}"
            elif piece:
                out.append(piece)
    return out


class BlockReader:
    """Reads one document's text blocks into entries: the entry being filled (`current`),
    the field its next text goes to (`field`), and whether unlabelled paragraphs belong to it
    (`prose`: after a heading or bold code, before any label). `orphans` counts labelled items
    that follow no code."""

    def __init__(self) -> None:
        self.entries: list[dict] = []
        self.current: dict | None = None
        self.field: str | None = None
        self.prose = False
        self.orphans = 0
        self.last_row: int | None = None  # the last line of the block read before
        self.item_number: int | None = None  # the number of the field's last numbered item

    def read(self, block: dict, following: dict | None = None) -> None:
        """Read one block (a row of DOCUMENT_BLOCK_SCHEMA as a dict); `following`: the block
        after it, if any."""
        kind = block["kind"]
        gap = self.last_row is not None and block["source_row"] > self.last_row + 1
        self.last_row = block["source_row"] + (block["text"] or "").count("\n")
        if kind == "heading" and self._subheading(block):
            return
        if kind == "heading":
            self.close()
            if found := code_start(block["text"].strip(), strict=False):
                self.start(block, block["text"], code=found[0], message=found[1])
                self.prose = True
        elif kind == "list_item" and self._symptom_item(block, gap, following):
            return
        elif kind in ("paragraph", "list_item"):
            self._paragraph(block, split_labels(block["text"] or ""), gap)
        elif kind == "labelled":
            for label, value in _pairs(block):
                self._pair(block, label, value)
        elif kind == "definition":
            for term, definition in _pairs(block):
                self._definition(block, term, definition)
        else:
            self.close()

    def _subheading(self, block: dict) -> bool:
        """A heading below the current entry's code heading that names a field (Explanation,
        Reaction, Remedy, 原因, 处理方法): the text after it fills that field."""
        current = self.current
        if current is None or current["kind"] != "heading" or block["level"] <= current["level"]:
            return False
        name = header_field(block["text"].strip())
        if name not in _CONTENT:
            return False
        self.field, self.prose = name, False
        current["raw"] += "\n" + block["text"].strip()
        return True

    def close(self) -> None:
        """End the current entry."""
        self.current, self.field, self.prose = None, None, False
        self.item_number = None

    def _ends_field(self, first: str, gap: bool) -> bool:
        """A list item after a blank line ends a field with text, unless it continues the
        field's list (a bullet, or the next number)."""
        if not (gap and self.current and self.current.get(self.field or "")):
            return False
        if self.item_number is None:
            return True
        numbered = NUMBERED.match(first)
        return numbered is not None and _item_number(numbered["number"]) != self.item_number + 1

    def _symptom_item(self, block: dict, gap: bool, following: dict | None) -> bool:
        """A numbered list item without a code that labelled items follow opens an entry keyed
        by its title, outside a field or where it ends one (`_ends_field`)."""
        first, *rest = split_labels(block["text"] or "") or [""]
        numbered = NUMBERED.match(first)
        if numbered is None or _code_line(first, listed=True) or not _labels_follow(following):
            return False
        if self.field is not None and not self._ends_field(first, gap):
            return False
        self.start(block, first, symptom=numbered["title"].strip("*_ "))
        for line in rest:
            self._line(line)
        return True

    def start(self, block: dict, raw: str, **values: str) -> dict:
        """Open a new entry (the current one from now on) with the non-empty `values`."""
        self.close()
        entry = {
            "block": block["block"],
            "source_row": block["source_row"],
            "kind": block["kind"],
            "level": block["level"] or 0,
            "heading_path": block["heading_path"] or [],
            "raw": raw,
            **{k: v for k, v in values.items() if v},
        }
        self.entries.append(entry)
        self.current = entry
        return entry

    def finish(self) -> list[dict]:
        """The entries read: prose classified; an entry needs content beyond its code line
        (a definition's text counts)."""
        for entry in self.entries:
            classify_prose(entry, entry.pop("_prose", ""))
        return [
            e
            for e in self.entries
            if any(e.get(k) for k in _CONTENT) or (e["kind"] == "definition" and e.get("message"))
        ]

    def _paragraph(self, block: dict, lines: list[str], gap: bool = False) -> None:
        """A paragraph or list item: a code line opens an entry, else its lines continue the
        current one (a paragraph first ends a field that has text)."""
        if not lines:
            return
        if all(DECORATIVE.match(line) for line in lines):
            self.field, self.prose = None, False
            return
        if block["kind"] == "paragraph" and self.current and self.current.get(self.field or ""):
            self.field = None
        if self.field is None and (note := PREVENTION_FOR.match(lines[0])):
            self.start(block, lines[0], code=note["code"], prevention=note["text"])
            self.close()
            return
        listed = block["kind"] == "list_item"
        if listed and self.field is not None and self._ends_field(lines[0], gap):
            self.field = None
        if (not listed or self.field is None) and (found := _code_line(lines[0], listed)):
            self.start(block, "\n".join(lines), code=found[0], message=found[1])
            self.prose = True
            lines = [found[2]] if found[2] else []
            lines += split_labels(block["text"])[1:]
        elif listed and self.field is not None:
            numbered = NUMBERED.match(lines[0])
            self.item_number = _item_number(numbered["number"]) if numbered else 0
        for line in lines:
            self._line(line)

    def _line(self, line: str) -> None:
        """One line of text inside the current entry: a label, or a continuation."""
        if (labelled := label_of(line)) is not None:
            self._field(labelled[0], labelled[1], line)
        elif self.current is None:
            return
        elif self.field is not None:
            self.current[self.field] = join_text(self.current.get(self.field, ""), line)
        elif self.prose:
            self.current["_prose"] = join_text(self.current.get("_prose", ""), line)

    def _pair(self, block: dict, label: str, value: str) -> None:
        """A labelled item [label, value]: a code label opens an entry, others fill a field."""
        name = header_field(label)
        raw = f"{label}：{value}"
        if name == "code" and (found := code_cell(value) or code_start(value, strict=False)):
            self.start(block, raw, code=found[0], message=found[1])
        elif name is None and (found := code_cell(label)):  # SV0401：V 就绪信号关闭
            self.start(block, raw, code=found[0], message=found[1] or value)
        elif name is None:
            self._line(raw)  # an unknown label: text of the current field
        else:
            self._field(name, value, raw, block)

    def _field(self, name: str, value: str, raw: str, block: dict | None = None) -> None:
        """Text under a label: a symptom after content opens a symptom-keyed entry."""
        current = self.current
        filled = current is None or any(current.get(k) for k in ("symptom", *_CONTENT))
        if name == "symptom" and block is not None and filled:
            current = self.start(block, raw)
        if current is None:
            self.orphans += 1
            return
        if name.startswith("_") or name == "code":
            self.field = None
            return
        if name == "message" and not current.get("code") and (code := code_start(value, False)):
            current["code"], value = code
        current[name] = join_text(current.get(name, ""), value) if value else current.get(name, "")
        current["raw"] += "\n" + raw
        self.field, self.prose, self.item_number = name, False, None

    def _definition(self, block: dict, term: str, definition: str) -> None:
        """A definition [term, text]: a code term opens an entry whose text gives the message
        (when the term has none), then the description and labelled fields."""
        found = code_cell(term) or code_start(term, strict=False)
        if found is None:
            if header_field(term) is None:
                self.close()
            else:
                self._pair(block, term, definition)
            return
        self.start(block, f"{term}\n{definition}", code=found[0], message=found[1])
        self.field = "description" if found[1] else "message"
        for line in split_labels(definition):
            self._line(line)
            if self.field == "message":
                self.field = "description"


def _pairs(block: dict) -> list[tuple[str, str]]:
    """The [label, value] / [term, definition] pairs of a block's cells."""
    return [
        ((pair[0] or "").strip(), (pair[1] or "").strip())
        for pair in block["cells"] or []
        if len(pair) >= 2
    ]


def _labels_follow(block: dict | None) -> bool:
    """The block is a labelled item naming a field, or a paragraph whose first line is one."""
    if block is None:
        return False
    if block["kind"] == "labelled":
        return any(header_field(label) in (*_CONTENT, "symptom") for label, _ in _pairs(block))
    lines = split_labels(block["text"] or "") if block["kind"] == "paragraph" else []
    return bool(lines) and (label_of(lines[0]) or ("_other",))[0] in _CONTENT


def _item_number(marker: str) -> int | None:
    """The number of a list item's marker (`2.`, `（3）`, `④`)."""
    if digits := re.search(r"\d+", marker):
        return int(digits.group())
    return ord(marker[0]) - ord("①") + 1 if "①" <= marker[0] <= "⑳" else None


def _code_line(line: str, listed: bool = False) -> tuple[str, str, str] | None:
    """(code, message, text after a bold code) when a line opens an entry; a list item's code
    may follow its number (`3. ALM 1001 主轴过热`)."""
    if listed and (numbered := NUMBERED.match(line)):
        line = numbered["title"]
    if (bold := BOLD.match(line)) and (found := code_start(bold["inner"].strip(), strict=False)):
        return found[0], found[1], bold["rest"]
    if found := code_start(line, strict=True):
        return found[0], found[1], ""
    return None
