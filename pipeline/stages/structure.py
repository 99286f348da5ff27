"""Four-part samples: symptom, diagnosis, action and prevention, from mapped columns or free text.

All text columns of a record are cut into labelled segments ("原因分析：…", "Root cause - …")
and then into clauses; each clause gets a part from its label, from a cue word that opens it
("检查发现…", "Replaced …"), from the column it sits in (first clause), from hint words, or from
the clause before it. Per part the best source wins: the part's own column, then cue-labelled
text, then unlabelled text. Complaints, urgency notes and signatures never reach a part.
Everything runs as polars expressions over exploded clause rows; no Python loop per record.
"""

from __future__ import annotations

import polars as pl

from pipeline.core.stage import StageResult, make_rejects, stage_result
from pipeline.text.language import record_language
from pipeline.text.regex import ASCII_BOUNDARY, any_of, ascii_boundaries
from schemas.records import PARTS
from schemas.samples import PART_ORIGIN_DTYPE, StructureConfig

STAGE = "structure"
_SEP = "\x1f"
# Clause ends: sentence punctuation, commas not inside numbers, ". " and a period after Han.
_CLAUSE_END = r"[。;；!！?？\n]|[^0-9][,，]|\.\s|\p{Han}\."
_LABEL_SEP = r"(?:[】\]]\s*[:：]?|\s*[:：]|\s*——\s*|\s*[-–—]{1,2}\s+|\s+[-–—]{1,2}\s*)\s*"
_STRIP_EDGES = " \t\r\n,，;；:：、.。-–—|/"
_LEADING = _STRIP_EDGES + "!！?？)）"
_CONJUNCTION = r",?\s+(?:and\s+then|and|then|so)\s+|并且|并|然后|随后|于是"
# A clause that ends like this continues into the next one without a separator.
_CONTINUES = ascii_boundaries(
    r"(?i)(?:[。.!！?？;；,，:：]|\b(?:and|then|so)|并且|并|然后|随后|于是)$"
)
_DANGLING = r"(?i)(?:\s+(?:and\s+then|and|then|so)|并且|并|然后|随后|于是)$"


def _word(w: str) -> str:
    """Regex for one configured word: spaces match any whitespace, a line break may split a
    Chinese word ("措\\n施", from wrapped export cells), ASCII ends get a word boundary."""
    if w.isascii():
        body = pl.escape_regex(w).replace(" ", r"\s+")
    else:
        body = r"\s?".join(pl.escape_regex(ch) for ch in w)
    head = ASCII_BOUNDARY if w[:1].isascii() and w[:1].isalnum() else ""
    tail = ASCII_BOUNDARY if w[-1:].isascii() and w[-1:].isalnum() else ""
    return f"{head}{body}{tail}"


def word_alternation(words: list[str]) -> str:
    """Regex alternation of configured words, longest first so "故障现象" wins over "现象"."""
    return "|".join(_word(w) for w in sorted(set(words), key=lambda s: (-len(s), s)))


def _part_groups(cues: dict[str, list[str]]) -> str:
    """One named group per part (p0..p3, the index in PARTS) holding that part's words."""
    return "|".join(
        f"(?P<p{i}>{word_alternation(cues[p])})" for i, p in enumerate(PARTS) if cues.get(p)
    )


def _groups_in(cues: dict[str, list[str]]) -> list[str]:
    """Names of the groups _part_groups makes for these cues."""
    return [f"p{i}" for i, p in enumerate(PARTS) if cues.get(p)]


