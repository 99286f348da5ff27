"""Text that is not corpus text, told by its content: licences, changelogs and release notes,
source code and NC programs, configuration, log dumps.

Each test asks that the kind make up most of the text, not that it be mentioned: a manual with
a licence notice on its first page, a revision history, a G-code example or a parameter list
stays a manual. `what_text(...)` gives a reason code and a short detail, or None. A
labelled-item guide (`Cause: ...`, `原因: ...`) or a YAML/JSON fault table is no configuration:
its keys name alarm codes, messages, causes or remedies.
"""

from __future__ import annotations

import json
import re
from typing import Any

_LICENCE_MARKERS = re.compile(
    r"(?i)permission is hereby granted|gnu (?:lesser |affero )?general public license|"
    r"apache license,?\s+version|^\s*(?:the\s+)?mit license|creative commons (?:attribution|"
    r"legal code)|redistribution and use in source and binary forms|without warranty of any "
    r"kind|provided (?:by the copyright holders and contributors )?\W*as is\W|"
    r"this program is free software|terms and conditions for use, reproduction|"
    r"bsd \d-clause license|mozilla public license|spdx-license-identifier|"
    r"licensed under the|mulan permissive software license|木兰宽松许可证"
)
_LICENCE_WORDS = re.compile(
    r"(?i)licen[cs]|copyright|warrant|permission|software|program|redistribut|distribut|"
    r"liabilit|contributor|patent|notice|terms|conditions|许可|版权"
)
_VERSION = r"v?\d+\.\d+(?:\.\d+){0,2}(?:[-+][\w.]+)?"
_DATE = r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[./]\d{1,2}[./]\d{4}"
_VERSION_LINE = re.compile(
    rf"(?i)^\s*(?:#{{1,6}}\s*)?(?:\[(?:{_VERSION}|unreleased)\]|"
    rf"(?:version|release|ver\.|v)\s*{_VERSION}\b|{_VERSION}\s*(?:[-–—(:]\s*)?(?:{_DATE}))"
)
_DATED = re.compile(_DATE)
_CHANGE_HEADING = re.compile(
    r"(?i)^\s*(?:#{1,6}\s*)?(?:added|fixed|changed|removed|deprecated|security|bug ?fixes|"
    r"improvements|new features|features|breaking changes|新增|新功能|修复|修改|变更|优化)"
    r"\s*[:：]?\s*$"
)
_CHANGELOG_TITLE = re.compile(
    r"(?i)change ?log|release notes|what's new|notable changes|更新日志|版本说明|发布说明|更新说明"
)
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+\S")
_CODE_LINE = re.compile(
    r"^\s*(?:def |class \w|import \w|from [\w.]+ import |return\b|raise\b|yield\b|@\w|"
    r"(?:if|elif|while|for|with|try|except|else|finally)\b.*:$|"  # Python
    r"#\s*(?:include|define|ifn?def|endif|pragma)\b|"  # C preprocessor
    r"(?:public|private|protected|static|const|void|int|char|float|double|unsigned|struct|"
    r"function|var|let|echo|export|fi|then|done)\b|"
    r"[\w.\[\]]+\([^()]*\)\s*;?$|\s+[\w.\[\]]+\s*[-+*/]?=\s*\S.*$|"  # calls, assignments
    r"[A-Za-z_]\w*(?:\s*:\s*[\w\[\], .|]+)?\s*=\s*(?:[\[({\"']|\w+\().*$|"  # literal bindings
    r"[)\]}]|[rbuf]?[\"'].*[\"'][,)\]]*\s*$|\(.*\),?\s*$)"  # literal lines
    r"|.*(?:[;{}]|[(\[{],?)\s*$"
)
_DOCSTRING = re.compile(r'(?s)""".*?"""|\'\'\'.*?\'\'\'')
_COMMENT = re.compile(r"^\s*(?:#|//|/\*|\*|--|;|REM\b)")
_NC_WORDS = r"(?:[A-Z][-+]?(?:\d+\.?\d*|\.\d+)|[A-Z]{1,6}\d*\s*=\s*\S+)"
_NC_LINE = re.compile(
    rf"^\s*(?:%.*|O\d{{1,5}}.*|:\d{{1,5}}.*|\(.*\)|"
    rf"(?:N\d+\s*)?(?:{_NC_WORDS}\s*)+(?:\(.*\)|;.*)?|"  # ISO G-code words (FANUC, SINUMERIK, Haas)
    rf"\d+\s+(?:BEGIN PGM|END PGM|TOOL CALL|CYCL DEF|CYCL CALL|BLK FORM|LBL|CALL|FN \d+|"
    rf"L\s|CC\s|C\s|CR\s|RND\s|CHF\s).*)$"  # Heidenhain conversational
)
_INI_SECTION = re.compile(r"^\s*\[\[?[\w .\-\"':]+\]\]?\s*$")
_KEY_VALUE = re.compile(r"^\s*(?:export\s+)?[\w.\-\"']+\s*=\s*(\S.{0,100})?$")
_YAML_KEY = re.compile(r"^\s*(?:-\s+)?([\w.\-\"']+)\s*:(?:\s+(\S.*))?$")
_YAML_ITEM = re.compile(r"^\s*-\s+\S")
_ARRAY_LINE = re.compile(r"^\s*(?:[\"'].*[\"'],?|[\]}],?|\{.*\},?|[-\d.]+,?)\s*$")  # TOML arrays
_FAULT_KEYS = re.compile(
    r"(?i)^[\"']?(?:code|alarm|alarm_?no|message|msg|text|cause|causes|remedy|remedies|action|"
    r"solution|description|meaning|fault|error|报警号?|代码|信息|原因|处理|处理方法|对策|说明)[\"']?$"
)
# A machine's log line starts with a time to the second (a technician's dated notes do not).
_TIMESTAMP = re.compile(
    r"^\s*\[?(?:(?:\d{4}[-/.]\d{2}[-/.]\d{2}[T ]|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}[ T,]+|"
    r"[A-Z][a-z]{2}\s+\d{1,2}\s+)?\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b|\d{10}(?:\.\d+)?\s)"
)


