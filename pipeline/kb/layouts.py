"""Fault entries in the layouts vendor manuals use, found in one section's text.

Each entry is a dict of raw strings: `code` (as printed, possibly combined or ranged, split
later by `split_codes`), `symptom`, `message`, `description`, `cause`, `remedy`, `effect`,
`prevention`, plus `source_row` and `raw` for lineage (tables: `pipeline.kb.tables`). The
code shapes, labels, `code_start`, `classify_prose` and `split_codes` are shared with the block
extractor (`pipeline.kb.text_blocks`). Layouts:

- labelled items: an entry start followed by labels (原因/可能原因/处理/措施/排除方法/影响/说明,
  Cause/Remedy/Action/Effect/Reaction/Explanation), each label its own field, lists below a label
  kept as items. An entry starts at a code line (`700016 Coolant pressure too low`, `报警号：1000`,
  `【SV0401】…`), a numbered item title (`3. 主轴不能启动`, `（2）ALM 1001 …`), a symptom label
  (`故障现象：…`) or a heading whose title is a code;
- codes in bold prose (`**EX2201 TOOL CLAMP PRESSURE LOW**`) or in a heading, with the paragraphs
  that follow: sentences that instruct go to the remedy, sentences that explain a cause to the
  cause, the rest to the description;
- decorative lines (`------`, `====`, `****`, box drawing) end the current field and are dropped.
"""

from __future__ import annotations

import re

# A code as manuals print it: FANUC SV0401, vendor EX2201 / E-102, Mitsubishi S02 0031,
# Heidenhain 8B40-0001, or a bare number.
CODE_ATOM = (
    r"(?:[A-Z]{1,3}[ -]?\d{2,5}(?: [0-9A-F]{4}(?![0-9A-Za-z]))?|[0-9A-F]{4}-[0-9A-F]{4}|\d{3,6})"
)
_JOIN = r"\s*(?:/|、|,|，|;|；|&|\+|和|及|或|至|到|~|～|〜|–|—|-|\bor\b|\band\b|\bto\b)\s*"
CODE_GROUP = rf"{CODE_ATOM}(?:{_JOIN}(?:{CODE_ATOM}|\d{{2,6}})(?![A-Za-z0-9]))*"

_CUE = (
    r"(?:报警号|报警代码|报警编号|故障代码|故障码|错误代码|报警|"
    r"(?i:alarm|alm|error|err|fault)(?:\s*(?:no\.?|number|code|#))?)"
)
_PLACE = r"[\s:：.、#]*"
# An entry start that names a code: [cue] CODE [：] message
_CODE_START = re.compile(
    rf"^(?:{_CUE}{_PLACE})?(?P<code>{CODE_GROUP})(?![A-Za-z0-9])\s*(?:[:：.]\s*|\s+|$)(?P<message>.{{0,100}})$"
)
_CUED_CODE = re.compile(rf"^{_CUE}{_PLACE}(?P<code>{CODE_GROUP})(?![A-Za-z0-9])")
_BRACKET_CODE = re.compile(rf"^[【\[](?P<code>{CODE_GROUP})[】\]]\s*(?P<message>.{{0,100}})$")
BOLD = re.compile(r"^\*\*(?P<inner>[^*]+)\*\*\s*[:：]?\s*(?P<rest>.*)$")
_ITEM_NUMBER = r"(?:\d{1,2}[.、)）]|[（(]\d{1,2}[)）]|[①-⑳])"
_NUMBERED = re.compile(rf"^{_ITEM_NUMBER}\s*(?P<title>\S.*)$")
_BULLET = re.compile(rf"^(?:[-*•·]\s+|{_ITEM_NUMBER}\s*|[a-z][.)]\s+)")
_DECORATIVE = re.compile(r"^[\s\-=_*~#+·.—–─━│┃┄┅┈┉╌╍═║╔╗╚╝╠╣╦╩╬┌┐└┘├┤┬┴┼]{3,}$")

