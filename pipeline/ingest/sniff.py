"""What an input file is, from its first kilobytes: a work-order table, an alarm log (and its
layout), a manual, or a file to skip (and why).

Order: notes by name (README, LICENSE, SOURCE, ...) are skipped; binary signatures decide PDF
manuals, XLSX work orders and the archives and legacy Office files we do not read; text is
decoded (configured encoding, else detected) and tried as an alarm log of each known layout,
then as JSON / JSONL records, a Markdown document, a delimited table (work orders), and plain
text (a manual). The file's suffix only breaks ties: a `.log` or `.shdr` file in no known
layout is skipped rather than read as a manual, configuration and source-code
files are skipped, and so are unknown suffixes holding no table.
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from pipeline.ingest.alarm_logs import LAYOUTS, detect_layout
from pipeline.ingest.encoding import EncodingError, detect_encoding

HEAD_BYTES = 65536
_NOTES = re.compile(
    r"(?i)^(?:readme|read_me|licen[cs]e|copying|notice|source|sources|authors|changelog|"
    r"changes|contributing|attribution|citation|third[-_]party[-_]notices)(?:[._-].*)?$"
)
_LICENCE_TEXT = re.compile(
    r"(?i)permission is hereby granted|gnu (?:lesser |affero )?general public license|"
    r"apache license,?\s+version|^\s*mit license|creative commons (?:attribution|legal code)|"
    r"redistribution and use in source and binary forms"
)
_LOG_SUFFIXES = {".log", ".shdr", ".alm", ".his"}
_TEXT_SUFFIXES = {".txt", ".text", ".md", ".markdown", ""}
_TABLE_SUFFIXES = {".csv", ".tsv", ".txt", ".json", ".jsonl", ".ndjson", ".dat", ""}
# Text that is neither a table nor prose even where it has commas: configuration and code.
_CODE_SUFFIXES = {
    ".py", ".toml", ".yaml", ".yml", ".ini", ".cfg", ".xml", ".html", ".htm", ".js", ".sh",
    ".bat", ".ps1", ".sql", ".r", ".c", ".h", ".cpp", ".java", ".ipynb",
}  # fmt: skip


@dataclass(frozen=True)
class Sniffed:
    """`kind`: workorder, alarm_log, manual or skip; `layout`: the reader's format (csv, xlsx,
    json, jsonl; one of the alarm-log layouts; markdown, text, pdf); `reason`: why skipped."""

    kind: str
    layout: str | None = None
    reason: str | None = None

    @property
    def reader(self) -> str:
        return f"{self.kind}:{self.layout}" if self.layout else self.kind


def _skip(reason: str) -> Sniffed:
    return Sniffed("skip", reason=reason)


def _decode(head: bytes, encoding: str, path: Path) -> str | None:
    """The head as text (a multi-byte character cut at its end is dropped); None if binary."""
    if b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None
    for cut in range(4):
        part = head[: len(head) - cut] if cut else head
        try:
            used = detect_encoding(part, path) if encoding == "auto" else encoding
            return part.decode(used)
        except (EncodingError, UnicodeDecodeError):
            continue
        except LookupError:
            raise EncodingError(
                f"{path}: unknown encoding {encoding!r} in the configuration"
            ) from None
    return None


def _json_kind(text: str, complete: bool) -> str | None:
    """jsonl when every non-blank line is a JSON object, json when the whole text is JSON."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not complete and lines:
        lines = lines[:-1]  # the last line may be cut
    try:
        if lines and all(isinstance(json.loads(line), dict) for line in lines[:50]):
            return "jsonl" if len(lines) > 1 or not text.lstrip().startswith("[") else "json"
    except ValueError:
        pass
    if not complete:
        return "json"  # a large JSON document: its reader says whether it parses
    try:
        json.loads(text)
    except ValueError:
        return None
    return "json"


def _is_table(lines: list[str], declared: bool) -> bool:
    """A header and rows with the same number of delimited fields: at least two rows of three
    fields, or (a `.csv`/`.tsv` file, `declared`) one row of two."""
    sample = [line for line in lines if line.strip()][:30]
    if len(sample) < (2 if declared else 3):
        return False
    for delimiter in (",", ";", "\t", "|"):
        rows = list(csv.reader(io.StringIO("\n".join(sample)), delimiter=delimiter))
        widths = [len(r) for r in rows]
        header = widths[0]
        wide_enough = header >= (2 if declared else 3)
        if wide_enough and sum(w == header for w in widths) >= 0.8 * len(widths):
            return True
    return False


def _is_markdown(lines: list[str]) -> bool:
    headings = sum(bool(re.match(r"^#{1,6}\s+\S", line)) for line in lines)
    rulers = sum(bool(re.match(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)+\|?\s*$", line))
                 for line in lines)  # fmt: skip
    return headings >= 2 or (headings >= 1 and rulers >= 1)


def sniff(path: str | Path, encoding: str = "auto", expect: str | None = None) -> Sniffed:
    """The kind of `path` from its content; `encoding` is the configured one ('auto' detects);
    `expect` is the kind its folder is for (an `alarm_logs/` folder: an unknown text layout is
    skipped, not read as a manual)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if _NOTES.match(path.name):
        return _skip("licence, readme or source-notes file: not corpus text")
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
        complete = not fh.read(1)
    if not head.strip():
        return _skip("empty file")
    if head.startswith(b"%PDF-"):
        return Sniffed("manual", "pdf")
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except zipfile.BadZipFile:
            return _skip("damaged zip archive")
        if any(n.startswith("xl/") for n in names):
            return Sniffed("workorder", "xlsx")
        return _skip("zip archive (not an .xlsx workbook): unpack it into the input folder")
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        return _skip("legacy Office binary (.xls/.doc): save it as .xlsx or text")
    text = _decode(head, encoding, path)
    if text is None:
        return _skip("binary content: not a table, alarm log or manual")
    lines = text.replace("\r\n", "\n").split("\n")
    if not complete:
        lines = lines[:-1]
    if _LICENCE_TEXT.search(text[:3000]):
        return _skip("licence text: not corpus text")
    layout = detect_layout(lines[:400], path.name)
    if layout:
        return Sniffed("alarm_log", layout)
    if suffix in _LOG_SUFFIXES or expect == "alarm_log":
        first = next((line.strip() for line in lines if line.strip()), "")[:80]
        return _skip(f"no known alarm-log layout ({', '.join(LAYOUTS)}); first line: {first!r}")
    if text.lstrip()[:1] in "[{" and suffix in _TABLE_SUFFIXES:
        kind = _json_kind(text, complete)
        return Sniffed("workorder", kind) if kind else _skip("JSON that does not parse")
    if suffix in {".md", ".markdown"}:
        return Sniffed("manual", "markdown")
    if suffix in _TEXT_SUFFIXES and _is_markdown(lines[:400]):
        return Sniffed("manual", "markdown")
    if suffix not in _CODE_SUFFIXES and _is_table(lines, suffix in {".csv", ".tsv"}):
        return Sniffed("workorder", "csv")
    if suffix in _TEXT_SUFFIXES and re.search(r"[A-Za-z\u4e00-\u9fff]{2}", text):
        return Sniffed("manual", "text")
    what = f"'{suffix}' file" if suffix else "file without a suffix"
    return _skip(f"{what} that is no work-order table, alarm log or manual")
