"""Quality tiers of four-part samples, each row with the reasons for its tier.

A (expert-grade): all four parts, a specific diagnosis, a concrete action.
B (usable): symptom and action plus a diagnosis or a prevention.
C (real-scene, for alignment): symptom and action only, or fault-log style (tier C unless all
four parts are present). Rows without a symptom or an action meet no tier: `below_tier_c`.
"""

from __future__ import annotations

import polars as pl

from pipeline.core.stage import StageResult, make_rejects, stage_result
from pipeline.stages.structure import word_alternation
from pipeline.text.language import record_language
from pipeline.text.regex import ascii_boundaries
from schemas.records import PARTS
from schemas.samples import TierConfig

STAGE = "tier"


_UNITS = r"\p{Han}|[\p{L}\p{N}--\p{Han}]+"  # a Han character or a word
_DAMAGE = r"(?:锟斤拷)+|\x{FFFD}+"


def _units(text: pl.Expr) -> pl.Expr:
    return text.str.count_matches(_UNITS).fill_null(0)


def _bare(text: pl.Expr) -> pl.Expr:
    return text.str.to_lowercase().str.replace_all(r"[\s\p{P}\p{S}]+", "")


def _present(part: str, cfg: TierConfig) -> pl.Expr:
    """The part says something: not empty, not a placeholder ("No current controls", "N/A",
    "无"), and at least `min_part_units` Han characters or words."""
    text = pl.col(part)
    placeholders = sorted({_bare_text(p) for p in cfg.placeholder_parts})
    return (
        (_units(text) >= cfg.min_part_units) & ~_bare(text).is_in(placeholders).fill_null(False)
    ).fill_null(False)


def _bare_text(text: str) -> str:
    return pl.select(_bare(pl.lit(text))).item()


def _vague(part: str, cfg: TierConfig) -> pl.Expr:
    """The part is only vague phrases ("未查明", "重启后正常", "monitor", "as required")."""
    phrases = rf"(?i){word_alternation(cfg.vague_part_phrases)}"
    rest = pl.col(part).fill_null("").str.replace_all(phrases, "")
    return _present(part, cfg) & (_units(rest) < cfg.min_part_units)


def _damaged(cfg: TierConfig) -> pl.Expr:
    """Some part has more than `max_damaged_share` of its characters lost (锟斤拷, U+FFFD)."""
    shares = [
        pl.col(p).str.extract_all(_DAMAGE).list.join("").str.len_chars()
        / pl.col(p).str.len_chars().clip(1)
        for p in PARTS
    ]
    return pl.any_horizontal(s.fill_null(0) > cfg.max_damaged_share for s in shares)


def _lossy(cfg: TierConfig, columns: list[str]) -> pl.Expr:
    if "repairs" not in columns:
        return pl.lit(False)
    tags = pl.col("repairs").list.set_intersection(cfg.lossy_repairs).list.len() > 0
    return tags.fill_null(False)


def _concrete_action(cfg: TierConfig) -> pl.Expr:
    """A verb of replacing/adjusting/cleaning with its object (or, passive, its subject), or a
    part number."""
    verbs = word_alternation(cfg.action_verbs)
    latin_verbs = word_alternation([v for v in cfg.action_verbs if v.isascii()])
    han_verbs = word_alternation([v for v in cfg.action_verbs if not v.isascii()])
    fillers = rf"(?:(?:{word_alternation(cfg.action_object_fillers)})\s*)*"
    stop = rf"(?i)^(?:{word_alternation(cfg.action_object_stopwords)})"
    markers = word_alternation(cfg.passive_markers)
    action = pl.col("action").fill_null("")

    def any_not_stopword(pattern: str, strip: str) -> pl.Expr:
        found = action.str.extract_all(pattern).list.eval(pl.element().str.replace(strip, ""))
        return found.list.eval(~pl.element().str.contains(stop)).list.any()

    active = any_not_stopword(
        rf"(?i)(?:{verbs})\s*{fillers}[\p{{L}}\p{{N}}][\p{{L}}\p{{N}}\-]*",
        rf"(?i)^(?:{verbs})\s*{fillers}",
    )
    passive_latin = any_not_stopword(
        ascii_boundaries(rf"(?i)\b[a-z][a-z0-9\-]{{2,}}\s+(?:(?:{markers})\s+)?(?:{latin_verbs})"),
        r"(?i)\s.*$",
    )
    passive_han = action.str.contains(rf"\p{{Han}}{{2}}(?:已经?|已被|被)(?:{han_verbs})")
    part_number = action.str.contains(ascii_boundaries(cfg.part_number_pattern))
    return active | passive_latin | passive_han | part_number


