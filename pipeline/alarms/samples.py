"""Incidents + fault-code knowledge base → four-part samples (symptom/diagnosis/action/prevention).

symptom: the alarm(s) as the controller showed them, with machine, time span, repeat count and
clear time; diagnosis: the table's causes; action: its remedies; prevention: the manual's
prevention note where there is one. Per code, the knowledge-base entry in the incident's own
language wins, else any. Lineage: the incident's record_id/source_file/source_row (its first
raise), plus `kb_ids` and `event_ids`. `tier_hint` is "C" unless all four parts are present
(null then: the tier stage decides). Incidents none of whose codes is in the knowledge base
are no samples (`no_fault_code_entry`); they stay in the published incidents table.
"""

from __future__ import annotations

import polars as pl

from pipeline.core.stage import StageResult, make_rejects, stage_result
from pipeline.kb.fault_codes import entries_for_codes
from pipeline.text.language import detect_language
from schemas.records import LINEAGE_SCHEMA, PARTS

STAGE = "incident_samples"
_ZH = pl.col("language") == "zh"


def _span(zh: bool) -> pl.Expr:
    first = pl.col("first_at").dt.to_string("%Y-%m-%d %H:%M:%S")
    same_day = pl.col("last_at").dt.date() == pl.col("first_at").dt.date()
    last = (
        pl.when(same_day)
        .then(pl.col("last_at").dt.to_string("%H:%M:%S"))
        .otherwise(pl.col("last_at").dt.to_string("%Y-%m-%d %H:%M:%S"))
    )
    cleared = pl.col("cleared_at").dt.to_string("%Y-%m-%d %H:%M:%S")
    if zh:
        repeat = pl.when(pl.col("count") > 1).then(
            pl.format("，至 {} 共报警 {} 次", last, pl.col("count"))
        )
        clear = pl.when(pl.col("cleared_at").is_not_null()).then(pl.format("，{} 解除", cleared))
        return pl.concat_str(
            pl.format("（{} 起", first), repeat.fill_null(""), clear.fill_null(""), pl.lit("）")
        )
    repeat = pl.when(pl.col("count") > 1).then(
        pl.format(", raised {} times until {}", pl.col("count"), last)
    )
    clear = pl.when(pl.col("cleared_at").is_not_null()).then(pl.format(", cleared {}", cleared))
    return pl.concat_str(
        pl.format(" (from {}", first), repeat.fill_null(""), clear.fill_null(""), pl.lit(")")
    )


_SAME_ANSWER = ("machine", "alarm_codes", "messages", "language", "kb_ids")


