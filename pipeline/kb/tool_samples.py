"""Tool-use samples: the user reports a fault, the assistant calls `lookup_fault_code` for each
alarm code, the tool returns the knowledge-base row, the assistant answers.

Built from SFT rows (work orders and alarm-log incidents, already rendered) whose alarm codes
are in the fault-code knowledge base. Each row carries the conversation twice:

- `messages`: OpenAI-style turns with `tool_calls` (arguments as an object) and `tool` turns,
  plus `tools` (the JSON schemas as objects): what Qwen2.5's chat template, Hugging Face
  `apply_chat_template` and TRL's SFTTrainer read.
- `conversations`: LLaMA-Factory's sharegpt tool format (`function_call` and `observation`
  turns, call JSON as text), plus `tools_json`: the same schemas as a JSON string.

`n_tokens` counts the conversation rendered with Qwen2.5's tool-calling template (the system
turn carries the tool signatures; tool results come back in one user turn).
"""

from __future__ import annotations

import json

import polars as pl

from pipeline.core.stage import StageResult, make_rejects, stage_result
from pipeline.kb.fault_codes import entries_for_codes
from pipeline.stages.tokens import load_tokenizer
from schemas.samples import Localized
from schemas.tokens import TokenizerConfig
from schemas.trainer import ToolSamplesConfig

STAGE = "tool_samples"
TOOL_NAME = "lookup_fault_code"
# Keys in sorted order, so a sorted dump (the snapshot's tools.json) reads as the template saw it.
LOOKUP_TOOL: dict = {
    "function": {
        "description": (
            "Look up a CNC controller alarm code in the fault-code knowledge base built from the "
            "maintenance manuals: alarm message, causes, remedies and prevention."
        ),
        "name": TOOL_NAME,
        "parameters": {
            "properties": {
                "code": {
                    "description": "Alarm code as FAMILY:CODE, e.g. FANUC:SV0436",
                    "type": "string",
                }
            },
            "required": ["code"],
            "type": "object",
        },
    },
    "type": "function",
}
TOOLS: list[dict] = [LOOKUP_TOOL]
TOOLS_JSON = json.dumps(TOOLS, ensure_ascii=False)

# Qwen2.5's chat template with tools (tokenizer_config.json of Qwen2.5-*-Instruct).
_TOOLS_PROMPT = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
    + "".join("\n" + json.dumps(t, ensure_ascii=False) for t in TOOLS)
    + "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)

ARGUMENTS = pl.Struct({"code": pl.String})
TOOL_CALL = pl.Struct(
    {"type": pl.String, "function": pl.Struct({"name": pl.String, "arguments": ARGUMENTS})}
)


def _localized(text: Localized) -> pl.Expr:
    return pl.when(pl.col("language") == "zh").then(pl.lit(text.zh)).otherwise(pl.lit(text.en))


def _message(role: str, content: pl.Expr, tool_calls: pl.Expr | None = None) -> pl.Expr:
    calls = tool_calls if tool_calls is not None else pl.lit(None, pl.List(TOOL_CALL))
    return pl.struct(
        pl.lit(role).alias("role"), content.alias("content"), calls.alias("tool_calls")
    )


def _turn(role: str, content: pl.Expr) -> pl.Expr:
    return pl.struct(pl.lit(role).alias("role"), content.alias("content"))


def _wrap(head: str, body: str | pl.Expr, tail: str) -> pl.Expr:
    return pl.concat_str(
        pl.lit(head), pl.col(body) if isinstance(body, str) else body, pl.lit(tail)
    )


# The knowledge-base fields the tool answers with, in this order.
_ANSWER_FIELDS = ("message", "causes", "remedies", "prevention", "source")


def _lookups(rows: pl.DataFrame, knowledge_base: pl.DataFrame) -> pl.DataFrame:
    """One row per (sample, code): the call's JSON arguments and the tool's JSON answer. The
    knowledge-base entry in the sample's language wins, else any (first by record_id)."""
    found = pl.col("_kb_id").is_not_null()
    answer = (
        pl.when(found)
        .then(
            pl.struct("code", pl.lit(True).alias("found"), *_ANSWER_FIELDS).struct.json_encode()
        )
        .otherwise(pl.struct("code", pl.lit(False).alias("found")).struct.json_encode())
    )  # fmt: skip
    # {"code":"X"} from the JSON encoder, respaced as Python's json.dumps writes it.
    arguments = pl.lit('{"code": ') + pl.struct("code").struct.json_encode().str.slice(8)
    return entries_for_codes(
        rows, knowledge_base.sort("record_id"), list(_ANSWER_FIELDS), how="left"
    ).select(
        "_i",
        "code",
        "_kb_id",
        _answer=answer,
        _call=pl.concat_str(
            pl.lit(f'{{"name": "{TOOL_NAME}", "arguments": '), arguments, pl.lit("}")
        ),
    )


