"""Manuals and fault-code tables: reader configuration and the columns of sections/chunks/codes."""

from __future__ import annotations

from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from schemas.records import LINEAGE_SCHEMA

ManualFormat = Literal["markdown", "text", "pdf", "html"]


class ManualSource(BaseModel):
    """How the manual files matching `pattern` are read."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="glob matched against the path relative to the input root")
    format: ManualFormat = Field(
        description="how the file is cut into sections: 'markdown' (# headings outside code "
        "fences), 'text' (numbered '1.2 ...' and 第...章/节 headings), 'pdf' (text extracted "
        "per page; headings from the PDF outline, else as for text), 'html' (headings, "
        "paragraphs, lists, tables and definition lists; scripts and navigation dropped)"
    )
    encoding: str = Field("auto", description="'auto' detects; else a Python codec name (not PDF)")
    family: str | None = Field(
        None,
        description="code family of the alarm tables in these manuals (FANUC, SINUMERIK, ...); "
        "default: the controller the text names most often",
    )


class VendorFields(BaseModel):
    """Dotted field paths of one language of a vendor alarm table (e.g. 'zh_CN.solution')."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field(description="dotted path (JSON) or column (CSV) of the alarm message")
    cause: str | None = Field(
        None, description="dotted path or column of the cause; None: no cause column"
    )
    remedy: str | None = Field(
        None, description="dotted path or column of the remedy; None: no remedy column"
    )
    prevention: str | None = Field(
        None, description="dotted path or column of the prevention; None: no prevention column"
    )


class VendorTableSource(BaseModel):
    """A vendor alarm table (JSON array of objects, or CSV) mapped onto the knowledge base."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="glob matched against the path relative to the input root")
    format: Literal["json", "csv"] = Field(
        description="'json': an array of objects (see `records`); 'csv': a table with a header"
    )
    family: str = Field(description="code family, e.g. 'DOBOT/SERVO'")
    encoding: str = Field("auto", description="'auto' detects; else a Python codec name")
    records: str | None = Field(
        None, description="dotted key of the array of entries in a JSON object; None: top level"
    )
    code: str = Field(description="dotted path (JSON) or column (CSV) of the alarm code")
    languages: dict[Literal["zh", "en"], VendorFields] = Field(
        description="per language, where message, cause, remedy and prevention are; each "
        "entry gives one knowledge-base row per language"
    )
    delimiter: str = Field(",", description="field separator of a CSV table")


class ChunkConfig(BaseModel):
    """How manual sections become pretraining chunks."""

    model_config = ConfigDict(extra="forbid")

    max_chars: int = Field(
        1500, ge=200, description="cap per pretraining chunk (characters, heading path included)"
    )
    merge_small_sections: bool = Field(
        True, description="pack consecutive whole sections of one document up to the cap"
    )


class ManualsConfig(BaseModel):
    """Manuals and vendor fault-code tables."""

    model_config = ConfigDict(extra="forbid")

    sources: list[ManualSource] = Field(
        default_factory=lambda: [
            ManualSource(pattern="**/*.md", format="markdown"),
            ManualSource(pattern="**/*.txt", format="text"),
            ManualSource(pattern="**/*.pdf", format="pdf"),
            ManualSource(pattern="**/*.html", format="html"),
        ],
        description="per-file reading of manuals, matched by `pattern` (first match wins); "
        "applied only when set in the configuration: then a matching file is read as a manual "
        "of the entry's format and encoding whatever its content says; by default the content "
        "decides and the entries shown here are not applied",
    )
    chunks: ChunkConfig = Field(
        ChunkConfig(), description="how manual sections become pretraining chunks"
    )
    vendor_tables: list[VendorTableSource] = Field(
        default_factory=list,
        description="vendor alarm tables (JSON or CSV) mapped onto the fault-code knowledge "
        "base; a file matching one of their patterns is read as that table before any other "
        "kind is considered",
    )
    max_pdf_pages: int = Field(
        2000,
        ge=1,
        description="a PDF manual with more pages than this (counted in its page tree, before "
        "any page is read) is quarantined unread with reason 'too_many_pages' and the run goes "
        "on (bench/bench_documents.py measures the extraction time per 100 pages)",
    )
    fault_table_family: str | None = Field(
        None,
        description="code family of a vendor fault table read without a `vendor_tables` entry "
        "when neither its title, headers, folder and file name nor its text name a controller "
        "or drive maker; None: such codes are UNKNOWN:<code>",
    )


# The Dobot servo table of ../shared/external/dobot-servo-alarms, as a worked mapping.
DOBOT_SERVO_TABLE = VendorTableSource(
    pattern="**/alarm_servo.json",
    format="json",
    family="DOBOT/SERVO",
    code="id",
    languages={
        "zh": VendorFields(
            message="zh_CN.description", cause="zh_CN.cause", remedy="zh_CN.solution"
        ),
        "en": VendorFields(message="en.description", cause="en.cause", remedy="en.solution"),
    },
)

# One section of a manual: the text under one heading, down to the next heading.
MANUAL_SECTION_SCHEMA: dict[str, pl.DataType] = {
    **LINEAGE_SCHEMA,  # source_row: first line of the section (PDF: line of the extracted text)
    "heading_path": pl.List(pl.String()),  # outermost first; [] before the first heading
    "level": pl.Int32(),  # 0 before the first heading
    "text": pl.String(),  # body below the heading, subsections excluded, blank lines trimmed
    "body_row": pl.Int64(),  # line of the body's first line (for lineage of rows found in it)
    "page": pl.Int32(),  # PDF page (1-based) of the heading; null otherwise
    "family": pl.String(),  # code family of the document's alarm tables
}

PRETRAIN_CHUNK_SCHEMA: dict[str, pl.DataType] = {
    **LINEAGE_SCHEMA,  # record_id: hash of the file, first row and chunk text
    "heading_path": pl.List(pl.String()),  # of the chunk's first section
    "section_ids": pl.List(pl.String()),
    "text": pl.String(),
    "n_chars": pl.Int32(),
}

FAULT_CODE_SCHEMA: dict[str, pl.DataType] = {
    **LINEAGE_SCHEMA,  # source_kind "fault_table"; source_row: table row line / JSON index
    "family": pl.String(),
    "code": pl.String(),  # canonical FAMILY:CODE; null for a row keyed by symptom
    "symptom": pl.String(),  # the symptom a code-less troubleshooting row is keyed by
    "message": pl.String(),
    "description": pl.String(),  # explanation of the alarm, where the manual gives one
    "causes": pl.List(pl.String()),
    "remedies": pl.List(pl.String()),
    "effect": pl.String(),  # what the control does / what stops (影响, Reaction)
    "prevention": pl.String(),
    "language": pl.String(),  # "zh" or "en"
    "source": pl.String(),  # file, and heading path for a manual table
}