# Label words -> field. Compared with spaces removed, lower case.
LABELS: dict[str, tuple[str, ...]] = {
    "symptom": ("故障现象", "现象", "故障描述", "故障症状", "症状", "symptom", "symptoms",
                "problem", "trouble", "condition"),
    "message": ("报警信息", "报警内容", "报警文本", "报警名称", "信息", "message", "alarmtext",
                "text"),
    "description": ("说明", "描述", "详细说明", "报警说明", "含义", "解释", "description",
                    "explanation", "meaning", "details", "detail", "beschreibung", "erläuterung",
                    "erklärung", "bedeutung"),
    "cause": ("原因", "可能原因", "故障原因", "报警原因", "产生原因", "原因分析", "cause", "causes",
              "possiblecause", "possiblecauses", "probablecause", "probablecauses", "reason",
              "reasons", "causeoferror", "errorcause", "ursache", "fehlerursache"),
    "remedy": ("处理", "处理方法", "处理措施", "处理办法", "措施", "排除方法", "排除", "解决方法",
               "解决办法", "对策", "维修方法", "检修方法", "纠正措施", "remedy", "remedies",
               "action", "actions", "correctiveaction", "solution", "countermeasure",
               "countermeasures", "troubleshooting", "whattodo", "fix", "errorcorrection",
               "abhilfe", "behebung", "fehlerbehebung", "maßnahme", "maßnahmen"),
    "effect": ("影响", "后果", "报警影响", "系统反应", "反应", "报警响应", "effect", "effects",
               "reaction", "consequence", "consequences", "systemresponse", "response",
               "reaktion", "auswirkung"),
    "prevention": ("预防", "预防措施", "预防对策", "prevention", "preventiveaction",
                   "preventivemaintenance", "vorbeugung"),
    "_other": ("程序继续", "继续", "参数", "定义", "清除", "清除条件", "复位", "报警等级", "等级",
               "类别", "programcontinuation", "parameters", "parameter", "definitions",
               "definition", "clearing", "acknowledgement", "acknowledgment", "class", "level",
               "category", "identifier", "note", "notes", "注", "注意"),
}  # fmt: skip
LABEL_FIELD = {word: name for name, words in LABELS.items() for word in words}
_LABEL = re.compile(
    r"^(?:[-*•]\s*)?(?:\*\*|__)?[【\[]?"
    r"(?P<label>[A-Za-zÄÖÜäöü][A-Za-zÄÖÜäöüß ]{1,24}?|[\u4e00-\u9fff]{1,6})"
    r"[】\]]?(?:\*\*|__)?\s*(?P<sep>[:：]|\s*$)\s*(?:\*\*|__)?\s*(?P<text>.*)$"
)
QUANTITY = re.compile(r"^[\d.,%°℃]|^(?:mm|rpm|年|月|日|时|分|秒|次|个|件)")
_CONTENT = ("cause", "remedy", "effect", "prevention", "description")

# Unlabelled sentences after a bold/heading code: instructions are remedies, explanations causes.
REMEDY_SENTENCE = re.compile(
    r"^(?:请|应|需|先|再|然后)?(?:检查|更换|确认|清洁|清理|调整|复位|紧固|联系|补充|加注|重新|拆下|"
    r"测量|修复|排除|清除|校正|修改|设定|设置|恢复|按下|断开|接通|核对|排查|疏通|润滑)"
    r"|^(?i:check|replace|verify|confirm|clean|adjust|reset|inspect|tighten|contact|make sure|"
    r"ensure|refill|fill|top up|remove|repair|restore|set|measure|press|call|turn|clear|lubricate|"
    r"re-?)"
)
CAUSE_SENTENCE = re.compile(
    r"可能是|可能由|由于|原因是|导致|引起|造成|因为"
    r"|(?i:caused by|because|due to|may be|might be|can be|could be|possible cause|occurs? when|"
    r"occurs? if|indicates? that|is generated when|this alarm is issued)"
)
_SENTENCE_END = re.compile(r"(?<=[。！？；])|(?<=[.!?;])\s+(?=[A-Z])")


def label_of(line: str) -> tuple[str, str] | None:
    """(field, text after the label) when a line starts with a known label."""
    m = _LABEL.match(line)
    if not m:
        return None
    field = LABEL_FIELD.get(re.sub(r"\s", "", m.group("label")).lower())
    if field is None:
        return None
    if not m.group("sep").strip() and m.group("text"):
        return None  # "Cause" without a colon only as a line of its own
    return field, m.group("text").strip().strip("*_").strip()