def tool_use_samples(
    sft: pl.DataFrame,
    knowledge_base: pl.DataFrame | None,
    tokens: TokenizerConfig,
    cfg: ToolSamplesConfig | None = None,
) -> StageResult:
    """Tool-use samples from SFT rows (`messages` = [system, user, assistant], `alarm_codes`,
    `language`, `tier`, lineage). Rows are rejected (not turned into samples) with
    `no_alarm_code`, `no_fault_code_entry` (none of its codes is in the knowledge base) or
    `no_answer` (empty assistant turn). With `cfg.enabled` off there are none (nothing read).
    """
    cfg = cfg or ToolSamplesConfig()
    if not cfg.enabled:  # no tool-use samples: no row is read
        sft = sft.clear()
    kb = knowledge_base if knowledge_base is not None else pl.DataFrame(schema=_KB_SCHEMA)
    rows = sft.with_row_index("_i").with_columns(
        _user=pl.col("messages").list.get(1, null_on_oob=True).struct.field("content"),
        _answer_text=pl.col("messages").list.get(2, null_on_oob=True).struct.field("content"),
    )
    lookups = _lookups(rows, kb)
    joined = (
        rows.join(_tool_turns(lookups), on="_i", how="left")
        .with_columns(pl.col("kb_ids").fill_null([]))
        .with_columns(_reason=_reject_reason())
    )
    samples = _conversations(joined.filter(pl.col("_reason").is_null()), cfg)
    tok = load_tokenizer(tokens)
    counts = tok.count(samples["_text"], tokens.num_threads, tokens.batch_rows, False)
    tools = pl.Series("tools", [TOOLS] * samples.height, dtype=_tools_dtype())
    kept = samples.with_columns(
        tools,
        n_tokens=pl.Series(counts, dtype=pl.Int32),
        tool_calls=pl.col("kb_ids").list.len().cast(pl.Int32),
    ).select(
        "record_id", "source_kind", "source_file", "source_row", "tier", "language",
        "alarm_codes", "kb_ids", "tool_calls", "messages", "tools", "conversations",
        "tools_json", "n_tokens",
    )  # fmt: skip
    dropped = joined.filter(pl.col("_reason").is_not_null())
    rejected = make_rejects(
        dropped.select("record_id", "source_kind", "source_file", "source_row", "alarm_codes",
                       "tier", "_reason"),
        STAGE,
        pl.col("_reason"),
    )  # fmt: skip
    return stage_result(kept, rejected, read=sft.height, lookups=lookups.height)


# The knowledge base's columns when there is none.
_KB_SCHEMA = {
    "code": pl.String, "language": pl.String, "record_id": pl.String, "message": pl.String,
    "causes": pl.List(pl.String), "remedies": pl.List(pl.String), "prevention": pl.String,
    "source": pl.String,
}  # fmt: skip


def _tool_turns(lookups: pl.DataFrame) -> pl.DataFrame:
    """Per sample (`_i`): its calls and tool turns, `kb_ids`, and the same calls and answers
    as Qwen2.5's template writes them (`_call_text`, `_response_text`) and as LLaMA-Factory's
    function_call and observation turns hold them (`_function_call`, `_observation`)."""
    call = pl.struct(
        pl.lit("function").alias("type"),
        pl.struct(pl.lit(TOOL_NAME).alias("name"), pl.struct("code").alias("arguments")).alias(
            "function"
        ),
    )
    return lookups.group_by("_i", maintain_order=True).agg(
        call.alias("_calls"),
        _message("tool", pl.col("_answer")).alias("_tool_turns"),
        pl.col("_kb_id").drop_nulls().alias("kb_ids"),
        _wrap("\n<tool_call>\n", "_call", "\n</tool_call>").str.join("").alias("_call_text"),
        _wrap("\n<tool_response>\n", "_answer", "\n</tool_response>")
        .str.join("")
        .alias("_response_text"),
        _wrap("[", pl.col("_call").str.join(", "), "]").alias("_function_call"),
        pl.col("_answer").str.join("\n</tool_response>\n<tool_response>\n").alias("_observation"),
    )


def _reject_reason() -> pl.Expr:
    """Why a row makes no sample (null when it makes one)."""
    return (
        pl.when(pl.col("alarm_codes").list.len().fill_null(0) == 0)
        .then(pl.lit("no_alarm_code"))
        .when(pl.col("kb_ids").list.len() == 0)
        .then(pl.lit("no_fault_code_entry"))
        .when(pl.col("_answer_text").fill_null("").str.strip_chars() == "")
        .then(pl.lit("no_answer"))
    )


def _conversations(usable: pl.DataFrame, cfg: ToolSamplesConfig) -> pl.DataFrame:
    """Add the conversation as `messages`, as `conversations` (with `tools_json`) and as the
    text Qwen2.5's tool-calling template renders (`_text`, what `n_tokens` counts)."""
    system = _localized(cfg.system_prompt)
    return usable.with_columns(
        messages=pl.concat_list(
            _message("system", system),
            _message("user", pl.col("_user")),
            _message("assistant", pl.lit(""), pl.col("_calls")),
            pl.col("_tool_turns"),
            _message("assistant", pl.col("_answer_text")),
        ),
        conversations=pl.concat_list(
            _turn("system", system),
            _turn("user", pl.col("_user")),
            _turn("function_call", pl.col("_function_call")),
            _turn("observation", pl.col("_observation")),
            _turn("assistant", pl.col("_answer_text")),
        ),
        tools_json=pl.lit(TOOLS_JSON),
        _text=pl.concat_str(
            pl.lit("<|im_start|>system\n"), system, pl.lit(_TOOLS_PROMPT + "<|im_end|>\n"),
            pl.lit("<|im_start|>user\n"), "_user", pl.lit("<|im_end|>\n<|im_start|>assistant"),
            "_call_text", pl.lit("<|im_end|>\n<|im_start|>user"), "_response_text",
            pl.lit("<|im_end|>\n<|im_start|>assistant\n"), "_answer_text", pl.lit("<|im_end|>\n"),
        ),
    )  # fmt: skip


def _tools_dtype() -> pl.DataType:
    return pl.Series([TOOLS]).dtype