def _diagnosis_shortfall(cfg: TierConfig, language: pl.Expr) -> pl.Expr:
    """Why the diagnosis is not specific (a reason code), null when it is."""
    diagnosis = pl.col("diagnosis").fill_null("")
    min_chars = (
        pl.when(language == "zh")
        .then(cfg.min_diagnosis_chars_zh)
        .otherwise(cfg.min_diagnosis_chars_en)
    )
    names_something = diagnosis.str.contains(
        rf"(?i){word_alternation(cfg.diagnosis_terms)}"
    ) | diagnosis.str.contains(ascii_boundaries(cfg.alarm_code_pattern))
    return (
        pl.when(~_present("diagnosis", cfg))
        .then(pl.lit("missing_diagnosis"))
        .when(
            _vague("diagnosis", cfg)
            | diagnosis.str.contains(rf"(?i){word_alternation(cfg.vague_diagnosis_terms)}")
        )
        .then(pl.lit("vague_diagnosis"))
        .when(diagnosis.str.strip_chars().str.len_chars() < min_chars)
        .then(pl.lit("short_diagnosis"))
        .when(~names_something)
        .then(pl.lit("generic_diagnosis"))
    )


def assign_tiers(df: pl.DataFrame, cfg: TierConfig | None = None) -> StageResult:
    """Add `tier` ("A"/"B"/"C") and `tier_reasons`; reject rows that meet no tier."""
    cfg = cfg or TierConfig()
    df = df.with_columns(
        (pl.col(p) if p in df.columns else pl.lit(None)).cast(pl.String).alias(p) for p in PARTS
    )
    tier, reasons = _tier_and_reasons()
    work = _with_facts(df, cfg).with_columns(tier.alias("tier"), reasons.alias("tier_reasons"))
    kept = work.filter(pl.col("tier").is_not_null()).select(*df.columns, "tier", "tier_reasons")
    below = work.filter(pl.col("tier").is_null())
    missing = pl.concat_list(
        [pl.when(~_has(p)).then(pl.lit(p)) for p in ("symptom", "action")]
    ).list.drop_nulls()
    rejected = make_rejects(
        below.select(*df.columns, missing.alias("_missing")),
        STAGE,
        "below_tier_c",
        detail=pl.lit("missing ") + pl.col("_missing").list.join(" and "),
    )
    counts = kept.get_column("tier").value_counts()
    by_tier = dict(zip(counts["tier"].to_list(), counts["count"].to_list(), strict=True))
    return stage_result(
        kept, rejected, read=df.height, **{f"tier_{t}": by_tier.get(t, 0) for t in "ABC"}
    )


def _with_facts(df: pl.DataFrame, cfg: TierConfig) -> pl.DataFrame:
    """Add the facts a tier is decided on: which parts are present (_has_<part>), the
    diagnosis shortfall, a concrete or vague action, damaged or lossy text, fault-log rows."""
    fault_log = (
        pl.col("source_kind").is_in(cfg.fault_log_source_kinds).fill_null(False)
        if "source_kind" in df.columns
        else pl.lit(False)
    )
    return df.with_columns(
        *[_present(p, cfg).alias(f"_has_{p}") for p in PARTS],
        _diagnosis_shortfall(cfg, record_language(df, list(PARTS))).alias("_diagnosis_shortfall"),
        _concrete_action(cfg).alias("_concrete"),
        _vague("diagnosis", cfg).alias("_vague_diagnosis"),
        _vague("action", cfg).alias("_vague_action"),
        _damaged(cfg).alias("_damaged"),
        _lossy(cfg, df.columns).alias("_lossy"),
        fault_log.alias("_fault_log"),
    )


def _has(part: str) -> pl.Expr:
    """The part is present (the `_has_<part>` fact)."""
    return pl.col(f"_has_{part}")


def _tier_and_reasons() -> tuple[pl.Expr, pl.Expr]:
    """The tier (null below C) and its reasons, from the facts `_with_facts` adds."""
    all_four = _has("symptom") & _has("diagnosis") & _has("action") & _has("prevention")
    base = _has("symptom") & _has("action")
    # capped at C: the text lost characters, or the action or the diagnosis says nothing
    capped = pl.col("_damaged") | pl.col("_lossy") | pl.col("_vague_action")
    usable_diagnosis = _has("diagnosis") & ~pl.col("_vague_diagnosis")
    tier_a = all_four & pl.col("_diagnosis_shortfall").is_null() & pl.col("_concrete") & ~capped
    tier_b = (
        base
        & (usable_diagnosis | _has("prevention"))
        & (all_four | ~pl.col("_fault_log"))
        & ~capped
    )
    tier = (
        pl.when(tier_a)
        .then(pl.lit("A"))
        .when(tier_b)
        .then(pl.lit("B"))
        .when(base)
        .then(pl.lit("C"))
    )
    shortfalls = [
        pl.when(pl.col("_damaged")).then(pl.lit("encoding_damage")),
        pl.when(pl.col("_lossy")).then(pl.lit("lossy_repair")),
        pl.when(pl.col("_vague_action")).then(pl.lit("vague_action_phrase")),
        pl.when(pl.col("_fault_log") & ~all_four).then(pl.lit("fault_log")),
        pl.when(base & ~_has("diagnosis") & ~_has("prevention")).then(
            pl.lit("symptom_and_action_only")
        ),
        pl.col("_diagnosis_shortfall"),
        pl.when(~pl.col("_concrete")).then(pl.lit("vague_action")),
        pl.when(~_has("prevention")).then(pl.lit("missing_prevention")),
    ]
    reasons = (
        pl.when(tier_a)
        .then(pl.lit(["all_four_parts", "specific_diagnosis", "concrete_action"]))
        .otherwise(pl.concat_list(shortfalls).list.drop_nulls())
    )
    return tier, reasons
