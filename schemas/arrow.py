"""Arrow schemas of the Parquet files a snapshot holds (trainers read these directly)."""

from __future__ import annotations

import pyarrow as pa

REJECTS = pa.schema(
    [
        ("record_id", pa.string()),
        ("source_kind", pa.string()),
        ("source_file", pa.string()),
        ("source_row", pa.int64()),
        ("stage", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("duplicate_of", pa.string()),
        ("payload", pa.string()),
    ]
)

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])

SFT = pa.schema(
    [
        ("record_id", pa.string()),
        ("source_kind", pa.string()),
        ("source_file", pa.string()),
        ("source_row", pa.int64()),
        ("order_id", pa.string()),
        ("asset", pa.string()),
        ("machine_model", pa.string()),
        ("reported_at", pa.string()),
        ("language", pa.string()),
        ("alarm_codes", pa.list_(pa.string())),
        ("symptom", pa.string()),
        ("diagnosis", pa.string()),
        ("action", pa.string()),
        ("prevention", pa.string()),
        ("tier", pa.string()),
        ("tier_reasons", pa.list_(pa.string())),
        ("messages", pa.list_(MESSAGE)),
        ("n_tokens", pa.int32()),
        ("pii_redactions", pa.int32()),
        ("repairs", pa.list_(pa.string())),
    ]
)


# Pretraining chunks of manuals, at section boundaries (schemas.manuals.PRETRAIN_CHUNK_SCHEMA).
PRETRAIN = pa.schema(
    [
        ("record_id", pa.string()),
        ("source_kind", pa.string()),
        ("source_file", pa.string()),
        ("source_row", pa.int64()),
        ("heading_path", pa.list_(pa.string())),
        ("section_ids", pa.list_(pa.string())),
        ("text", pa.string()),
        ("n_chars", pa.int32()),
        ("n_tokens", pa.int32()),
    ]
)

# The fault-code knowledge base (schemas.manuals.FAULT_CODE_SCHEMA).
FAULT_CODES = pa.schema(
    [
        ("record_id", pa.string()),
        ("source_kind", pa.string()),
        ("source_file", pa.string()),
        ("source_row", pa.int64()),
        ("family", pa.string()),
        ("code", pa.string()),
        ("symptom", pa.string()),
        ("message", pa.string()),
        ("description", pa.string()),
        ("causes", pa.list_(pa.string())),
        ("remedies", pa.list_(pa.string())),
        ("effect", pa.string()),
        ("prevention", pa.string()),
        ("language", pa.string()),
        ("source", pa.string()),
    ]
)