class _Regexes:
    """The configuration compiled into the regex strings the stage runs."""

    def __init__(self, cfg: StructureConfig) -> None:
        suffixes = word_alternation(cfg.label_suffixes)
        self.label = (
            rf"(?i)[【\[]?(?:{_part_groups(cfg.label_cues)})(?:\s*(?:{suffixes}))?{_LABEL_SEP}"
        )
        self.label_at_start = "(?i)^" + self.label.removeprefix("(?i)")
        self.label_groups = _groups_in(cfg.label_cues)
        self.inline_groups = _groups_in(cfg.inline_cues)
        prefixes = word_alternation(cfg.inline_cue_prefixes)
        inline_groups = _part_groups(cfg.inline_cues)
        self.inline = rf"(?i)^(?:(?:{prefixes})\s*)?(?:{inline_groups})"
        all_inline = word_alternation([w for words in cfg.inline_cues.values() for w in words])
        # "…and replaced the belt", "…并更换轴承": a cue after a conjunction opens a new clause.
        self.conjunction = rf"(?i)(?P<conj>{_CONJUNCTION})(?P<cue>{all_inline})"
        self.hints = {
            PARTS.index(p): rf"(?i){word_alternation(cfg.unlabelled_hints[p])}"
            for p in ("prevention", "action", "diagnosis", "symptom")
            if cfg.unlabelled_hints.get(p)
        }
        self.strip = any_of(cfg.signature_patterns + cfg.urgency_patterns)
        self.complaint = any_of(cfg.complaint_patterns)
        self.null_values = [v.lower() for v in cfg.null_values]
        self.request = rf"(?i)^(?:{word_alternation(cfg.work_request_verbs)})"


def _struct_part(struct_col: str, groups: list[str]) -> tuple[pl.Expr, pl.Expr]:
    field = pl.col(struct_col).struct.field
    idx = pl.coalesce(
        *[pl.when(field(g).is_not_null()).then(pl.lit(int(g[1:]), dtype=pl.Int8)) for g in groups]
    )
    word = (
        pl.coalesce(*[field(g) for g in groups])
        .str.replace_all(r"(\p{Han})\s+", "$1")
        .str.replace_all(r"\s+", " ")
    )
    return idx, word


def _text_columns(df: pl.DataFrame, cfg: StructureConfig) -> list[tuple[str, int]]:
    """(column, index of the part it holds or -1) for every text column present."""
    cols: dict[str, int] = {}
    for part, col in cfg.part_columns.items():
        if col in df.columns:
            cols.setdefault(col, PARTS.index(part))
    for col in cfg.free_text_columns:
        if col in df.columns:
            cols.setdefault(col, -1)
    return list(cols.items())


def _explode_with_index(df: pl.DataFrame, col: str, index: str) -> pl.DataFrame:
    return df.with_columns(pl.int_ranges(0, pl.col(col).list.len()).alias(index)).explode(
        [col, index]
    )


def _clauses(df: pl.DataFrame, cols: list[tuple[str, int]], rx: _Regexes) -> pl.DataFrame:
    """One row per clause: _row, _lang, _col_i, _seg_i, _text, label part and word."""
    names = [c for c, _ in cols]
    whole = pl.concat_str([pl.col(c) for c in names], separator="\n", ignore_nulls=True)
    # one clause in one column opening with a verb ("inspect and replace rollers as
    # required"): a work request, a conjunction inside it does not open another part
    single = (
        (
            pl.sum_horizontal(
                pl.col(c).str.strip_chars().str.len_chars().fill_null(0) > 0 for c in names
            )
            == 1
        )
        & ~whole.str.strip_chars(_STRIP_EDGES + "!！?？").str.contains(_CLAUSE_END)
        & ~whole.str.contains(rx.label)
        & whole.str.strip_chars_start(_LEADING).str.contains(rx.request)
    )
    long = df.select(
        "_row",
        record_language(df, names).alias("_lang"),
        single.fill_null(False).alias("_single"),
        pl.concat_list([pl.col(c).cast(pl.String) for c in names]).alias("_text"),
    )
    long = _explode_with_index(long, "_text", "_col_i").drop_nulls("_text")
    segments = long.with_columns(
        pl.col("_text")
        .str.replace_all(rx.strip, "")
        .str.replace_all(r"[ \t]+([.,;:!?])", "$1")
        .str.replace_all(r"[ \t]{2,}", " ")
        .str.replace_all(rx.label, _SEP + "$0")
        .str.split(_SEP)
    )
    segments = _explode_with_index(segments, "_text", "_seg_i")
    label_part, label_word = _struct_part("_label", rx.label_groups)
    segments = (
        segments.with_columns(pl.col("_text").str.extract_groups(rx.label_at_start).alias("_label"))
        .with_columns(label_part.alias("_label_part"), label_word.alias("_label_word"))
        .with_columns(
            pl.when(pl.col("_label_part").is_not_null())
            .then(pl.col("_text").str.replace(rx.label_at_start, ""))
            .otherwise(pl.col("_text"))
            .str.replace_all(_CLAUSE_END, "$0" + _SEP)
        )
        .with_columns(
            pl.when(pl.col("_single"))
            .then(pl.col("_text"))
            .otherwise(pl.col("_text").str.replace_all(rx.conjunction, "${conj}" + _SEP + "${cue}"))
            .str.split(_SEP)
        )
        .drop("_label", "_single")
    )
    clauses = _explode_with_index(segments, "_text", "_cl_i")
    bare = pl.col("_text").str.strip_chars(_STRIP_EDGES)
    return clauses.with_columns(
        pl.col("_text").str.strip_chars_start(_LEADING).str.strip_chars()
    ).filter(
        (bare.str.len_chars() > 0)
        & ~bare.str.to_lowercase().is_in(rx.null_values)
        & ~pl.col("_text").str.contains(rx.complaint)
    )


