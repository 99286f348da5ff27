"""The manual funnel.

Per file:        parse (sections; pages without text rejected; a readme, licence or provenance
                 note rejected whole as `not_manual_text`)
Over the run:    sections -> chunks (pretraining text, tokens counted) -> redact (PII)
                 sections -> alarm tables -+
                 configured vendor tables --+-> fault-code knowledge base -> redact (PII)
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.core.stage import Stage, StageResult, empty_rejects, make_rejects, stage_result
from pipeline.ingest.documents.manuals import STAGE as PARSE_STAGE
from pipeline.ingest.documents.manuals import chunk_sections, is_manual_text, read_manual
from pipeline.ingest.encoding import resolved_encoding
from pipeline.ingest.files import relative_path, sha256_bytes
from pipeline.kb.fault_codes import extract_alarm_tables, merge_knowledge_base, read_vendor_tables
from pipeline.publish.ledger import ledger_row
from pipeline.stages.tokens import count_tokens
from pipeline.text.pii import count_placeholders, redact_pii
from schemas.config import PipelineConfig
from schemas.manuals import MANUAL_SECTION_SCHEMA, ManualSource
from schemas.records import LINEAGE_SCHEMA

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


def parse(path: Path, source: ManualSource, root: Path) -> dict[str, StageResult]:
    """One manual -> sections; the result's state holds the file's ledger row."""
    result = read_manual(path, source, root)
    data = path.read_bytes()
    if source.format != "pdf" and not is_manual_text(path, "\n".join(result.kept["text"])):
        result = _not_manual_text(result)
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
    sections: pl.DataFrame, vendor_root: Path, cfg: PipelineConfig
) -> dict[str, StageResult]:
    """Pretraining chunks and the fault-code knowledge base from every manual's sections."""
    chunks = CHUNK.run(sections, cfg)
    tables = ALARM_TABLES.run(sections, cfg)
    vendor = read_vendor_tables(vendor_root, cfg.manuals)
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
        "alarm_tables": tables,
        "vendor_tables": vendor,
        "fault_codes": knowledge_base,
    }
