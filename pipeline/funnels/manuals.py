"""The manual funnel, declared in `FUNNEL`:

parse    per file: sections (pages without text rejected; a readme, licence or provenance
         note rejected whole as `not_manual_text`; a PDF of more than `max_pdf_pages` pages
         quarantined unread as `too_many_pages`)
funnel   over the run, on parsed and carried sections:
         sections -> chunks (pretraining text, tokens counted) -> redact (PII)
         blocks   -> fault entries -+
         fault-table files ---------+-> fault-code knowledge base -> redact (PII)
         (configured `vendor_tables` mappings, else read with zero configuration)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from pipeline.core.stage import Stage, StageResult, empty_rejects, make_rejects, stage_result
from pipeline.execution.step import Carried, Funnel, Out, Step
from pipeline.funnels.incremental import carried_rows
from pipeline.ingest.documents.manuals import STAGE as PARSE_STAGE
from pipeline.ingest.documents.manuals import chunk_sections, is_manual_text, read_manual
from pipeline.ingest.encoding import resolved_encoding
from pipeline.ingest.files import relative_path, sha256_bytes, sha256_file
from pipeline.kb.extract import extract_fault_tables
from pipeline.kb.fault_codes import merge_knowledge_base
from pipeline.kb.vendor_tables import read_fault_tables
from pipeline.publish.ledger import ledger_row
from pipeline.stages.tokens import count_tokens
from pipeline.text.pii import count_placeholders, redact_pii
from schemas.config import PipelineConfig
from schemas.documents import DOCUMENT_BLOCK_SCHEMA
from schemas.manuals import MANUAL_SECTION_SCHEMA, ManualSource
from schemas.records import LINEAGE_SCHEMA

if TYPE_CHECKING:
    from pipeline.funnels.driver import FunnelRun
    from pipeline.publish.snapshot import SourceRun

KIND = "manual"
_SECTIONS = tuple(MANUAL_SECTION_SCHEMA)


def _chunk(sections: pl.DataFrame, cfg: PipelineConfig) -> StageResult:
    chunks = chunk_sections(sections, cfg.manuals.chunks)
    pretrain = count_tokens(chunks.kept, cfg.tokens, column="text")
    return StageResult(pretrain, chunks.rejected, chunks.counters)


CHUNK = Stage("chunks", needs=_SECTIONS, adds=("n_tokens",), fn=_chunk)
FAULT_TABLES = Stage(
    "fault_tables",
    needs=tuple(DOCUMENT_BLOCK_SCHEMA),
    adds=(),
    fn=extract_fault_tables,
)


def _redact(frame: pl.DataFrame, cfg: PipelineConfig) -> StageResult:
    """Phone numbers, e-mail, ID numbers, cued person and configured customer names ->
    placeholders, in every text
    column but the lineage (strings and lists of strings). Counter `pii_redacted`: how many
    placeholders were added."""
    text = [c for c, t in frame.schema.items() if t == pl.String and c not in LINEAGE_SCHEMA]
    lists = [c for c, t in frame.schema.items() if t == pl.List(pl.String) and c != "section_ids"]
    customers = cfg.normalize.customer_names
    redacted = frame.with_columns(
        *[redact_pii(pl.col(c), customers=customers) for c in text],
        *[pl.col(c).list.eval(redact_pii(pl.element(), customers=customers)) for c in lists],
    )
    added = _placeholders(redacted, text, lists) - _placeholders(frame, text, lists)
    return stage_result(redacted, empty_rejects(), frame.height, pii_redacted=added)


def _placeholders(frame: pl.DataFrame, text: list[str], lists: list[str]) -> int:
    counts = [count_placeholders(pl.col(c)) for c in text] + [
        count_placeholders(pl.col(c).list.join("\n")) for c in lists
    ]
    return int(frame.select(pl.sum_horizontal(counts).sum()).item()) if counts else 0


REDACT = Stage("redact", needs=("record_id",), adds=(), fn=_redact)


def parse(
    path: Path, source: ManualSource, root: Path, max_pdf_pages: int | None = None
) -> dict[str, StageResult]:
    """One manual -> sections (`parse`, its state the file's ledger row) and its document
    blocks (`blocks`); a PDF of more than `max_pdf_pages` pages raises (quarantined)."""
    result = read_manual(path, source, root, max_pdf_pages)
    blocks = result.state["blocks"]
    data = path.read_bytes()
    if source.format != "pdf" and not is_manual_text(path, "\n".join(result.kept["text"])):
        result, blocks = _not_manual_text(result), blocks.clear()
    encoding = (
        "binary" if source.format == "pdf" else resolved_encoding(data, source.encoding, path)
    )
    ledger = ledger_row(
        relative_path(path, root),
        KIND,
        len(data),
        sha256_bytes(data),
        encoding,
        rows=result.counters["read"],
        lines=result.counters["lines_total"],
        reader=f"{KIND}:{source.format}",
    )
    return {
        "parse": StageResult(result.kept, result.rejected, result.counters, {"ledger": ledger}),
        "blocks": StageResult(blocks, empty_rejects(), {"blocks": blocks.height}),
    }


def _not_manual_text(result: StageResult) -> StageResult:
    """Every section of a readme/licence/provenance file, rejected; its counters kept."""
    rejected = make_rejects(
        result.kept,
        PARSE_STAGE,
        "not_manual_text",
        pl.format("{}: readme, licence or provenance note, not manual text", "source_file"),
    )
    extra = {k: v for k, v in result.counters.items() if not k.startswith(("read", "kept", "rej"))}
    return stage_result(
        result.kept.clear(),
        pl.concat([result.rejected, rejected]),
        result.counters["read"],
        **extra,
    )


def _pii(redacted: StageResult) -> dict[str, int]:
    return {"pii_redacted": redacted.counters["pii_redacted"]}


def funnel(
    sections: pl.DataFrame,
    blocks: pl.DataFrame,
    vendor_root: Path,
    cfg: PipelineConfig,
    fault_tables: Sequence[Sequence[str]] = (),
) -> dict[str, StageResult]:
    """Pretraining chunks from every manual's sections; the fault-code knowledge base from
    every manual's blocks and every fault-table file (path, layout): configured mapping or
    zero configuration."""
    chunks = CHUNK.run(sections, cfg)
    tables = FAULT_TABLES.run(blocks, cfg)
    files = [(Path(path), layout) for path, layout in fault_tables]
    vendor = read_fault_tables(files, vendor_root, cfg.manuals)
    knowledge_base = merge_knowledge_base(tables.kept, vendor.kept)
    pretrain_pii = REDACT.run(chunks.kept, cfg)
    chunks = StageResult(
        pretrain_pii.kept, chunks.rejected, {**chunks.counters, **_pii(pretrain_pii)}
    )
    kb_pii = REDACT.run(knowledge_base.kept, cfg)
    knowledge_base = StageResult(
        kb_pii.kept, knowledge_base.rejected, {**knowledge_base.counters, **_pii(kb_pii)}
    )
    return {
        "chunks": chunks,
        "fault_tables": tables,
        "vendor_tables": vendor,
        "fault_codes": knowledge_base,
    }


def vendor_tables(run: FunnelRun) -> list[tuple[Path, str]]:
    """The vendor fault tables among the inputs, configured or sniffed, with their layout
    (read by the funnel step)."""
    return [
        (e.path, e.sniffed.layout or "vendor_table")
        for e in run.ctx.inventory
        if e.sniffed.kind == "fault_table"
    ]


def _source(entry: Any) -> dict[str, Any]:
    """The configured source of a manual, or one in the layout its content showed."""
    source = entry.source
    if not isinstance(source, ManualSource):
        source = ManualSource(pattern=entry.path.name, format=entry.sniffed.layout)
    return {"source": source.model_dump(mode="json")}


def _funnel_params(run: FunnelRun) -> dict[str, Any]:
    tables = vendor_tables(run)
    return {
        "root": str(run.root),
        "vendor": [sha256_file(p) for p, _ in tables],
        "tables": [[str(p), layout] for p, layout in tables],
    }


PARSE = Step(
    "manuals.parse",
    "file",
    lambda cfg, f, p: parse(
        Path(p["path"]),
        ManualSource.model_validate(p["source"]),
        Path(p["root"]),
        cfg.manuals.max_pdf_pages,
    ),
    stages=("parse",),
    counted=False,
)
FUNNEL_STEP = Step(
    "manuals.funnel",
    "run",
    lambda cfg, f, p: funnel(f["sections"], f["blocks"], Path(p["root"]), cfg, p["tables"]),
    inputs={
        "sections": Carried(
            Out(PARSE.name, "parse"),
            "manual_sections",
            lambda: pl.DataFrame(schema=MANUAL_SECTION_SCHEMA),
        ),
        "blocks": Carried(
            Out(PARSE.name, "blocks"),
            "manual_blocks",
            lambda: pl.DataFrame(schema=DOCUMENT_BLOCK_SCHEMA),
        ),
    },
    stages=("chunks", "fault_tables", "vendor_tables", "fault_codes"),
    counted=False,
    params=_funnel_params,
)


def finish(run: FunnelRun, source: SourceRun) -> None:
    """The chunks and the knowledge base as tables, the parsed sections as state, the
    vendor tables in the ledger, and the figures of `manifest.sources`."""
    if not run.results[FUNNEL_STEP.name]:
        return
    (result,) = run.results[FUNNEL_STEP.name]
    sections = pl.concat(
        [pl.read_parquet(p) for p in run.inputs[FUNNEL_STEP.name]["sections"]],
        how="vertical_relaxed",
    )
    pages = _section_rejects(run)
    blocks = pl.concat([pl.read_parquet(p) for p in run.inputs[FUNNEL_STEP.name]["blocks"]])
    source.state = {
        "manual_sections": sections,
        "manual_section_rejects": pages,
        "manual_blocks": blocks,
    }
    source.tables = {"pretrain": result["chunks"].kept, "fault_codes": result["fault_codes"].kept}
    source.side_rejects = [pages] + [
        pl.read_parquet(result[s].rejected)
        for s in ("chunks", "fault_tables", "vendor_tables", "fault_codes")
    ]
    vendor = result["vendor_tables"]
    read = pl.concat(
        [pl.read_parquet(p, columns=["source_file"]) for p in (vendor.kept, vendor.rejected)]
    )
    source.ledger += _vendor_ledger(vendor_tables(run), run.root, read)
    source.sources = _figures(pl.concat(source.ledger), sections, pages, result)


def _section_rejects(run: FunnelRun) -> pl.DataFrame:
    """The pages rejected at parse, of the files parsed now and of the carried ones."""
    carried = carried_rows(run.ctx.state, "manual_section_rejects", run.plan.refresh.unchanged)
    parsed = [pl.read_parquet(o.rejected) for o in run.outputs(PARSE.name, "parse")]
    first = carried if carried is not None else empty_rejects()
    return pl.concat([first, *parsed], how="vertical_relaxed")


def _vendor_ledger(
    tables: list[tuple[Path, str]], root: Path, read: pl.DataFrame
) -> list[pl.DataFrame]:
    """Ledger rows of the vendor fault tables read (rows: entries kept or rejected)."""
    per_file = read.group_by("source_file").len()
    rows = dict(zip(per_file["source_file"], per_file["len"], strict=True))
    return [
        ledger_row(
            rel := relative_path(path, root),
            "fault_table",
            path.stat().st_size,
            sha256_file(path),
            "auto",
            rows=rows.get(rel, 0),
            reader=f"fault_table:{layout}",
        )
        for path, layout in tables
    ]


def _figures(
    ledger: pl.DataFrame, sections: pl.DataFrame, pages: pl.DataFrame, result: dict[str, Any]
) -> dict[str, dict[str, int]]:
    manuals = ledger.filter(pl.col("source_kind") == KIND)
    tables, vendor, kb = (
        result[s].counters for s in ("fault_tables", "vendor_tables", "fault_codes")
    )
    return {
        "manual": {
            "files": manuals.height,
            "lines": int(manuals["lines"].sum()),
            "sections": sections.height,
            "rejected_pages": pages.height,
            "chunks": result["chunks"].counters["kept"],
        },
        "fault_table": {
            "read": tables["read"] + vendor["read"],
            "kept": kb["kept"],
            "rejected": tables["rejected"] + vendor["rejected"] + kb["rejected"],
        },
    }


FUNNEL = Funnel(
    KIND,
    (PARSE, FUNNEL_STEP),
    file_params=_source,
    finish=finish,
    always_run=lambda run: bool(vendor_tables(run)),
)
