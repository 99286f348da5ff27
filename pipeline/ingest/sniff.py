"""What an input file is, from its first kilobytes: a work-order table, an alarm log (and its
layout), a manual, or a file to skip (and why).

Order: notes by name (README, LICENSE, CHANGELOG, SOURCE, ...) are skipped; binary signatures
decide PDF manuals, XLSX work orders (or vendor fault tables) and the archives and legacy
Office files we do not read; text is decoded (configured encoding, else detected), skipped
when it is a licence, and tried as an alarm log of each known layout, then as an HTML
document (by its first markup), a vendor fault-code table (`pipeline.kb.vendor_tables`: a
code column beside message / cause / remedy columns and no work-order signal, in any table
layout, YAML or an alarm-message text), JSON / JSONL records (a JSON object of settings is
configuration), text that is not corpus text (`pipeline.ingest.non_corpus`: changelogs,
source code and NC programs, configuration), a Markdown document, a delimited table (work
orders), a log dump, and plain text (a manual). The file's suffix only breaks ties: a `.log`
or `.shdr` file in no known layout is skipped rather than read as a manual, configuration
and source-code files are skipped, and so are unknown suffixes holding no table. Every skip
reason starts with its code: `readme`, `licence`, `changelog`, `source_code`,
`configuration`, `log_dump`, `other_format`.

One rule tells a skipped file from a broken one. A file is *skipped* (with a reason) when it
is not something we read: notes, other formats, text that is none of the kinds. It is
*broken* (and quarantined by the run, which `--strict` turns into a failure) when its suffix
names a format we read but its bytes are empty, binary or a damaged archive: an export that
went wrong must not pass as a file that was never meant as input.
"""

from __future__ import annotations

import csv
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from pipeline.ingest.alarm_logs.layouts import LAYOUTS, detect_layout
from pipeline.ingest.encoding import (
    EncodingError,
    detect_encoding,
    undecodable_lines,
    utf16_without_bom,
)
from pipeline.ingest.non_corpus import is_json_configuration, is_licence, is_log_dump, what_text
from pipeline.kb.vendor_tables import fault_table_layout, is_fault_workbook

HEAD_BYTES = 65536
_NOTES = (
    ("licence", "licence", r"licen[cs]e|copying|notice|third[-_]party[-_]notices"),
    ("changelog", "changelog", r"changelog|changes|release[-_]?notes"),
    ("readme", "readme or source-notes", r"readme|read_me|source|sources|authors|contributing|"
     r"attribution|citation"),
)  # fmt: skip
# An HTML document by its first markup (a BOM, blanks, an XML declaration or comments before).
_HTML = re.compile(
    r"(?is)^\ufeff?\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*"
    r"<(?:!doctype\s+html|html|head|body|table|h[1-6]|div|p)[\s>]"
)
_LOG_SUFFIXES = {".log", ".shdr", ".alm", ".his"}
_TEXT_SUFFIXES = {".txt", ".text", ".md", ".markdown", ""}
_TABLE_SUFFIXES = {".csv", ".tsv", ".txt", ".json", ".jsonl", ".ndjson", ".dat", ""}
# Text that is neither a table nor prose even where it has commas: configuration and code.
_SOURCE_SUFFIXES = {
    ".py", ".js", ".sh", ".bat", ".ps1", ".sql", ".r", ".c", ".h", ".cpp", ".java", ".ipynb",
    ".nc", ".mpf", ".spf", ".ngc", ".tap", ".cnc", ".eia",
}  # fmt: skip
_CONFIG_SUFFIXES = {".toml", ".yaml", ".yml", ".ini", ".cfg", ".conf", ".env", ".properties"}
_CODE_SUFFIXES = _SOURCE_SUFFIXES | _CONFIG_SUFFIXES | {".xml", ".html", ".htm"}

# Suffixes never read as a vendor fault table (YAML is: a fault table or else configuration).
_NOT_FAULT_TABLES = (_CODE_SUFFIXES - {".yaml", ".yml"}) | {".md", ".markdown"}

