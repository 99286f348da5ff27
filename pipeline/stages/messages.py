"""The chat rendering of a four-part sample: system / user / assistant in the record's language.

The `messages` column is a list of {role, content} structs, which TRL's SFTTrainer reads as a
conversational dataset and LLaMA-Factory reads as sharegpt with role/content tags.
"""

from __future__ import annotations

import polars as pl

from pipeline.text.language import record_language
from schemas.records import PARTS
from schemas.samples import Localized, MessagesConfig


def _line(label: Localized, value: pl.Expr, zh: pl.Expr, sep: Localized) -> pl.Expr:
    """ "<label><sep><value>" in the row's language; null when the value is null or blank."""
    text = pl.when(zh).then(pl.lit(label.zh + sep.zh)).otherwise(pl.lit(label.en + sep.en))
    return pl.when(value.str.strip_chars().str.len_chars() > 0).then(text + value)


def render_messages(df: pl.DataFrame, cfg: MessagesConfig | None = None) -> pl.DataFrame:
    """Add `messages`: [system, user, assistant]. The user turn holds the machine model and
    alarm codes when present and the symptom; the assistant turn the diagnosis, action and
    prevention sections that the row has."""
    cfg = cfg or MessagesConfig()
    zh = record_language(df, [p for p in PARTS if p in df.columns]) == "zh"
    sep = cfg.label_separator

    def col(name: str) -> pl.Expr:
        return pl.col(name).cast(pl.String) if name in df.columns else pl.lit(None, pl.String)

    codes = (
        pl.col("alarm_codes").list.join(", ")
        if "alarm_codes" in df.columns
        else pl.lit(None, pl.String)
    )
    system = pl.when(zh).then(pl.lit(cfg.system_prompt.zh)).otherwise(pl.lit(cfg.system_prompt.en))
    user = pl.concat_str(
        [
            _line(cfg.machine_label, col("machine_model"), zh, sep),
            _line(cfg.alarms_label, codes, zh, sep),
            _line(cfg.symptom_label, col("symptom"), zh, sep),
        ],
        separator="\n",
        ignore_nulls=True,
    )
    assistant = pl.concat_str(
        [
            _line(cfg.diagnosis_label, col("diagnosis"), zh, sep),
            _line(cfg.action_label, col("action"), zh, sep),
            _line(cfg.prevention_label, col("prevention"), zh, sep),
        ],
        separator="\n",
        ignore_nulls=True,
    )
    turns = [
        pl.struct(pl.lit(role).alias("role"), content.alias("content"))
        for role, content in (("system", system), ("user", user), ("assistant", assistant))
    ]
    return df.with_columns(pl.concat_list(turns).alias("messages"))