def _collapse_repeats(joined: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Incidents that differ only in their times and raise counts (same machine, alarms and
    knowledge-base answer) become one: the earliest, spanning all of them, its `count` the
    sum of theirs. Returns (collapsed incidents, the others with `_duplicate_of`)."""
    keyed = joined.sort("first_at", "record_id").with_columns(
        pl.col("record_id").first().over(_SAME_ANSWER).alias("_duplicate_of")
    )

    def explode(c: str) -> pl.Expr:
        return pl.col(c).list.explode(keep_nulls=False, empty_as_null=False)

    spans = keyed.group_by("_duplicate_of").agg(
        pl.col("first_at").min(),
        pl.col("last_at").max(),
        pl.col("cleared_at").last(),
        pl.col("count").sum().cast(pl.UInt32),
        explode("event_ids"),
        explode("workorder_ids").unique(maintain_order=True),
    )
    first = pl.col("record_id") == pl.col("_duplicate_of")
    merged = [c for c in spans.columns if c != "_duplicate_of"]
    kept = (
        keyed.filter(first)
        .drop(merged)
        .join(spans, on="_duplicate_of")
        .select(joined.columns)
        .sort("_i")
    )
    return kept, keyed.filter(~first).sort("_i")


def incident_samples(incidents: pl.DataFrame, knowledge_base: pl.DataFrame) -> StageResult:
    """Join incidents (INCIDENT_SCHEMA) with the knowledge base (FAULT_CODE_SCHEMA)."""
    base = incidents.with_columns(
        language=detect_language(pl.col("messages").list.join(" ")),
    ).with_row_index("_i")
    parts = _kb_answers(base, knowledge_base)
    joined, repeats = _collapse_repeats(base.join(parts, on="_i", how="left"))
    samples = _four_parts(joined)
    has_kb = pl.col("kb_ids").list.len() > 0
    kept = samples.filter(has_kb).select(
        *LINEAGE_SCHEMA,
        "machine",
        "alarm_codes",
        "language",
        *PARTS,
        "part_origin",
        "tier_hint",
        "first_at",
        "last_at",
        "count",
        "kb_ids",
        "event_ids",
        "workorder_ids",
    )
    return stage_result(
        kept,
        _rejects(samples.filter(~has_kb), repeats),
        read=incidents.height,
        complete=kept.filter(pl.col("tier_hint").is_null()).height,
    )


def _kb_answers(base: pl.DataFrame, knowledge_base: pl.DataFrame) -> pl.DataFrame:
    """Per incident (`_i`): its `kb_ids` and the causes (`_d`), remedies (`_a`) and prevention
    notes (`_p`) of its codes, each code's list joined by \\x1f and labelled with the code
    when the incident has several."""
    matched = entries_for_codes(base, knowledge_base, ["causes", "remedies", "prevention"])
    several = pl.len().over("_i") > 1

    def listed(col: str) -> pl.Expr:
        text = pl.col(col).list.join("\x1f")
        text = pl.when(text != "").then(text)
        labelled = pl.when(several).then(pl.concat_str(pl.col("code"), pl.lit(": "), text))
        return labelled.otherwise(text)

    return (
        matched.with_columns(_d=listed("causes"), _a=listed("remedies"), _p=pl.col("prevention"))
        .group_by("_i", maintain_order=True)
        .agg(
            pl.col("_kb_id").alias("kb_ids"),
            pl.col("_d").drop_nulls(),
            pl.col("_a").drop_nulls(),
            pl.col("_p").drop_nulls().unique(maintain_order=True),
        )
    )


def _joined_text(col: str) -> pl.Expr:
    """A list of knowledge-base texts as one part, in the incident's language; null if empty."""
    sep = pl.when(_ZH).then(pl.lit("；")).otherwise(pl.lit("; "))
    text = pl.col(col).list.join("\n").str.replace_all("\x1f", sep)
    text = (
        pl.when(_ZH)
        .then(text.str.replace_all("\n", "。"))
        .otherwise(text.str.replace_all("\n", ". "))
    )
    return pl.when(pl.col(col).list.len() > 0).then(text)


def _symptom() -> pl.Expr:
    """The alarms as the controller showed them, on which machine, and when."""
    alarms = pl.concat_str(
        pl.col("alarm_codes").list.join(", "), pl.lit(" "), pl.col("messages").list.join(" / ")
    )
    return (
        pl.when(_ZH)
        .then(pl.concat_str(pl.col("machine"), pl.lit(" 报警 "), alarms, _span(True)))
        .otherwise(
            pl.concat_str(pl.lit("Alarm "), alarms, pl.lit(" on "), pl.col("machine"), _span(False))
        )
    )


def _four_parts(joined: pl.DataFrame) -> pl.DataFrame:
    """Add the four parts, their `part_origin`, `tier_hint` and `kb_ids` (empty, not null)."""
    samples = joined.with_columns(
        symptom=_symptom(),
        diagnosis=_joined_text("_d"),
        action=_joined_text("_a"),
        prevention=_joined_text("_p"),
    )
    complete = pl.all_horizontal(pl.col(p).is_not_null() for p in PARTS)
    origin = pl.struct(
        symptom=pl.lit("alarm_log"),
        diagnosis=pl.when(pl.col("diagnosis").is_not_null()).then(pl.lit("fault_table:cause")),
        action=pl.when(pl.col("action").is_not_null()).then(pl.lit("fault_table:remedy")),
        prevention=pl.when(pl.col("prevention").is_not_null()).then(
            pl.lit("fault_table:prevention")
        ),
    )
    return samples.with_columns(
        part_origin=origin,
        tier_hint=pl.when(~complete).then(pl.lit("C")),
        kb_ids=pl.col("kb_ids").fill_null([]),
    )


def _rejects(no_kb: pl.DataFrame, repeats: pl.DataFrame) -> pl.DataFrame:
    """Incidents with no knowledge-base entry, and the repeats `_collapse_repeats` merged
    (`exact_dup` where they have an entry, `no_fault_code_entry` where not)."""
    unknown = make_rejects(
        no_kb.select(*LINEAGE_SCHEMA, "machine", "alarm_codes", "messages"),
        STAGE,
        "no_fault_code_entry",
        pl.format(
            "no knowledge-base entry for {}; the incident stays in incidents/",
            pl.col("alarm_codes").list.join(", "),
        ),
    )
    repeated = make_rejects(
        repeats.filter(pl.col("kb_ids").list.len() > 0).select(
            *LINEAGE_SCHEMA, "machine", "alarm_codes", "messages", "first_at", "count",
            "_duplicate_of",
        ),
        STAGE,
        "exact_dup",
        "same machine, alarms and answer; only times and raise counts differ",
        duplicate_of=pl.col("_duplicate_of"),
    )  # fmt: skip
    unmatched = make_rejects(
        repeats.filter(pl.col("kb_ids").list.len().fill_null(0) == 0).select(
            *LINEAGE_SCHEMA, "machine", "alarm_codes", "messages"
        ),
        STAGE,
        "no_fault_code_entry",
        pl.format("no knowledge-base entry for {}", pl.col("alarm_codes").list.join(", ")),
    )
    return pl.concat([unknown, repeated, unmatched])