# The kinds a broken file of each input suffix may have been meant as (the run's folders choose).
_BROKEN_KINDS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        (".csv", ".tsv", ".xlsx", ".xlsm", ".json", ".jsonl", ".ndjson"), ("workorder",)
    ),
    **dict.fromkeys((".pdf", ".md", ".markdown"), ("manual",)),
    **dict.fromkeys(tuple(_LOG_SUFFIXES), ("alarm_log",)),
    **dict.fromkeys((".txt", ".text", ".dat"), ("alarm_log", "manual", "workorder")),
}


@dataclass(frozen=True)
class Sniffed:
    """`kind`: workorder, alarm_log, manual, fault_table, skip or broken; `layout`: the reader's
    format (csv, xlsx, json, jsonl; one of the alarm-log layouts; markdown, text, pdf, html; a
    fault table's csv, xlsx, json, jsonl, yaml or text); `reason`: why skipped or broken;
    `meant`: for a broken file, the kinds its suffix stands for."""

    kind: str
    layout: str | None = None
    reason: str | None = None
    meant: tuple[str, ...] = ()

    @property
    def reader(self) -> str:
        return f"{self.kind}:{self.layout}" if self.layout else self.kind


def _skip(reason: str) -> Sniffed:
    return Sniffed("skip", reason=reason)


def _unreadable(reason: str, suffix: str, expect: str | None) -> Sniffed:
    """Broken when the suffix names a format we read (see the module note), else skipped."""
    meant = _BROKEN_KINDS.get(suffix)
    if not meant:
        return _skip(reason)
    return Sniffed("broken", reason=reason, meant=(expect,) if expect in meant else meant)


def _wide(head: bytes, encoding: str) -> bool:
    """Whether NUL bytes in the head are UTF-16 or UTF-32 text: a byte-order mark, such a
    codec configured, or BOM-less UTF-16 (`utf16_without_bom`)."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True
    if encoding != "auto":
        return encoding.lower().replace("_", "-").startswith(("utf-16", "utf-32", "utf16", "utf32"))
    return utf16_without_bom(head) is not None


def _decode(head: bytes, encoding: str, path: Path) -> str | None:
    """The head as text (a multi-byte character cut at its end is dropped); None if binary."""
    if b"\x00" in head and not _wide(head, encoding):
        return None
    for cut in range(4):
        part = head[: len(head) - cut] if cut else head
        if encoding == "auto" and undecodable_lines(part) is not None:
            return part.decode("utf-8", "replace")  # a UTF-8 file with a few lines pasted in
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
    fields (80% of the rows of the header's width), or in a `.csv`/`.tsv` file (`declared`)
    a header of two and any row of its width (the reader rejects the others by line).
    Lines are split one by one: an unbalanced quote does not hide the rows after it."""
    sample = [line for line in lines if line.strip()][:30]
    if len(sample) < (1 if declared else 3):
        return False
    for delimiter in (",", ";", "\t", "|"):
        widths = [len(next(csv.reader([line], delimiter=delimiter), [])) for line in sample]
        header = widths[0]
        matching = sum(w == header for w in widths)
        if declared:
            if header >= 2 and (matching >= 2 or len(widths) == 1):
                return True
        elif header >= 3 and matching >= 0.8 * len(widths):
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
    for code, what, names in _NOTES:
        if re.match(rf"(?i)^(?:{names})(?:[._-].*)?$", path.name):
            return _skip(f"{code}: {what} file (by its name): not corpus text")
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
        complete = not fh.read(1)
    if not head.strip():
        return _unreadable("empty file", suffix, expect)
    signed = _by_signature(head, path, suffix, expect)
    if signed is not None:
        return signed
    text = _decode(head, encoding, path)
    if text is None:
        return _unreadable("binary content: not a table, alarm log or manual", suffix, expect)
    return _by_text(text, complete, path.name, suffix, expect)


def _by_signature(head: bytes, path: Path, suffix: str, expect: str | None) -> Sniffed | None:
    """A PDF, a zip archive (an XLSX workbook or not) or a legacy Office file; None for
    anything else."""
    if head.startswith(b"%PDF-"):
        return Sniffed("manual", "pdf")
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except zipfile.BadZipFile:
            return _unreadable("damaged zip archive", suffix, expect)
        if any(n.startswith("xl/") for n in names):
            return Sniffed("fault_table" if is_fault_workbook(path) else "workorder", "xlsx")
        if suffix in {".xlsx", ".xlsm"}:
            return _unreadable("zip archive holding no workbook (no xl/ part)", suffix, expect)
        return _skip("zip archive (not an .xlsx workbook): unpack it into the input folder")
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        return _skip("legacy Office binary (.xls/.doc): save it as .xlsx or text")
    return None