def _assign_parts(clauses: pl.DataFrame, cols: list[tuple[str, int]], rx: _Regexes) -> pl.DataFrame:
    """Give every clause a part (_part, Int8) and an origin, then keep the best source per part."""
    part, origin = _part_and_origin([c for c, _ in cols])
    clauses = (
        _clause_cues(clauses, cols, rx)
        .with_columns(part.alias("_part"), origin.alias("_origin"))
        .with_columns(pl.col("_part").forward_fill(), pl.col("_origin").forward_fill())
        .filter(pl.col("_part") >= 0)
    )
    rank = (
        pl.when(pl.col("_part") == pl.col("_native"))
        .then(0)
        .when(pl.col("_origin").str.starts_with("cue:"))
        .then(1)
        .otherwise(2)
    )
    piece = (
        pl.when(pl.col("_text").str.contains(_CONTINUES))
        .then(pl.col("_text"))
        .otherwise(pl.col("_text") + ";")
    )
    return clauses.select(
        "_row", "_lang", "_part", "_origin", rank.alias("_rank"), piece.alias("_piece")
    )


def _clause_cues(clauses: pl.DataFrame, cols: list[tuple[str, int]], rx: _Regexes) -> pl.DataFrame:
    """Add what a clause's part can come from: the part its column holds (_native), whether it
    opens its column or segment, the inline cue that opens it and the hint words it holds."""
    native = pl.col("_col_i").replace_strict(
        list(range(len(cols))), [p for _, p in cols], return_dtype=pl.Int8
    )
    key = ["_row", "_col_i"]
    first_in_col = pl.any_horizontal([pl.col(k) != pl.col(k).shift(1) for k in key]).fill_null(True)
    first_in_seg = pl.any_horizontal(
        [pl.col(k) != pl.col(k).shift(1) for k in (*key, "_seg_i")]
    ).fill_null(True)
    inline_part, inline_word = _struct_part("_inline", rx.inline_groups)
    hint = pl.coalesce(
        *[
            pl.when(pl.col("_text").str.contains(pattern)).then(pl.lit(i, dtype=pl.Int8))
            for i, pattern in rx.hints.items()
        ]
    )
    return clauses.with_columns(
        native.alias("_native"),
        first_in_col.alias("_first_in_col"),
        first_in_seg.alias("_first_in_seg"),
        pl.col("_text").str.extract_groups(rx.inline).alias("_inline"),
        hint.alias("_hint"),
    ).with_columns(inline_part.alias("_inline_part"), inline_word.alias("_inline_word"))


def _part_and_origin(names: list[str]) -> tuple[pl.Expr, pl.Expr]:
    """A clause's part and origin, first source that applies: its label (first clause of a
    labelled segment), its column (first clause of a mapped column), its inline cue, its hint
    words (not the first clause), or none (-1: free text with no part, stops the forward fill
    that gives the other clauses the part of the clause before)."""
    col_name = pl.col("_col_i").replace_strict(
        list(range(len(names))), names, return_dtype=pl.String
    )
    labelled = pl.col("_label_part").is_not_null()
    hint_part = pl.col("_hint")
    from_label = labelled & pl.col("_first_in_seg")
    from_column = pl.col("_first_in_col") & ~labelled & (pl.col("_native") >= 0)
    from_hint = ~labelled & ~pl.col("_first_in_col")
    part = (
        pl.when(from_label)
        .then(pl.col("_label_part"))
        .when(from_column)
        .then(pl.col("_native"))
        .when(pl.col("_inline_part").is_not_null())
        .then(pl.col("_inline_part"))
        .when(from_hint & hint_part.is_not_null())
        .then(hint_part)
        .when(pl.col("_first_in_col"))
        .then(pl.lit(-1, dtype=pl.Int8))
    )
    origin = (
        pl.when(from_label)
        .then(pl.lit("cue:") + pl.col("_label_word"))
        .when(from_column)
        .then(pl.lit("column:") + col_name)
        .when(pl.col("_inline_part").is_not_null())
        .then(pl.lit("cue:") + pl.col("_inline_word"))
        .when(from_hint & hint_part.is_not_null())
        .then(pl.lit("unlabelled"))
        .when(pl.col("_first_in_col"))
        .then(pl.lit(""))
    )
    return part, origin