def _share(rx: re.Pattern[str], lines: list[str]) -> tuple[int, float]:
    """(lines matching `rx`, their share of `lines`)."""
    hits = sum(bool(rx.match(line)) for line in lines)
    return hits, hits / len(lines) if lines else 0.0


def is_licence(text: str) -> bool:
    """Two distinct licence phrases, and licence wording in paragraphs holding most of the text
    (a licence notice on a manual's first page is a small part of it)."""
    found = {m.group(0).strip().lower()[:16] for m in _LICENCE_MARKERS.finditer(text)}
    if len(found) < 2:
        return False
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    legal = sum(len(p) for p in paragraphs if _LICENCE_WORDS.search(p))
    return legal >= 0.6 * sum(len(p) for p in paragraphs)


def is_changelog(lines: list[str]) -> bool:
    """Version entries (`## [1.2.0] - 2024-03-01`, `v2.3.1 (2024-03-01)`), change sections and
    bullets making up most of the lines, with a title, a change section or dated versions."""
    versions = [line for line in lines if _VERSION_LINE.match(line)]
    if len(versions) < 2:
        return False
    sections, _ = _share(_CHANGE_HEADING, lines)
    bullets, _ = _share(_BULLET, lines)
    if len(versions) + sections + bullets < 0.6 * len(lines):
        return False
    titled = any(_CHANGELOG_TITLE.search(line) for line in lines[:5])
    return titled or sections > 0 or sum(bool(_DATED.search(v)) for v in versions) >= 2


def code_kind(text: str, lines: list[str]) -> str | None:
    """An NC program when most `lines` are G-code or Heidenhain blocks, source code when half
    the lines of `text` that are not comments or docstrings are statements; None otherwise
    (at least five lines)."""
    nc, nc_share = _share(_NC_LINE, lines)
    if nc >= 5 and nc_share >= 0.6:
        return "NC program (G-code or Heidenhain conversational)"
    bare = _DOCSTRING.sub('""', text)
    statements = [x for x in bare.splitlines()[:400] if x.strip() and not _COMMENT.match(x)]
    code, code_share = _share(_CODE_LINE, statements)
    if code >= 5 and code_share >= 0.5:
        return "source code"
    return None


def is_configuration(lines: list[str]) -> bool:
    """INI/TOML sections and `key = value` lines, or YAML `key: value` lines with short values
    and identifier keys, making up 80% of the lines that are not comments, three at least;
    not when two keys name fault-table fields (code, message, cause, remedy, ...)."""
    body = [line for line in lines if not _COMMENT.match(line) or _INI_SECTION.match(line)]
    keys, fault_keys, settings = 0, set(), 0
    for line in body:
        listed = _YAML_ITEM.match(line) and not _YAML_KEY.match(line)
        if _INI_SECTION.match(line) or listed or _ARRAY_LINE.match(line):
            settings += 1
            continue
        m = _YAML_KEY.match(line)
        value = m.group(2) if m else None
        if m and (value is None or len(value) <= 60 and not value.rstrip().endswith((".", "。"))):
            keys += 1
            if _FAULT_KEYS.match(m.group(1)):
                fault_keys.add(m.group(1).strip("\"'").lower())
        elif _KEY_VALUE.match(line):
            keys += 1
    if len(fault_keys) >= 2:
        return False
    return keys >= 3 and keys + settings >= 0.8 * len(body)


def is_json_configuration(text: str) -> bool:
    """A JSON object with three settings at least (scalars, nested objects, lists of scalars)
    and no list of records, whose keys name no alarm codes or fault-table fields."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # nested past the parser's depth: not settings
        return False
    return isinstance(data, dict) and _leaves(data) >= 3 and _settings(data, 0)


def _leaves(value: Any) -> int:
    """Scalar values in a JSON value (a list of scalars counts once)."""
    if isinstance(value, dict):
        return sum(_leaves(v) for v in value.values())
    return 1


def _settings(value: Any, depth: int) -> bool:
    """Whether a JSON value holds settings only (see `is_json_configuration`)."""
    if isinstance(value, list):
        return all(not isinstance(v, dict | list) for v in value)
    if not isinstance(value, dict):
        return True
    if depth > 6 or any(_FAULT_KEYS.match(k) or re.search(r"\d{3}", k) for k in value):
        return False
    return all(_settings(v, depth + 1) for v in value.values())


def is_log_dump(lines: list[str]) -> bool:
    """Most lines start with a time to the second (after an ISO, European or syslog date, or
    alone), or an epoch timestamp: five lines at least."""
    stamped, share = _share(_TIMESTAMP, lines)
    return stamped >= 5 and share >= 0.6


def what_text(text: str, lines: list[str]) -> tuple[str, str] | None:
    """(reason code, detail) when `text` (its `lines`) is a licence, a changelog,
    configuration, or source code or an NC program; None otherwise (log dumps: `is_log_dump`)."""
    filled = [line for line in lines[:400] if line.strip()]
    if is_licence(text):
        return "licence", "licence text"
    if is_changelog(filled):
        return "changelog", "changelog or release notes (version entries and change lists)"
    if is_configuration(filled):
        return "configuration", "configuration file (sections, keys and values)"
    kind = code_kind(text, filled)
    if kind is not None:
        return "source_code", kind
    return None