def code_start(line: str, strict: bool) -> tuple[str, str] | None:
    """(code, message) when a line starts an entry with a code. `strict`: a bare number needs
    a cue word or a message that is text, not a quantity."""
    for rx in (_BRACKET_CODE, _CODE_START):
        m = rx.match(line)
        if not m:
            continue
        code, message = m.group("code"), m.group("message").strip()
        if label_of(message):
            message = ""
        digits_only = re.fullmatch(r"[\d\s/、,，;；&+~～〜–—-]+", code) is not None
        cued = _CUED_CODE.match(line) is not None or rx is _BRACKET_CODE
        if digits_only and not cued:
            if not message or QUANTITY.match(message):
                return None
            if strict and len(message) > 60:
                return None
        if message.endswith(("。",)) and not cued:
            return None
        if strict and not cued and re.match(r"[A-Z]{3}", code):
            return None  # VMC850, DMU65: a machine model, not an alarm, unless cued or bold
        return code, message.strip("*_ ")
    return None


def join_text(previous: str, line: str) -> str:
    """Append a continuation line: list items on their own line, wrapped text joined."""
    if not previous:
        return line
    if _BULLET.match(line):
        return previous + "\n" + line
    han = re.compile(r"[\u4e00-\u9fff，。；：、]")
    sep = "" if han.match(previous[-1]) and han.match(line[0]) else " "
    return previous + sep + line


def classify_prose(entry: dict, text: str) -> None:
    """Unlabelled paragraph text of a bold/heading entry -> remedy, cause or description."""
    for sentence in (s.strip() for s in _SENTENCE_END.split(text)):
        if not sentence or _DECORATIVE.match(sentence):
            continue
        stripped = _BULLET.sub("", sentence)
        if REMEDY_SENTENCE.match(stripped):
            field = "remedy"
        elif CAUSE_SENTENCE.search(stripped):
            field = "cause"
        else:
            field = "description"
        entry[field] = (entry.get(field, "") + "\n" + stripped).strip()


def labelled_entries(text: str, first_row: int, heading: str) -> list[dict]:
    """Entries of the labelled, numbered, bold and heading layouts in one section body.

    `heading` is the section's own title: a code there starts an entry at the body's top.
    """
    reader = _SectionReader(text.split("\n"), first_row)
    if (heading_code := code_start(heading.strip(), strict=False)) is not None:
        reader.start(first_row, heading, code=heading_code[0], message=heading_code[1])
        reader.prose = True
    for i, line in enumerate(reader.lines):
        reader.read(i, line.strip())
    for entry in reader.entries:
        classify_prose(entry, entry.pop("_prose", ""))
    return [e for e in reader.entries if any(e.get(k) for k in _CONTENT)]


class _SectionReader:
    """Reads one section body line by line into entries: the entry being filled (`current`),
    the field its next lines go to (`field`), and whether unlabelled paragraphs belong to it
    (`prose`: after a bold or heading code)."""

    def __init__(self, lines: list[str], first_row: int) -> None:
        self.lines = lines
        self.first_row = first_row
        self.entries: list[dict] = []
        self.current: dict | None = None
        self.field: str | None = None
        self.prose = False

    def start(self, row: int, raw: str, **values: str) -> dict:
        """Open a new entry (the current one from now on) with the non-empty `values`."""
        entry = {"source_row": row, "raw": raw, **{k: v for k, v in values.items() if v}}
        self.entries.append(entry)
        self.current = entry
        return entry

    def read(self, i: int, stripped: str) -> None:
        """Read line `i` of the body (stripped)."""
        row = self.first_row + i
        if not stripped:
            if self.field is not None and self.current is not None and self.current.get(self.field):
                self.field = None  # a blank line ends a field, not a label waiting for its list
            return
        if stripped.startswith("|") or _DECORATIVE.match(stripped):
            self.field = None
            self.prose = self.prose and not _DECORATIVE.match(stripped)
            return
        if self._bold_code(row, stripped) or self._label(row, stripped):
            return
        if self.field is None and self._entry_start(i, row, stripped):
            return
        self._continuation(stripped)

    def _bold_code(self, row: int, stripped: str) -> bool:
        """A code in bold (`**EX2201 TOOL CLAMP PRESSURE LOW**`) starts a prose entry."""
        bold = BOLD.match(stripped)
        if not bold or not (found := code_start(bold.group("inner").strip(), strict=False)):
            return False
        entry = self.start(row, stripped, code=found[0], message=found[1])
        self.field, self.prose = None, True
        if bold.group("rest"):
            entry["_prose"] = bold.group("rest")
        return True

    def _label(self, row: int, stripped: str) -> bool:
        """A labelled line opens its field; a symptom label after content starts an entry."""
        if not (labelled := label_of(stripped)):
            return False
        name, rest = labelled
        current = self.current
        if name == "symptom" and (
            current is None or any(current.get(k) for k in ("symptom", *_CONTENT))
        ):
            current = self.start(row, stripped)
        if current is None:
            return True
        if name == "_other":
            self.field = None
            return True
        if (
            name == "message"
            and (code := code_start(rest, strict=False))
            and not current.get("code")
        ):
            current["code"], rest = code
        self.field = name
        current[name] = join_text(current.get(name, ""), rest) if rest else current.get(name, "")
        current["raw"] += "\n" + stripped
        self.prose = False
        return True

    def _entry_start(self, i: int, row: int, stripped: str) -> bool:
        """Outside a field's list: a code line, or a numbered title that labels follow,
        starts an entry."""
        numbered = _NUMBERED.match(stripped)
        found = code_start(numbered.group("title") if numbered else stripped, strict=True)
        if found:
            self.start(row, stripped, code=found[0], message=found[1])
            standalone = i == 0 or not self.lines[i - 1].strip()
            self.field, self.prose = None, standalone and not numbered
            return True
        if numbered is not None and self._label_follows(i):
            self.start(row, stripped, symptom=numbered.group("title").strip("*_ "))
            self.field, self.prose = None, False
            return True
        return False

    def _label_follows(self, i: int) -> bool:
        """The next non-blank line after line `i` is a labelled one."""
        for later in self.lines[i + 1 :]:
            if later.strip():
                return label_of(later.strip()) is not None
        return False

    def _continuation(self, stripped: str) -> None:
        """Any other line continues the current field, or the entry's prose."""
        if self.current is None:
            return
        if self.field is not None:
            self.current[self.field] = join_text(self.current.get(self.field, ""), stripped)
            self.current["raw"] += "\n" + stripped
        elif self.prose:
            self.current["_prose"] = join_text(self.current.get("_prose", ""), stripped)
            self.current["raw"] += "\n" + stripped


