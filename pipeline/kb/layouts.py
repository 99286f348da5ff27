"""The code shapes, labels and text rules of fault entries in the layouts vendor manuals use,
shared by the block extractor (`pipeline.kb.text_blocks`, `pipeline.kb.tables`) and the
parsers (`pipeline.ingest.documents.text` finds labelled items with `label_of`).

- codes as manuals print them (`CODE_ATOM`, `CODE_GROUP`), an entry start that names one
  (`code_start`: `700016 Coolant pressure too low`, `报警号：1000`, `【SV0401】…`) and the code
  cells combined or ranged (`split_codes`: `SV0410 / SV0411`, `SV0401~SV0405`);
- labels (原因/可能原因/处理/措施/排除方法/影响/说明, Cause/Remedy/Action/Effect/Reaction/
  Explanation, Ursache/Abhilfe) → fields (`LABELS`, `label_of`); numbered item titles
  (`NUMBERED`: `3. 主轴不能启动`, `（2）ALM 1001 …`);
- unlabelled prose after a code in bold or in a heading (`classify_prose`): sentences that
  instruct go to the remedy, sentences that explain a cause to the cause, the rest to the
  description; decorative lines (`------`, `====`, box drawing: `DECORATIVE`) are dropped.
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
NUMBERED = re.compile(rf"^(?P<number>{_ITEM_NUMBER})\s*(?P<title>\S.*)$")
_BULLET = re.compile(rf"^(?:[-*•·]\s+|{_ITEM_NUMBER}\s*|[a-z][.)]\s+)")
DECORATIVE = re.compile(r"^[\s\-=_*~#+·.—–─━│┃┄┅┈┉╌╍═║╔╗╚╝╠╣╦╩╬┌┐└┘├┤┬┴┼]{3,}$")

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
        if not sentence or DECORATIVE.match(sentence):
            continue
        stripped = _BULLET.sub("", sentence)
        if REMEDY_SENTENCE.match(stripped):
            field = "remedy"
        elif CAUSE_SENTENCE.search(stripped):
            field = "cause"
        else:
            field = "description"
        entry[field] = (entry.get(field, "") + "\n" + stripped).strip()


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