def _collect_parts(clauses: pl.DataFrame) -> pl.DataFrame:
    """One row per record: the four part texts and a part_origin struct."""
    edges = _STRIP_EDGES.replace(".。", "")
    key = pl.col("_row").cast(pl.UInt64) * len(PARTS) + pl.col("_part").cast(pl.UInt64)
    best = clauses.with_columns(key.alias("_key")).filter(
        pl.col("_rank") == pl.col("_rank").min().over("_key")
    )
    joined = pl.col("_text").str.replace_all(_SEP, "", literal=True)
    per_part = (
        best.group_by("_key")
        .agg(
            pl.col("_row", "_part", "_lang", "_origin").first(),
            pl.col("_piece").str.join(_SEP).alias("_text"),
        )
        .with_columns(
            pl.when(pl.col("_lang") == "zh")
            .then(joined)
            .otherwise(pl.col("_text").str.replace_all(_SEP, " ", literal=True))
            .str.strip_chars(edges)
            .str.replace(_DANGLING, "")
            .str.strip_chars(edges)
            .alias("_text")
        )
        .filter(pl.col("_text").str.len_chars() > 0)
    )
    mine = {p: pl.col("_part") == i for i, p in enumerate(PARTS)}
    return per_part.group_by("_row").agg(
        *[pl.col("_text").filter(mine[p]).first().alias(p) for p in PARTS],
        pl.struct([pl.col("_origin").filter(mine[p]).first().alias(p) for p in PARTS]).alias(
            "part_origin"
        ),
    )


def structure(df: pl.DataFrame, cfg: StructureConfig | None = None) -> StageResult:
    """Turn records into four-part samples; reject those with neither symptom nor action
    (`no_usable_parts`). A row with only one of the two is kept: the tier stage rejects it.

    Kept rows lose the mapped source columns (e.g. `cause`) and gain `symptom`, `diagnosis`,
    `action`, `prevention` (null when absent) and `part_origin`.
    """
    cfg = cfg or StructureConfig()
    rx = _Regexes(cfg)
    cols = _text_columns(df, cfg)
    base = df.with_row_index("_row")
    if cols:
        clauses = _assign_parts(_clauses(base, cols, rx), cols, rx)
        parts = _collect_parts(clauses)
    else:
        parts = pl.DataFrame(
            schema={
                "_row": pl.UInt32,
                **{p: pl.String for p in PARTS},
                "part_origin": PART_ORIGIN_DTYPE,
            }
        )
    mapped = {c for c, p in cols if p >= 0}
    carried = [c for c in df.columns if c not in mapped and c not in PARTS and c != "part_origin"]
    out = base.select("_row", *carried).join(parts, on="_row", how="left", maintain_order="left")
    found = pl.concat_list(
        [pl.when(pl.col(p).is_not_null()).then(pl.lit(p)) for p in ("diagnosis", "prevention")]
    ).list.drop_nulls()
    usable = pl.col("symptom").is_not_null() | pl.col("action").is_not_null()
    out = out.with_columns(usable.alias("_usable"))
    kept = out.filter("_usable").select(*carried, *PARTS, "part_origin")
    bad = base.join(
        out.filter(~pl.col("_usable")).select("_row", found.alias("_found")),
        on="_row",
        how="inner",
        maintain_order="left",
    )
    detail = pl.lit("no symptom and no action") + pl.when(pl.col("_found").list.len() > 0).then(
        pl.lit("; found ") + pl.col("_found").list.join(", ")
    ).otherwise(pl.lit(""))
    rejected = make_rejects(bad, STAGE, "no_usable_parts", detail=detail)
    return stage_result(kept, rejected, read=df.height)
