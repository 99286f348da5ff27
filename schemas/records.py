"""Column contract of one record as it moves through the stages.

Every frame a stage receives or returns uses these names. Arrow schemas for
the files we publish live in `schemas/arrow.py`.
"""

from __future__ import annotations

import polars as pl

# Fields a work-order export is mapped onto (ingest). All strings, null when absent.
WORKORDER_FIELDS: tuple[str, ...] = (
    "order_id",
    "asset",
    "machine_model",
    "reported_at",
    "symptom",
    "cause",
    "action",
    "prevention",
    "technician",
    "status",
    "remarks",
)

# Free-text fields that normalization repairs and redacts.
TEXT_FIELDS: tuple[str, ...] = ("symptom", "cause", "action", "prevention", "remarks")

# Columns known to hold person names: redacted whole, and their values redacted everywhere.
NAME_FIELDS: tuple[str, ...] = ("technician",)

# Lineage carried by every record from ingest to the exported shard.
LINEAGE_SCHEMA: dict[str, pl.DataType] = {
    "record_id": pl.String(),  # stable: hash of source kind, file, row and raw content
    "source_kind": pl.String(),  # "workorder", "alarm_log", "manual", "fault_table"
    "source_file": pl.String(),  # path relative to the input root
    "source_row": pl.Int64(),  # 1-based physical line (text/CSV) or sheet row (XLSX)
}

INGESTED_SCHEMA: dict[str, pl.DataType] = {
    **LINEAGE_SCHEMA,
    **{f: pl.String() for f in WORKORDER_FIELDS},
}

# Added by normalization.
NORMALIZED_EXTRA: dict[str, pl.DataType] = {
    "language": pl.String(),  # "zh" or "en"
    "alarm_codes": pl.List(pl.String()),  # canonical FAMILY:CODE, unique, in order of mention
    "pii_redactions": pl.Int32(),  # PII strings replaced in this record
    "repairs": pl.List(pl.String()),  # "ftfy", "gbk_as_utf8", "unrecoverable"
}

# The four parts of a training sample (structure stage output).
PARTS: tuple[str, ...] = ("symptom", "diagnosis", "action", "prevention")

# Columns of every rejects table.
REJECT_SCHEMA: dict[str, pl.DataType] = {
    "record_id": pl.String(),
    "source_kind": pl.String(),
    "source_file": pl.String(),
    "source_row": pl.Int64(),
    "stage": pl.String(),
    "reason": pl.String(),
    "detail": pl.String(),
    "duplicate_of": pl.String(),  # record_id kept in place of this one (dedup only)
    "payload": pl.String(),  # JSON of the record as the stage saw it
}
