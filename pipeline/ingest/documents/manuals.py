"""Manuals (Markdown, plain text, PDF) → sections with heading paths → pretraining chunks.

Every line of a document belongs to exactly one section (the text before the first heading is
a section with an empty heading path), so `lines_total` of a file is covered by its sections.
Sections are kept even when their body is empty (a parent heading): their heading lives on in
the paths of their children and chunking skips them. A PDF page without a text layer (a scan)
is rejected with reason `no_text_layer`; `read` = sections + such pages.

Headings: Markdown `#`..`######` outside code fences; in text and PDF, numbered headings
(`3`, `3.2`, `3.2.1` + a short title without closing punctuation), `第N章/节`, `一、` and, for a
PDF with an outline (bookmarks), the outline titles at their outline depth.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pypdf
import xxhash

from pipeline.core.errors import InputFileError
from pipeline.core.stage import StageResult, empty_rejects, make_rejects, stage_result
from pipeline.ingest.encoding import read_text
from pipeline.ingest.files import relative_path
from pipeline.ingest.lineage import record_ids
from schemas.manuals import (
    MANUAL_SECTION_SCHEMA,
    PRETRAIN_CHUNK_SCHEMA,
    ChunkConfig,
    ManualSource,
)

STAGE = "ingest_manuals"


class ManualError(InputFileError, ValueError):
    """A manual that cannot be read at all; the message names the file."""


SOURCE_KIND = "manual"

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_NUMBERED = re.compile(r"^(\d{1,2}(?:\.\d{1,2}){0,4})\s+(\S.{0,48})$")
_CHAPTER = re.compile(r"^第\s*([0-9一二三四五六七八九十百]+)\s*([章节])\s*(.{0,40})$")
_CN_ORDINAL = re.compile(r"^([一二三四五六七八九十]{1,3})、\s*(\S.{0,30})$")
_CLOSING = tuple("。．.，,；;：:！!？?")
_FAMILIES = {
    "FANUC": re.compile(r"FANUC|发那科", re.I),
    "SINUMERIK": re.compile(r"SINUMERIK|西门子", re.I),
    "MAZAK": re.compile(r"MAZAK|MAZATROL|马扎克", re.I),
    "HEIDENHAIN": re.compile(r"HEIDENHAIN|海德汉", re.I),
    "MITSUBISHI": re.compile(r"MITSUBISHI|三菱", re.I),
    "HAAS": re.compile(r"\bHAAS\b", re.I),
}


@dataclass
class _Section:
    path: list[str]
    level: int
    row: int
    page: int | None
    lines: list[str] = field(default_factory=list)


def _text_heading(line: str, outline: dict[str, int]) -> tuple[int, str] | None:
    """(level, title) when a text/PDF line is a heading."""
    stripped = " ".join(line.split())
    if not stripped:
        return None
    if outline:
        return (outline[stripped], stripped) if stripped in outline else None
    if stripped.endswith(_CLOSING) or len(stripped) > 60:
        return None
    if m := _NUMBERED.match(stripped):
        return m.group(1).count(".") + 1, stripped
    if m := _CHAPTER.match(stripped):
        return (1 if m.group(2) == "章" else 2), stripped
    if m := _CN_ORDINAL.match(stripped):
        return 1, stripped
    return None


def _body_row(section: _Section) -> int:
    """Line number of the first non-blank body line (the heading's own line when none)."""
    offset = 0 if section.level == 0 else 1
    for i, line in enumerate(section.lines):
        if line.strip():
            return section.row + offset + i
    return section.row


def _markdown_heading(line: str) -> tuple[int, str] | None:
    m = _MD_HEADING.match(line)
    return (len(m.group(1)), m.group(2)) if m else None


def _sections(
    lines: list[tuple[str, int | None]], fmt: str, outline: dict[str, int]
) -> list[_Section]:
    """Split (line, page) pairs into sections with heading paths."""
    sections = [_Section(path=[], level=0, row=1, page=lines[0][1] if lines else None)]
    stack: list[tuple[int, str]] = []
    fenced = False
    for row, (line, page) in enumerate(lines, start=1):
        heading = None
        if fmt == "markdown":
            if _FENCE.match(line):
                fenced = not fenced
            elif not fenced:
                heading = _markdown_heading(line)
        else:
            heading = _text_heading(line, outline)
        if heading is None:
            sections[-1].lines.append(line)
            continue
        level, title = heading
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        sections.append(_Section([t for _, t in stack], level, row, page))
    if len(sections) > 1 and not "".join(sections[0].lines).strip():
        sections = sections[1:]  # nothing but blank lines before the first heading
    return sections


def _pdf_lines(data: bytes, path: Path) -> tuple[list[tuple[str, int]], list[int], dict, int]:
    """Lines with their page, pages without text, outline titles → depth, page count."""
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
        outline: dict[str, int] = {}

        def walk(items: list, depth: int) -> None:
            for item in items:
                if isinstance(item, list):
                    walk(item, depth + 1)
                else:
                    outline.setdefault(" ".join(str(item.title).split()), depth)

        walk(reader.outline, 1)
    except Exception as exc:  # noqa: BLE001 - pypdf raises many types on a broken file
        raise ManualError(f"{path}: not a readable PDF: {type(exc).__name__}: {exc}") from None
    lines = [(line, number) for number, text in enumerate(pages, 1) for line in text.splitlines()]
    empty = [number for number, text in enumerate(pages, 1) if not text.strip()]
    return lines, empty, outline, len(pages)


def _family(text: str, source: ManualSource) -> str | None:
    if source.family:
        return source.family
    hits = Counter({name: len(rx.findall(text)) for name, rx in _FAMILIES.items()})
    name, count = hits.most_common(1)[0]
    return name if count else None


def read_manual(
    path: str | Path, source: ManualSource, root: str | Path | None = None
) -> StageResult:
    """One manual → sections (MANUAL_SECTION_SCHEMA); textless PDF pages are rejected."""
    path = Path(path)
    rel = relative_path(path, root)
    empty_pages: list[int] = []
    outline: dict[str, int] = {}
    n_pages = 0
    if source.format == "pdf":
        lines, empty_pages, outline, n_pages = _pdf_lines(path.read_bytes(), path)
    else:
        lines = _text_lines(path, source)
    family = _family("\n".join(line for line, _ in lines), source)
    frame = _section_frame(_sections(lines, source.format, outline))
    raw = frame.select(
        pl.concat_str(pl.col("heading_path").list.join(" > "), pl.col("text"), separator="\n")
    ).to_series()
    kept = frame.with_columns(
        record_ids(SOURCE_KIND, rel, frame["source_row"], raw),
        source_kind=pl.lit(SOURCE_KIND),
        source_file=pl.lit(rel),
        family=pl.lit(family, dtype=pl.String),
    ).select([pl.col(c).cast(t) for c, t in MANUAL_SECTION_SCHEMA.items()])
    rejected = _textless_pages(empty_pages, rel) if empty_pages else empty_rejects()
    return stage_result(
        kept, rejected, read=kept.height + rejected.height, lines_total=len(lines), pages=n_pages
    )


def _text_lines(path: Path, source: ManualSource) -> list[tuple[str, int | None]]:
    """A Markdown or text manual's lines (no page), decoded, line ends dropped."""
    text, _ = read_text(path, source.encoding)
    lines: list[tuple[str, int | None]] = [
        (line.removesuffix("\r"), None) for line in text.split("\n")
    ]
    if lines and lines[-1][0] == "":
        lines.pop()
    return lines


def _section_frame(sections: list[_Section]) -> pl.DataFrame:
    """One row per section: its line, heading path and level, body text, first body line
    and page."""
    return pl.DataFrame(
        {
            "source_row": [s.row for s in sections],
            "heading_path": [s.path for s in sections],
            "level": [s.level for s in sections],
            "text": ["\n".join(s.lines).strip() for s in sections],
            "body_row": [_body_row(s) for s in sections],
            "page": [s.page for s in sections],
        },
        schema={
            k: MANUAL_SECTION_SCHEMA[k]
            for k in ("source_row", "heading_path", "level", "text", "body_row", "page")
        },
    )


def _textless_pages(empty_pages: list[int], rel: str) -> pl.DataFrame:
    """A `no_text_layer` reject for each PDF page without text (a scan)."""
    pages = pl.DataFrame({"page": empty_pages}, schema={"page": pl.Int32})
    pages = pages.with_columns(
        record_ids(
            SOURCE_KIND,
            rel,
            pages["page"],
            pages.select(pl.format("<page {} without text>", "page")).to_series(),
        ),
        source_kind=pl.lit(SOURCE_KIND),
        source_file=pl.lit(rel),
    )
    return make_rejects(
        pages,
        STAGE,
        "no_text_layer",
        pl.format("{}: page {} has no text layer (scanned?)", pl.lit(rel), pl.col("page")),
    )


_PROVENANCE_NAME = re.compile(
    r"^(?:readme|source|sources|license|licence|copying|notice|authors|contributors|"
    r"contributing|changelog|changes|history|citation|code_of_conduct)(?:[._-].*)?$",
    re.I,
)
_PROVENANCE_TEXT = re.compile(
    r"(?im)^\s*(?:#+\s*)?(?:license|licence|许可证?|版权)\s*$|permission is hereby granted|"
    r"licensed under|creative commons|spdx-license-identifier|gnu general public license|"
    r"origin repository|copied unchanged|sha-?256\s*[:：]|^\s*-?\s*commit\b"
)


def is_manual_text(path: str | Path, text: str) -> bool:
    """False for a readme, licence or provenance note (SOURCE.md beside a vendor table): by
    its file name, or by holding at least two distinct licence/provenance markers."""
    if _PROVENANCE_NAME.match(Path(path).stem + Path(path).suffix.replace(".", "_", 1)):
        return False
    markers = {m.group(0).strip().lower()[:12] for m in _PROVENANCE_TEXT.finditer(text[:20000])}
    return len(markers) < 2


def _pieces(text: str, limit: int) -> list[str]:
    """Split an oversized body at paragraphs, then sentence ends, then hard, each ≤ limit."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        while len(para) > limit:
            window = para[:limit]
            cut = max(window.rfind(c) for c in "。！？.!?\n；;")
            cut = cut + 1 if cut >= limit // 3 else limit
            out.append(para[:cut].strip())
            para = para[cut:].strip()
        if para:
            out.append(para)
    packed: list[str] = []
    for piece in out:
        if packed and len(packed[-1]) + 2 + len(piece) <= limit:
            packed[-1] += "\n\n" + piece
        else:
            packed.append(piece)
    return packed


def chunk_sections(sections: pl.DataFrame, cfg: ChunkConfig | None = None) -> StageResult:
    """Sections → pretraining chunks that break only at section boundaries unless a section
    alone exceeds `max_chars` (then at paragraphs, sentences, or hard).

    Each section contributes `heading path\\n\\nbody`; with `merge_small_sections` consecutive
    sections of one file are packed while they fit. Counters: `sections`, `empty_sections`
    (no body, not chunked), `split_sections`, `chunks` (= read = kept).
    """
    cfg = cfg or ChunkConfig()
    rows, empty, split = _pack(sections, cfg)
    chunks = _chunk_frame(rows)
    noise = _is_noise(pl.col("text"))
    rejected = make_rejects(
        chunks.filter(noise),
        "chunks",
        "noise_text",
        pl.concat_str(
            pl.col("source_file"),
            pl.lit(":"),
            pl.col("source_row").cast(pl.String),
            pl.lit(": not prose (too few words); not pretraining text"),
        ),
    )
    kept = chunks.filter(~noise)
    return stage_result(
        kept,
        rejected,
        read=chunks.height,
        sections=sections.height,
        empty_sections=empty,
        split_sections=split,
        chunks=kept.height,
    )


def _pack(sections: pl.DataFrame, cfg: ChunkConfig) -> tuple[list[dict], int, int]:
    """Chunk rows (file, first section's line and heading path, section ids, text) in file
    and line order; and the number of empty and of split sections. A whole section joins the
    chunk before it when `merge_small_sections`, same file and it fits; a piece of a split
    section never does, nor does anything join one."""
    rows: list[dict] = []
    split = empty = 0
    current: dict | None = None
    for s in sections.sort("source_file", "source_row").iter_rows(named=True):
        body = (s["text"] or "").strip()
        if not body:
            empty += 1
            continue
        pieces, was_split = _section_pieces(s["heading_path"], body, cfg.max_chars)
        split += int(was_split)
        for piece in pieces:
            fits = (
                cfg.merge_small_sections
                and current is not None
                and current["source_file"] == s["source_file"]
                and len(current["text"]) + 2 + len(piece) <= cfg.max_chars
                and len(pieces) == 1
            )
            if fits:
                current["text"] += "\n\n" + piece
                current["section_ids"].append(s["record_id"])
                continue
            current = {
                "source_file": s["source_file"],
                "source_row": s["source_row"],
                "heading_path": s["heading_path"],
                "section_ids": [s["record_id"]],
                "text": piece,
            }
            rows.append(current)
            if len(pieces) > 1:
                current = None  # never pack onto a piece of a split section
    return rows, empty, split


def _section_pieces(heading_path: list[str], body: str, max_chars: int) -> tuple[list[str], bool]:
    """`heading path\\n\\nbody` when it fits in `max_chars`; else the body split (see
    `_pieces`), each piece under the heading path when that is short; and whether split."""
    title = " > ".join(heading_path)
    block = f"{title}\n\n{body}" if title else body
    if len(block) <= max_chars:
        return [block], False
    head = f"{title}\n\n" if title and len(title) < max_chars // 4 else ""
    return [head + p for p in _pieces(body, max_chars - len(head))], True


def _chunk_frame(rows: list[dict]) -> pl.DataFrame:
    """Chunk rows → PRETRAIN_CHUNK_SCHEMA, with a record id from file, line and text."""
    chunks = pl.DataFrame(
        rows,
        schema={
            k: PRETRAIN_CHUNK_SCHEMA[k]
            for k in ("source_file", "source_row", "heading_path", "section_ids", "text")
        },
    )
    ids = [
        xxhash.xxh3_64_hexdigest(f"pretrain\x1f{f}\x1f{r}\x1f{t}".encode())
        for f, r, t in chunks.select("source_file", "source_row", "text").iter_rows()
    ]
    return chunks.with_columns(
        pl.Series("record_id", ids, dtype=pl.String),
        source_kind=pl.lit(SOURCE_KIND),
        n_chars=pl.col("text").str.len_chars(),
    ).select([pl.col(c).cast(t) for c, t in PRETRAIN_CHUNK_SCHEMA.items()])


# A word, a number or measurement, or a code/part number, with surrounding punctuation.
_WORDLIKE = (
    r"^[(\[{\"'“‘<]*(?:[A-Za-z][a-z]*(?:[-'’][A-Za-z]+)*|[\d.,:%/+-]+[A-Za-z]{0,3}"
    r"|[A-Z0-9]{1,8}(?:[-./][A-Z0-9]+)*)[)\]}\"'”’>,.;:!?]*$"
)


def _is_noise(text: pl.Expr) -> pl.Expr:
    """Text with no Han characters in which fewer than half the tokens are words, numbers or
    codes: random bytes or keyboard noise saved as a manual."""
    tokens = (
        text.str.replace_all(r"\s+", " ")
        .str.split(" ")
        .list.eval(pl.element().str.strip_chars().filter(pl.element().str.strip_chars() != ""))
    )
    words = tokens.list.eval(pl.element().str.contains(_WORDLIKE).cast(pl.Int32)).list.sum()
    share = words / tokens.list.len().clip(lower_bound=1)
    return ~text.str.contains(r"\p{Han}") & (share < 0.5)