def _by_text(text: str, complete: bool, name: str, suffix: str, expect: str | None) -> Sniffed:
    """Licence text, an alarm log of a known layout, else (outside alarm-log files and
    folders) a document kind; `complete`: `text` is the whole file."""
    lines = re.split(r"\r\n|\r|\n", text)
    if not complete and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    if is_licence(text):
        return _skip("licence: licence text: not corpus text")
    layout = detect_layout(lines[:400], name)
    if layout:
        return Sniffed("alarm_log", layout)
    if suffix in _LOG_SUFFIXES or expect == "alarm_log":
        first = next((line.strip() for line in lines if line.strip()), "")[:80]
        layouts = ", ".join(LAYOUTS)
        return _skip(f"log_dump: no known alarm-log layout ({layouts}); first line: {first!r}")
    return _document_kind(text, lines, complete, suffix, expect)


def _document_kind(
    text: str, lines: list[str], complete: bool, suffix: str, expect: str | None
) -> Sniffed:
    """An HTML document, a vendor fault table (any table layout, YAML, an alarm-message text),
    JSON records or a delimited table (work orders), Markdown or prose (a manual), or a file
    to skip. Changelogs, code and NC programs are told first (NC block numbers look like
    alarm codes); settings only after the fault tables (a YAML or JSON fault table has keys
    and values too)."""
    if suffix not in {".md", ".markdown"} and _HTML.match(text[:2048]):
        return Sniffed("manual", "html")
    is_json = text.lstrip()[:1] in "[{"
    found = None if is_json else what_text(text, lines)
    if found is not None and found[0] != "configuration":
        return _skip(f"{found[0]}: {found[1]}: not corpus text")
    if suffix not in _NOT_FAULT_TABLES:
        layout = fault_table_layout(text, complete, suffix)
        if layout:
            return Sniffed("fault_table", layout)
    if is_json and suffix in _TABLE_SUFFIXES:
        return _json_records(text, complete, suffix, expect)
    if found is not None:
        return _skip(f"{found[0]}: {found[1]}: not corpus text")
    return _text_kind(text, lines, suffix)


def _json_records(text: str, complete: bool, suffix: str, expect: str | None) -> Sniffed:
    """JSON work orders; outside a work-order folder a JSON object of settings is skipped (in
    one, an export that returned an error object goes to its reader and is quarantined)."""
    if complete and expect != "workorder" and is_json_configuration(text):
        return _skip("configuration: a JSON object of settings, no records")
    # JSON that does not parse goes to its reader all the same: it names the line
    lines_kind = "jsonl" if suffix in {".jsonl", ".ndjson"} else "json"
    return Sniffed("workorder", _json_kind(text, complete) or lines_kind)


def _text_kind(text: str, lines: list[str], suffix: str) -> Sniffed:
    """Markdown or prose (a manual), a delimited table (work orders), or a file to skip."""
    if suffix in {".md", ".markdown"}:
        return Sniffed("manual", "markdown")
    if suffix in _TEXT_SUFFIXES and _is_markdown(lines[:400]):
        return Sniffed("manual", "markdown")
    if suffix not in _CODE_SUFFIXES and _is_table(lines, suffix in {".csv", ".tsv"}):
        return Sniffed("workorder", "csv")
    if is_log_dump([line for line in lines[:400] if line.strip()]):
        return _skip("log_dump: timestamped log lines in no known alarm-log layout")
    if suffix in _TEXT_SUFFIXES and re.search(r"[A-Za-z\u4e00-\u9fff]{2}", text):
        return Sniffed("manual", "text")
    what = f"'{suffix}' file" if suffix else "file without a suffix"
    code = (
        "source_code"
        if suffix in _SOURCE_SUFFIXES
        else "configuration"
        if suffix in _CONFIG_SUFFIXES
        else "other_format"
    )
    return _skip(f"{code}: {what} that is no work-order table, alarm log or manual")
