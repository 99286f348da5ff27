"""Mojibake repair (ftfy for Latin, a rule for UTF-8 read as GBK), NFKC and whitespace.

Columnar: the costly repairs run only on the strings a vectorized probe selects.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import ftfy
import polars as pl

from schemas.normalize import NormalizeConfig

# Latin mojibake: a UTF-8 lead byte read as Latin-1/cp1252 (Â..ô) followed by a continuation
# byte read the same way (0x80-0xBF, or its cp1252 glyph). Covers Ã©, â€™, Â , ä¸».
_CP1252_CONT = "\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192\u02c6\u02dc\u2013\u2014\u2018-\u201a\u201c-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a\u20ac\u2122"  # noqa: E501
LATIN_MOJIBAKE_PROBE = f"[\u00c2-\u00f4][\u0080-\u00bf{_CP1252_CONT}]"


def _gbk_mojibake_chars() -> str:
    """Characters that a UTF-8 CJK lead byte (E4-E9) plus a continuation byte decode to in GBK."""
    chars = set()
    for lead in range(0xE4, 0xEA):
        for trail in range(0x80, 0xC0):
            try:
                chars.add(bytes([lead, trail]).decode("gbk"))
            except UnicodeDecodeError:
                continue
    return "".join(sorted(chars))


GBK_MOJIBAKE_CHARS = _gbk_mojibake_chars()
GBK_MOJIBAKE_PROBE = f"[{GBK_MOJIBAKE_CHARS}]"
# UTF-8 "\ufffd\ufffd" read as GBK, or the replacement character itself: the bytes are gone.
UNRECOVERABLE_PROBE = "锟斤拷|\ufffd"

_FTFY_CONFIG = ftfy.TextFixerConfig(
    uncurl_quotes=False,
    fix_character_width=False,
    fix_latin_ligatures=False,
    normalization=None,
    explain=False,
)
_LATIN_PROBE_RE = re.compile(LATIN_MOJIBAKE_PROBE)
_GBK_PROBE_RE = re.compile(GBK_MOJIBAKE_PROBE)
# A run of non-ASCII characters, with the lost-byte markers ("?", U+FFFD) inside or after it.
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f](?:[^\x00-\x7f]|\?)*")
_CLEAN_REPAIR = re.compile(
    r"[\x09\x0a\x0d\x20-\x7e\u00b0\u00b1\u00b7\u00d7\u2000-\u206f\u3000-\u303f"
    r"\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]*"
)
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


# One broken UTF-8 sequence as surrogate-escaped bytes: a lead byte and what is left of it.
# E3 80 (or E3 with the rest lost) begins CJK punctuation, U+3000-U+303F.
_PUNCT_LEADS = ("\udce3", "\udce3\udc80")
_BROKEN_CHAR = re.compile("[\udcc0-\udcff][\udc80-\udcbf]*|[\udc80-\udcbf]+")


def _lost_content(raw: bytes) -> bool:
    """Whether a character whose bytes are incomplete in `raw` was more than CJK punctuation
    (`_PUNCT_LEADS`: a field's final 。 that lost its last bytes)."""
    escaped = raw.decode("utf-8", errors="surrogateescape")
    return any(m.group()[:2] not in _PUNCT_LEADS for m in _BROKEN_CHAR.finditer(escaped))


def _undo_gbk(run: str) -> tuple[str, bool] | None:
    """`run` (UTF-8 read as GBK) decoded back, and whether characters other than CJK
    punctuation were lost (`_lost_content`); None when the result is not clean text.

    Bytes the first decoder could not map ("?", U+FFFD) are gone: the characters they belonged
    to are dropped, at most one per four recovered characters (more means no mojibake).
    """
    try:
        raw = b"".join(ch.encode("gb18030") for ch in run if ch not in "?\ufffd")
    except UnicodeEncodeError:
        return None
    decoded = raw.decode("utf-8", errors="replace")
    fixed = decoded.replace("\ufffd", "")
    lost = len(decoded) - len(fixed)
    if not _HAN.search(fixed) or lost > 1 + len(fixed) // 4 or not _CLEAN_REPAIR.fullmatch(fixed):
        return None
    return fixed, lost > 0 and _lost_content(raw)


def _repair_gbk_run(match: re.Match[str], lossy: list[bool]) -> str:
    """Repair a non-ASCII run whole, else piece by piece between lost-byte markers (genuine
    Chinese may follow the mojibake); a marker after a repaired piece goes with it. Appends
    to `lossy` whether each repair lost characters (`_undo_gbk`)."""
    run = match.group(0)
    if "锟斤拷" in run:
        return run
    whole = _undo_gbk(run)
    if whole is not None:
        lossy.append(whole[1])
        return whole[0]
    out, repaired = [], False
    for piece in re.split(r"([?\ufffd]+)", run):
        if piece and piece[0] in "?\ufffd":
            out.append("" if repaired else piece)
            continue
        fixed = _undo_gbk(piece) if piece else None
        repaired = fixed is not None
        out.append(piece if fixed is None else fixed[0])
        lossy.append(fixed is not None and fixed[1])
    return "".join(out)


def _fix_one(text: str, cfg: NormalizeConfig) -> tuple[str, list[str]]:
    """The repaired text and its repair tags (`gbk_lossy` too when a GBK repair lost more
    than punctuation)."""
    repairs: list[str] = []
    if cfg.fix_latin_mojibake and _LATIN_PROBE_RE.search(text):
        fixed = ftfy.fix_text(text, _FTFY_CONFIG)
        if fixed != text:
            text = fixed
            repairs.append("ftfy")
    if cfg.fix_gbk_mojibake and _GBK_PROBE_RE.search(text):
        lossy: list[bool] = []
        fixed = _NON_ASCII_RUN.sub(lambda m: _repair_gbk_run(m, lossy), text)
        if fixed != text:
            text = fixed
            repairs.append("gbk_as_utf8")
            if any(lossy):
                repairs.append("gbk_lossy")
    return text, repairs


_FIX_DTYPE = pl.Struct({"text": pl.String(), "repairs": pl.List(pl.String())})


def fix_mojibake(expr: pl.Expr, cfg: NormalizeConfig) -> pl.Expr:
    """Struct {text, repairs}: the repaired string and the repairs applied; null where the
    vectorized pre-check finds nothing to repair or no repair changed the string.

    ftfy and the GBK rule run once per distinct selected string, never on clean rows.
    """
    probes = []
    if cfg.fix_latin_mojibake:
        probes.append(LATIN_MOJIBAKE_PROBE)
    if cfg.fix_gbk_mojibake:
        probes.append(GBK_MOJIBAKE_PROBE)
    if not probes:
        return pl.lit(None, dtype=_FIX_DTYPE)

    def batch(s: pl.Series) -> pl.Series:
        keys, fixes = [], []
        for value in s.drop_nulls().unique(maintain_order=True).to_list():
            text, repairs = _fix_one(value, cfg)
            if repairs:
                keys.append(value)
                fixes.append({"text": text, "repairs": repairs})
        if not keys:
            return pl.Series(s.name, dtype=_FIX_DTYPE).extend_constant(None, s.len())
        table = pl.DataFrame(
            {"key": keys, "fix": pl.Series(fixes, dtype=_FIX_DTYPE)},
            schema_overrides={"key": pl.String},
        )
        joined = s.to_frame("key").join(table, on="key", how="left", maintain_order="left")
        return joined.get_column("fix").alias(s.name)

    selected = pl.when(expr.str.contains("|".join(probes))).then(expr)
    return selected.map_batches(batch, return_dtype=_FIX_DTYPE, is_elementwise=True)


# NFKC maps these to ASCII; Chinese text keeps them full width.
_PROTECTED_PUNCT = ["，", "。", "：", "；", "！", "？", "（", "）"]
_PUNCT_STANDINS = [chr(0xE000 + i) for i in range(len(_PROTECTED_PUNCT))]
_INVISIBLE = "[\u200b-\u200d\u2060\ufeff\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"


# Characters NFKC leaves alone (ASCII, CJK ideographs and punctuation, protected punctuation).
# A string with none outside them and no doubled, leading or trailing space is already final.
_FINAL_CHARS = (
    "\x20-\x7e\u3400-\u4dbf\u4e00-\u9fff\u3001-\u3003\u3008-\u3011\u3014-\u301b"
    "\u2018\u2019\u201c\u201d\u2014\u00b0\u00b7\u00d7" + "".join(_PROTECTED_PUNCT)
)
_NEEDS_FINISH = f"[^{_FINAL_CHARS}]|  |^ | $"


def on_matching(expr: pl.Expr, pattern: str, fn: Callable[[pl.Expr], pl.Expr]) -> pl.Expr:
    """Apply the string expression `fn` only to the values matching `pattern`; the rest pass
    through. Columnar on the matching subset: worth it when `fn` is costly and matches rare."""

    def batch(s: pl.Series) -> pl.Series:
        idx = s.str.contains(pattern).fill_null(False).arg_true()
        if idx.len() == 0:
            return s
        out = s.clone()
        out.scatter(idx, pl.select(fn(pl.lit(s.gather(idx)))).to_series())
        return out

    return expr.map_batches(batch, return_dtype=pl.String, is_elementwise=True)


def _finish_all(expr: pl.Expr, keep_newlines: bool) -> pl.Expr:
    out = (
        expr.str.replace_many(_PROTECTED_PUNCT, _PUNCT_STANDINS)
        .str.normalize("NFKC")
        .str.replace_many(_PUNCT_STANDINS, _PROTECTED_PUNCT)
        .str.replace_all(_INVISIBLE, "")
    )
    if keep_newlines:
        out = out.str.replace_all(r"\s*\n\s*", "\n").str.replace_all(r"[^\S\n]+", " ")
    else:
        out = out.str.replace_all(r"\s+", " ")
    return out.str.strip_chars()


def finish_text(expr: pl.Expr, cfg: NormalizeConfig) -> pl.Expr:
    """NFKC (full width letters and digits to ASCII, Chinese punctuation kept), invisible
    characters dropped, whitespace collapsed and stripped; empty becomes null."""
    out = on_matching(expr, _NEEDS_FINISH, lambda e: _finish_all(e, cfg.keep_newlines))
    return pl.when(out.str.len_bytes() > 0).then(out)


def is_unrecoverable(expr: pl.Expr) -> pl.Expr:
    """True where bytes were lost before we saw the text (锟斤拷 runs, U+FFFD)."""
    return expr.str.contains(UNRECOVERABLE_PROBE).fill_null(False)