_CODE_TOKEN = re.compile(rf"(?P<code>{CODE_ATOM}|\d{{2,6}})(?![A-Za-z0-9])(?P<sep>{_JOIN})?")
_RANGE = re.compile(r"[~～〜–—-]|至|到|\bto\b")


def split_codes(cell: str, family: str | None, max_range: int = 256) -> list[str] | None:
    """The codes of a code cell: `SV0410 / SV0411` -> two, `SV0401~SV0405` -> five,
    `700000-700003` -> four; a cell that is not a list of codes stays whole. None when a range
    is larger than `max_range`. A Heidenhain `8040-0001` stays one code."""
    cell = cell.strip().strip("*_ ")
    codes: list[str] = []
    pending_range = False
    pos = 0
    while pos < len(cell):
        m = _CODE_TOKEN.match(cell, pos)
        if m is None or m.end() == pos:
            return [cell]
        code = m.group("code")
        digit_pair = re.fullmatch(r"(\d{4})-(\d{4})", code)
        heidenhain = (family or "").upper() == "HEIDENHAIN"
        if digit_pair and not heidenhain and int(digit_pair[2]) > int(digit_pair[1]):
            codes.append(digit_pair[1])  # 1000-1005: a range, not a Heidenhain number
            code, pending_range = digit_pair[2], True
        if pending_range and codes:
            expanded = _expand(codes[-1], code, max_range)
            if expanded is None:
                return None
            codes.extend(expanded)
        else:
            codes.append(code)
        sep = m.group("sep") or ""
        pending_range = _RANGE.search(sep) is not None
        pos = m.end()
    return list(dict.fromkeys(codes))


# A range end: a prefix (letters, or a Mitsubishi class `S02 `) and the number counted on.
_RANGE_END = re.compile(r"(?P<prefix>[SMYZPLTU]\d{2}[ -](?=\d{4}$)|[A-Z]*[ -]?)(?P<number>\d+)")


def _expand(first: str, last: str, max_range: int) -> list[str] | None:
    """The codes after `first` up to `last` (`last` may omit the prefix: SV0401~0405,
    Mitsubishi S02 2219~2221)."""
    m, n = _RANGE_END.fullmatch(first), _RANGE_END.fullmatch(last)
    if not m or not n or (n.group("prefix") and n.group("prefix") != m.group("prefix")):
        return None
    lo, hi = int(m.group("number")), int(n.group("number"))
    if hi <= lo or hi - lo > max_range:
        return None
    width = len(m.group("number"))
    return [f"{m.group('prefix')}{k:0{width}d}" for k in range(lo + 1, hi + 1)]
