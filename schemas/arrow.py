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

# Tool-use samples (pipeline.kb.tool_samples): `messages` + `tools` for Hugging Face / TRL chat
# templates, `conversations` + `tools_json` for LLaMA-Factory's sharegpt tool format.
TOOL_CALL = pa.struct(
    [
        ("type", pa.string()),
        (
            "function",
            pa.struct([("name", pa.string()), ("arguments", pa.struct([("code", pa.string())]))]),
        ),
    ]
)
TOOL_MESSAGE = pa.struct(
    [("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(TOOL_CALL))]
)
TOOL_SCHEMA = pa.struct(
    [
        (
            "function",
            pa.struct(
                [
                    ("description", pa.string()),
                    ("name", pa.string()),
                    (
                        "parameters",
                        pa.struct(
                            [
                                (
                                    "properties",
                                    pa.struct(
                                        [
                                            (
                                                "code",
                                                pa.struct(
                                                    [
                                                        ("description", pa.string()),
                                                        ("type", pa.string()),
                                                    ]
                                                ),
                                            )
                                        ]
                                    ),
                                ),
                                ("required", pa.list_(pa.string())),
                                ("type", pa.string()),
                            ]
                        ),
                    ),
                ]
            ),
        ),
        ("type", pa.string()),
    ]
)
SFT_TOOLS = pa.schema(
    [
        ("record_id", pa.string()),
        ("source_kind", pa.string()),
        ("source_file", pa.string()),
        ("source_row", pa.int64()),
        ("tier", pa.string()),
        ("language", pa.string()),
        ("alarm_codes", pa.list_(pa.string())),
        ("kb_ids", pa.list_(pa.string())),
        ("tool_calls", pa.int32()),
        ("messages", pa.list_(TOOL_MESSAGE)),
        ("tools", pa.list_(TOOL_SCHEMA)),
        ("conversations", pa.list_(MESSAGE)),
        ("tools_json", pa.string()),
        ("n_tokens", pa.int32()),
    ]
)

# Alarm-log incidents (pipeline.alarms.incidents.incident_table): one row per burst of an alarm on a
# machine, kept whether or not a fault-code entry or a work order explains it.
INCIDENTS = pa.schema(
    [
        ("incident_id", pa.string()),
        ("source_file", pa.string()),  # file of the first raise
        ("machine", pa.string()),
        ("family", pa.string()),
        ("start", pa.timestamp("us")),  # first raise
        ("end", pa.timestamp("us")),  # clear, else last raise
        ("last_raise_at", pa.timestamp("us")),
        ("codes", pa.list_(pa.string())),  # canonical FAMILY:CODE, in order of first raise
        ("messages", pa.list_(pa.string())),
        ("occurrences", pa.int32()),  # raises merged
        ("raise_files", pa.list_(pa.string())),  # file of every raise
        ("raise_lines", pa.list_(pa.int64())),  # line of every raise (same order)
        ("cleared", pa.bool_()),
        ("cleared_at", pa.timestamp("us")),
        ("acknowledged_at", pa.timestamp("us")),
        ("fault_code_entry", pa.bool_()),  # the fault-code table explains one of its codes
        ("workorder_id", pa.string()),  # record_id of the nearest related work order
        ("workorder_ids", pa.list_(pa.string())),  # every related work order
    ]
)
