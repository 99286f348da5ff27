"""Manuals (PDF, HTML, Markdown, plain text) → blocks → sections with heading paths →
pretraining chunks.

Each format has its parser (`pdf`, `html`, `markdown`, `text` beside this module) giving the
document's blocks (`schemas.documents.DOCUMENT_BLOCK_SCHEMA`); sections are cut from them at
headings (`blocks.sections_from_blocks`), so every block belongs to exactly one section (the
blocks before the first heading are a section with an empty heading path). Sections are kept
even when their body is empty (a parent heading): their heading lives on in the paths of their
children and chunking skips them. A PDF page without a text layer (a scan) is rejected with
reason `no_text_layer`; a document without any text (an HTML page of scripts only) with reason
`no_text`; `read` = sections + such rejects. A PDF that is damaged or encrypted raises
`ManualError`.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import polars as pl
import xxhash

from pipeline.core.stage import StageResult, empty_rejects, make_rejects, stage_result
from pipeline.ingest.documents.blocks import (
    Block,
    Document,
    block_frame,
    sections_from_blocks,
)
from pipeline.ingest.documents.html import html_blocks
from pipeline.ingest.documents.markdown import markdown_blocks
from pipeline.ingest.documents.pdf import pdf_blocks
from pipeline.ingest.documents.text import text_blocks
from pipeline.ingest.encoding import read_text
from pipeline.ingest.files import relative_path
from pipeline.ingest.lineage import record_ids
from schemas.manuals import (
    PRETRAIN_CHUNK_SCHEMA,
    ChunkConfig,
    ManualSource,
)

STAGE = "ingest_manuals"
SOURCE_KIND = "manual"

_FAMILIES = {
    "FANUC": re.compile(r"FANUC|发那科", re.I),
    "SINUMERIK": re.compile(r"SINUMERIK|西门子", re.I),
    "MAZAK": re.compile(r"MAZAK|MAZATROL|马扎克", re.I),
    "HEIDENHAIN": re.compile(r"HEIDENHAIN|海德汉", re.I),
    "MITSUBISHI": re.compile(r"MITSUBISHI|三菱", re.I),
    "HAAS": re.compile(r"\bHAAS\b", re.I),
}


def _family(text: str, source: ManualSource) -> str | None:
    if source.family:
        return source.family
    hits = Counter({name: len(rx.findall(text)) for name, rx in _FAMILIES.items()})
    name, count = hits.most_common(1)[0]
    return name if count else None


def _parse(path: Path, source: ManualSource, max_pdf_pages: int | None) -> Document:
    """The file's blocks by its format (a text format: the decoded text's lines counted)."""
    if source.format == "pdf":
        return pdf_blocks(path, max_pdf_pages)
    text, _ = read_text(path, source.encoding)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    parsers = {"markdown": markdown_blocks, "html": html_blocks}
    found: list[Block] = (
        parsers[source.format](text) if source.format in parsers else text_blocks(lines)
    )
    return Document(blocks=found, lines=len(lines))


def read_manual(
    path: str | Path,
    source: ManualSource,
    root: str | Path | None = None,
    max_pdf_pages: int | None = None,
) -> StageResult:
    """One manual → sections (MANUAL_SECTION_SCHEMA), its blocks in `state["blocks"]`
    (DOCUMENT_BLOCK_SCHEMA); textless PDF pages and documents are rejected; a PDF of more
    than `max_pdf_pages` pages raises `TooManyPagesError` (None: no limit)."""
    path = Path(path)
    rel = relative_path(path, root)
    document = _parse(path, source, max_pdf_pages)
    blocks = block_frame(document.blocks, rel)
    kept = sections_from_blocks(blocks, _family("\n".join(blocks["text"]), source))
    rejected = empty_rejects()
    if document.textless:
        rejected = _textless_pages(document.textless, rel)
    elif not document.blocks:
        rejected = _no_text(rel)
    result = stage_result(
        kept,
        rejected,
        read=kept.height + rejected.height,
        lines_total=document.lines,
        pages=document.pages,
    )
    return StageResult(result.kept, result.rejected, result.counters, {"blocks": blocks})


def _no_text(rel: str) -> pl.DataFrame:
    """A `no_text` reject for a document that holds no text at all."""
    row = pl.DataFrame({"source_row": [1]}, schema={"source_row": pl.Int64})
    row = row.with_columns(
        record_ids(SOURCE_KIND, rel, row["source_row"], pl.Series(["<no text>"])),
        source_kind=pl.lit(SOURCE_KIND),
        source_file=pl.lit(rel),
    )
    return make_rejects(row, STAGE, "no_text", pl.lit(f"{rel}: no text in the document"))


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
