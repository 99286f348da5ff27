"""Python values (as `model_dump(mode="json")` gives them) written as TOML text.

Enough TOML for configuration examples: strings, numbers, booleans, arrays (wrapped over lines
when long), inline tables when short, sub-tables and arrays of tables otherwise. `None` has no
TOML form: such keys are left out.
"""

from __future__ import annotations

import json
import re
import unicodedata

WIDTH = 100
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_INDENT = "    "


def toml_key(key: str) -> str:
    """A bare key where TOML allows one, else a quoted key."""
    return key if _BARE_KEY.match(key) else toml_string(key)


def toml_string(text: str) -> str:
    """A literal string ('...') for text with backslashes (regexes), else a basic string."""
    if "\\" in text and "'" not in text and not any(ord(c) < 32 for c in text):
        return f"'{text}'"
    return json.dumps(text, ensure_ascii=False)


def toml_value(value: object) -> str:
    """One value on one line (arrays and tables inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = [f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    raise TypeError(f"no TOML form for {value!r}")


def is_table(value: object) -> bool:
    """A dict, or an array of dicts: written as a sub-table, not as a value."""
    if isinstance(value, dict):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def display_width(text: str) -> int:
    """Columns `text` takes in a monospaced font (CJK characters take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def assignment(key: str, value: object, width: int = WIDTH) -> list[str]:
    """`key = value`; an array too long for one line is wrapped, items packed per line."""
    line = f"{toml_key(key)} = {toml_value(value)}"
    if display_width(line) <= width or not isinstance(value, list):
        return [line]
    lines, current = [f"{toml_key(key)} = ["], _INDENT
    for item in (toml_value(v) + "," for v in value):
        if current.strip() and display_width(current + item) > width:
            lines.append(current.rstrip())
            current = _INDENT
        current += item + " "
    return [*lines, current.rstrip(), "]"]


def fits_inline(key: str, value: dict[str, object], width: int = WIDTH) -> bool:
    """A table of plain values short enough for `key = { ... }` on one line."""
    plain = not any(is_table(v) for v in value.values())
    return plain and display_width(f"{toml_key(key)} = {toml_value(value)}") <= width


def toml_table(header: str, table: dict[str, object], array: bool = False) -> list[str]:
    """The table `[header]` (or one entry `[[header]]`): its values, then its sub-tables.

    A table holding no plain value gets no header line of its own, unless it is an entry of
    an array of tables; `header` "" is the document's top level."""
    plain = [(k, v) for k, v in table.items() if v is not None and not _nested(k, v)]
    opens = header and (plain or array)
    lines = [f"[[{header}]]" if array else f"[{header}]"] if opens else []
    for key, value in plain:
        lines += assignment(key, value)
    for key, value in table.items():
        if value is not None and _nested(key, value):
            lines += ["", *_sub_table(_join(header, key), value)]
    return lines


def _nested(key: str, value: object) -> bool:
    if isinstance(value, dict):
        return not fits_inline(key, value)  # type: ignore[arg-type]
    return is_table(value)


def _sub_table(header: str, value: object) -> list[str]:
    if isinstance(value, dict):
        return toml_table(header, value)
    lines: list[str] = []
    for entry in value:  # type: ignore[attr-defined]
        lines += [*([""] if lines else []), *toml_table(header, entry, array=True)]
    return lines


def _join(header: str, key: str) -> str:
    return f"{header}.{toml_key(key)}" if header else toml_key(key)
