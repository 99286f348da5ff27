"""The manual funnel.

Per file:        parse (sections; pages without text rejected)
Over the run:    sections -> chunks (pretraining text, tokens counted)
                 sections -> alarm tables -+
                 configured vendor tables --+-> fault-code knowledge base
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.fault_codes import extract_alarm_tables, merge_knowledge_base, read_vendor_tables
from pipeline.ingest.encoding import resolved_encoding
from pipeline.ingest.files import relative_path, sha256_bytes
from pipeline.ingest.manuals import chunk_sections, read_manual
from pipeline.ledger import ledger_row
from pipeline.stage import Stage, StageResult
from pipeline.tokens import count_tokens
from schemas.config import PipelineConfig
from schemas.manuals import MANUAL_SECTION_SCHEMA, ManualSource

KIND = "manual"
_SECTIONS = tuple(MANUAL_SECTION_SCHEMA)


def _chunk(sections: pl.DataFrame, cfg: PipelineConfig) -> StageResult:
    chunks = chunk_sections(sections, cfg.manuals.chunks)
    pretrain = count_tokens(chunks.kept, cfg.tokens, column="text")
    return StageResult(pretrain, chunks.rejected, chunks.counters)


CHUNK = Stage("chunks", needs=_SECTIONS, adds=("n_tokens",), fn=_chunk)
ALARM_TABLES = Stage(
    "alarm_tables", needs=_SECTIONS, adds=(), fn=lambda df, cfg: extract_alarm_tables(df)
)


def parse(path: Path, source: ManualSource, root: Path) -> dict[str, StageResult]:
    """One manual -> sections; the result's state holds the file's ledger row."""
    result = read_manual(path, source, root)
    data = path.read_bytes()
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
    return {"parse": StageResult(result.kept, result.rejected, result.counters, {"ledger": ledger})}


def funnel(
    sections: pl.DataFrame, vendor_root: Path, cfg: PipelineConfig
) -> dict[str, StageResult]:
    """Pretraining chunks and the fault-code knowledge base from every manual's sections."""
    chunks = CHUNK.run(sections, cfg)
    tables = ALARM_TABLES.run(sections, cfg)
    vendor = read_vendor_tables(vendor_root, cfg.manuals)
    knowledge_base = merge_knowledge_base(tables.kept, vendor.kept)
    return {
        "chunks": chunks,
        "alarm_tables": tables,
        "vendor_tables": vendor,
        "fault_codes": knowledge_base,
    }
