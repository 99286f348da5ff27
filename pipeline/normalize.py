"""Normalization: mojibake repair, NFKC and whitespace, alarm codes, PII redaction, language.

The public expression builders (`repair_text`, `extract_alarm_codes`, `redact_pii`,
`detect_language`, ...) are columnar and reused by the alarm-log and manual stages;
`normalize` applies them to work orders. Rust's regex engine has no look-around, so
boundaries are ASCII word boundaries `(?-u:\\b)` (Han characters count as non-word there),
or a consumed neighbour put back through a capture group.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from itertools import chain

import ftfy
import polars as pl

from pipeline.regex import ASCII_BOUNDARY
from pipeline.stage import StageResult, empty_rejects, stage_result
from schemas.normalize import NormalizeConfig
from schemas.records import (
    INGESTED_SCHEMA,
    NAME_FIELDS,
    NORMALIZED_EXTRA,
    TEXT_FIELDS,
    WORKORDER_FIELDS,
)

B = ASCII_BOUNDARY

# --- mojibake -------------------------------------------------------------------------------

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


def repair_text(expr: pl.Expr, cfg: NormalizeConfig) -> pl.Expr:
    """Mojibake repair (ftfy where Latin mojibake shows, GBK rule), then `finish_text`."""
    fixed = fix_mojibake(expr, cfg).struct.field("text")
    return finish_text(pl.coalesce(fixed, expr), cfg).alias(
        expr.meta.output_name(raise_if_undetermined=False) or "text"
    )


def is_unrecoverable(expr: pl.Expr) -> pl.Expr:
    """True where bytes were lost before we saw the text (锟斤拷 runs, U+FFFD)."""
    return expr.str.contains(UNRECOVERABLE_PROBE).fill_null(False)


# --- language -------------------------------------------------------------------------------


def detect_language(expr: pl.Expr, min_han_share: float = 0.2) -> pl.Expr:
    """'zh' when Han characters make up at least `min_han_share` of Han + Latin letters.

    Han is counted as characters of three UTF-8 bytes (CJK ideographs and punctuation), from
    byte and character lengths: no regex pass.
    """
    han = ((expr.str.len_bytes() - expr.str.len_chars()) // 2).fill_null(0)
    latin = expr.str.count_matches(r"[A-Za-z]").fill_null(0)
    is_zh = (han > 0) & (han >= pl.lit(min_han_share) * (han + latin))
    return pl.when(is_zh).then(pl.lit("zh")).otherwise(pl.lit("en"))


# --- PII ------------------------------------------------------------------------------------

PLACEHOLDER_PATTERN = r"\[(?:PHONE|EMAIL|ID|NAME)\]"

EMAIL = r"[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
CN_ID = r"[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]"
PHONES = (
    r"(?:\+?86[ -]?)?1[3-9]\d[ -]?\d{4}[ -]?\d{4}",  # Chinese mobile
    r"\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}",  # international
    r"(?:\(0\d{2,3}\)[ -]?|0\d{2,3}[ -])\d{7,8}(?:-\d{1,4})?",  # Chinese landline
    r"(?:\(\d{3}\)[ .-]?|\d{3}[.-])\d{3}[.-]\d{4}",  # North American
)


def _digit_bounded(pattern: str) -> str:
    """`pattern` not touching other digits; groups 1 and 2 are the neighbours to put back."""
    return rf"(^|[^\d])(?:{pattern})([^\d]|$)"


_PHONE_RE = _digit_bounded("|".join(PHONES))
_ID_RE = _digit_bounded(CN_ID)

# Common Chinese surnames: a name after a cue word or before a title starts with one.
SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程"
    "苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付傅方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺"
    "顾毛郝龚邵万钱严覃武戴莫孔向汤欧"
)
# Characters that end a name rather than continue it (verbs and particles after a name).
_NOT_NAME_TAIL = (
    "反说称确认在已于的和及电手机去到来将把对也都要为是了着过报告映表示发现检查处理更换联系签字"
)
_ZH_NAME = rf"[{SURNAMES}]\p{{Han}}[\p{{Han}}--[{_NOT_NAME_TAIL}]]?"
_ZH_NAME_CUES = (
    "联系人|报修人|报告人|报障人|操作员|操作工|操作者|负责人|维修人|维修员|维修工|技术员|记录人|"
    "检修人|处理人|确认人|审核人|验收人|值班人|申请人|签字|签名|工程师"
)
_ZH_CUED_NAME = rf"((?:{_ZH_NAME_CUES})\s*[:：]?\s*){_ZH_NAME}"
# 张师傅, 王工 (not 每周工作), 李工程师, 刘经理
_ZH_TITLED_NAME = (
    rf"[{SURNAMES}](?:师傅|工程师|经理|主管|班长|组长|老师|主任|先生|女士|小姐)"
    rf"|[{SURNAMES.replace('金', '')}]工([^作件序艺位具况程装时人厂段资业区号单种期长]|$)"
)
_EN_NAME = (
    r"[A-Z](?:[a-z]+(?:['-][A-Z]?[a-z]+)?|\.)(?:[ ][A-Z](?:[a-z]+(?:['-][A-Z]?[a-z]+)?|\.)){0,2}"
)
_EN_CUED_NAME = (
    rf"({B}(?i:contact(?:\s+person)?|tech(?:nician)?|operator|engineer|inspector|attn|reporter|"
    rf"requester|reported\s+by|signed(?:\s+off)?\s+by|checked\s+by|repaired\s+by|fixed\s+by|"
    rf"serviced\s+by|approved\s+by|handled\s+by|done\s+by|verified\s+by|inspected\s+by)"
    rf"\s*[:：]?\s*){_EN_NAME}"
)


# Every e-mail, phone and ID pattern needs one of these: the contact patterns run only there.
_MAY_HOLD_CONTACT = r"@|\+\d|\d{3}[ .-]?\d{3}|\(\d"


def _redact_contacts(text: pl.Expr) -> pl.Expr:
    out = text.str.replace_all(EMAIL, "[EMAIL]").str.replace_all(_ID_RE, "${1}[ID]${2}")
    # A separator shared by two matches is consumed by the first: a second pass takes the rest.
    return out.str.replace_all(_PHONE_RE, "${1}[PHONE]${2}").str.replace_all(
        _PHONE_RE, "${1}[PHONE]${2}"
    )


def redact_pii(text: pl.Expr, names: Sequence[str] = ()) -> pl.Expr:
    """Replace e-mail addresses, ID numbers, phone numbers and person names by placeholders.

    `names` (e.g. from `known_names`) are replaced wherever they occur; names after cue words
    (联系人：张伟, 王工, Contact: John Smith, signed by J. Doe) are found by pattern.
    Count what was replaced with `count_placeholders(after) - count_placeholders(before)`.
    """
    out = on_matching(text, _MAY_HOLD_CONTACT, _redact_contacts)
    if names:
        ordered = sorted(set(names), key=lambda n: (-len(n), n))
        out = out.str.replace_many(ordered, ["[NAME]"] * len(ordered), leftmost=True)
    out = out.str.replace_all(_ZH_CUED_NAME, "${1}[NAME]")
    out = out.str.replace_all(_ZH_TITLED_NAME, "[NAME]${1}")
    return out.str.replace_all(_EN_CUED_NAME, "${1}[NAME]")


def count_placeholders(expr: pl.Expr) -> pl.Expr:
    """Number of PII placeholders in a string (0 for null)."""
    return expr.str.count_matches(PLACEHOLDER_PATTERN).fill_null(0).cast(pl.Int32)


def known_names(values: Iterable[str | None], cfg: NormalizeConfig) -> list[str]:
    """Person names from a name column: whole values and the parts of multi-person values
    (张伟、李强 / Smith, Jones), minus stopwords and too-short strings."""
    stop = {w.lower() for w in cfg.name_stopwords}
    names: set[str] = set()
    for value in values:
        if not value:
            continue
        parts = [value, *re.split(r"\s*(?:[、,，/;；&+]|和|\band\b)\s*", value)]
        for part in parts:
            part = part.strip()
            if len(part) >= cfg.min_name_length and part.lower() not in stop and part != "[NAME]":
                names.add(part)
    return sorted(names)


# --- alarm codes ----------------------------------------------------------------------------

FAMILIES = ("FANUC", "SINUMERIK", "MITSUBISHI", "HEIDENHAIN", "HAAS")
_FAMILY_PATTERNS = {
    "FANUC": rf"fanuc|发那科|法那科|{B}(?:0i|1[68]i|2[01]i|3[0-5]i)",
    "SINUMERIK": rf"sinumerik|siemens|西门子|{B}8[0-4]\dD{B}",
    "MITSUBISHI": rf"mitsubishi|三菱|meldas|{B}M[78]\d{{1,2}}[A-Z]?{B}",
    "HEIDENHAIN": rf"heidenhain|海德汉|{B}i?TNC",
    "HAAS": rf"haas|哈斯|{B}VF-?\d",
}
_BRAND_MENTION = "(?i)" + "|".join(_FAMILY_PATTERNS.values())


def family_of(model: pl.Expr) -> pl.Expr:
    """FANUC/SINUMERIK/MITSUBISHI/HEIDENHAIN/HAAS from a machine model or brand mention
    ("SINUMERIK 828D", "发那科 0i-MF", "Haas VF-2"); null when none is named."""
    out = pl.lit(None, dtype=pl.String)
    for family in reversed(FAMILIES):
        out = (
            pl.when(model.str.contains(f"(?i){_FAMILY_PATTERNS[family]}"))
            .then(pl.lit(family))
            .otherwise(out)
        )
    return out


def _hint_family(hint: pl.Expr) -> pl.Expr:
    """A known family from a hint, or the hint itself when it is already a family token."""
    token = hint.str.strip_chars().str.to_uppercase()
    verbatim = pl.when(token.str.contains(r"^[A-Z][A-Z0-9_/]*$")).then(token)
    return pl.coalesce(family_of(hint), verbatim)


_FANUC_PREFIXES = "SV|PS|OT|SP|OH|SR|SW|IO|PW|BG|DS|IE|EX"
_ALARM_CUES = (
    rf"报警号|报警代码|报警码|报警编号|报警|报错|告警|警报|故障码|故障代码|错误码|错误代码|错误号|"
    rf"{B}(?i:alarm|alm|error|err|fault)(?:\s*(?i:no\.?|nr\.?|number|code|#))?"
)
# Heidenhain codes with a hex letter after an error cue: "报错8B40", "error 8B40-0001" (digit-only
# ones are cued numbers, matched first).
_HEIDENHAIN_SHORT = rf"(?:报错|{B}(?i:error|err))\s*[:：]?\s*[0-9A-F]{{4}}(?:-[0-9A-F]{{4}})?{B}"
_HEIDENHAIN_SHORT_FULL = r"^(?:报错|(?i:error|err))\s*[:：]?\s*([0-9A-F]{4}(?:-[0-9A-F]{4})?)$"
_LIST_SEP = r"\s*(?:[、,，/;；&]|和|及|以及|(?i:and|or))\s*"
# A hyphenated number stays whole (8040-0001): only a family that uses that shape keeps it.
_CUED_NUMBERS = rf"(?:{_ALARM_CUES})[\s:：#=]*\d+(?:-\d+)*{B}(?:{_LIST_SEP}\d+(?:-\d+)*{B})*"
_ALARM_TOKENS = "|".join(
    (
        rf"{B}(?:{_FANUC_PREFIXES})[ -]?\d+{B}",
        rf"{B}[SMYZPLTU]\d{{2}}(?:[ -]?[0-9A-F]{{4}})?{B}",  # Mitsubishi S01 0052, Z70
        rf"{B}[0-9A-F]{{4}}-[0-9A-F]{{4}}(?:-[0-9A-Za-z]+)*{B}",  # Heidenhain 8B40-0001
        _CUED_NUMBERS,
        _HEIDENHAIN_SHORT,  # after the cued numbers: "error 1234" stays a bare number
    )
)
_FANUC_FULL = rf"^({_FANUC_PREFIXES})[ -]?(\d{{3,4}})$"
_MITSUBISHI_FULL = r"^([SMYZPLTU]\d{2})[ -]?([0-9A-F]{4})$|^([SYZ]\d{2})$"
_HEIDENHAIN_FULL = r"^[0-9A-F]{4}-[0-9A-F]{4}$"

# "Alarm No. 414", "ALM #108": rewritten to a plain cue first, so the No./# rules below keep it.
_NUMBERED_CUE = rf"{B}(?i:alarm|alm)\s*(?:(?i:no\.?|nr\.?|number)\s*[:：]?|[:：]?\s*#)\s*"
# Text that holds numbers which are not alarm codes: replaced by a marker (\x1f) that no code
# or cue pattern crosses, so blanking never joins a cue word to a later number.
_NOT_CODES = "|".join(
    (
        EMAIL,
        CN_ID,
        *PHONES,
        # parameters, machine data, macro variables
        r"(?i:参数号?|parameter|param\.?|par\.|prm|机床数据|设定数据)\s*(?:no\.?|#|号)?\s*[:：=]?\s*"
        rf"\d+(?:\.\d+)?(?:{_LIST_SEP}\d+(?:\.\d+)?)*",
        r"\d+\s*号?参数",
        rf"{B}(?i:no)\.\s*\d+",
        rf"{B}(?:MD|SD)\s?\d{{4,5}}{B}",
        r"\$[A-Z]{2}_[A-Z0-9_\[\],.]+",
        rf"{B}[pr]\d{{3,5}}(?:\[\d+\])?{B}",
        r"#\d+",
        # dates and times
        r"\d{4}\s*[-/.年]\s*\d{1,2}\s*[-/.月]\s*\d{1,2}\s*日?",
        r"\d{1,2}/\d{1,2}/\d{2,4}",
        r"\d{1,2}月\d{1,2}日",
        r"\d{1,2}:\d{2}(?::\d{2})?",
        # part, order and serial numbers
        r"(?i:物料编码|物料号|料号|零件号|备件号|订货号|图号|序列号|p/n|s/n|part\s*(?:no\.?|number|#)|"
        r"order\s*(?:no\.?|number)|serial\s*(?:no\.?|number))\s*[:：#]?\s*[A-Za-z0-9][\w./#-]*",
        r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+){2,}(?:#\w+)?",
        # spindle speeds and quantities with a unit
        rf"{B}S\d{{3,5}}{B}",
        r"\d+(?:\.\d+)?\s*(?:rpm|RPM|r/min|min-1|转/分|转|mm/min|mm|μm|um|℃|°C|°|kW|KW|kg|Nm|N·m|"
        rf"MPa|bar|Hz|小时|分钟|秒|天|次|个|件|台|元|%|(?:h|min|s){B})",
    )
)


def _canonical_token() -> pl.Expr:
    """One matched alarm token -> canonical code, or a marker whose family the row decides:
    `?:414` (bare cued numbers, several space separated), `M?:S01-0052`, `H?:8B40-0001`."""
    e = pl.element()
    return (
        pl.when(e.str.contains(_FANUC_FULL))
        .then(
            pl.lit("FANUC:")
            + e.str.replace(_FANUC_FULL, "${1}")
            + e.str.replace(_FANUC_FULL, "${2}").str.zfill(4)
        )
        .when(e.str.contains(_MITSUBISHI_FULL))
        .then(pl.lit("M?:") + e.str.replace(_MITSUBISHI_FULL, "${1}-${2}${3}").str.strip_chars("-"))
        .when(e.str.contains(_HEIDENHAIN_FULL))
        .then(pl.lit("H?:") + e)
        .when(e.str.extract(_HEIDENHAIN_SHORT_FULL, 1).str.contains("[A-F]").fill_null(False))
        .then(pl.lit("H?:") + e.str.replace(_HEIDENHAIN_SHORT_FULL, "${1}"))
        .when(e.str.contains(rf"^(?:{_ALARM_CUES})"))
        .then(pl.lit("?:") + e.str.extract_all(r"\d+(?:-\d+)*").list.join(" ?:"))
    )


def _valid_code() -> pl.Expr:
    """A resolved code of the right shape for its family; bare numbers: the digits the family
    uses (FANUC/Haas 3-4, SINUMERIK 4-6, other families 3-6)."""
    e = pl.element()
    known = "|".join(
        [
            r"FANUC:(?:[A-Z]{2}\d{4}|\d{3,4})",
            r"MITSUBISHI:(?:[A-Z]\d{2}(?:-[0-9A-F]{4})?|\d{3,4})",
            r"HEIDENHAIN:(?:[0-9A-F]{4}(?:-[0-9A-F]{4})?|\d{3,6})",
            r"SINUMERIK:\d{4,6}",
            r"HAAS:\d{3,4}",
        ]
    )
    generic = r"^[A-Z][A-Z0-9_/]*:\d{3,6}$"
    is_known_family = e.str.contains(rf"^(?:{'|'.join(FAMILIES)}):")
    return e.str.contains(rf"^(?:{known})$") | (~is_known_family & e.str.contains(generic))


def extract_alarm_codes(
    text: pl.Expr, family_hint: pl.Expr | None, cfg: NormalizeConfig
) -> pl.Expr:
    """list[str] of canonical `FAMILY:CODE`, unique, in order of mention, at most
    `cfg.max_alarm_codes`.

    Prefixed FANUC codes (SV0401, SV401 -> FANUC:SV0401) need no context. Bare numbers count
    only after a cue word (报警/告警/alarm/ALM/Alarm No.) or in a list continuing one, and take
    their family from `family_hint` (machine model such as "SINUMERIK 828D", or a family
    name), else from a brand named in the text, else `ALARM`. Mitsubishi (S01 0052) and
    Heidenhain (8B40-0001) shapes need that family in the hint or the text. Parameters,
    machine data, dates, times, part numbers, phone/ID numbers and speeds are blanked first.
    Run it on repaired text (`repair_text`): full-width codes are found after NFKC.
    """
    hint = pl.lit(None, dtype=pl.String) if family_hint is None else family_hint.cast(pl.String)
    return pl.struct(text.cast(pl.String).alias("text"), hint.alias("hint")).map_batches(
        lambda s: _alarm_codes_batch(s.struct.unnest(), cfg.max_alarm_codes),
        return_dtype=pl.List(pl.String),
        is_elementwise=True,
    )


# Without one of these in the raw text, the masked text holds no code either.
_CANDIDATE = f"{_ALARM_TOKENS}|P/S"
_NO_CODES = pl.lit([], dtype=pl.List(pl.String))


def _alarm_codes_batch(frame: pl.DataFrame, cap: int) -> pl.Series:
    """Codes for a frame of (text, hint); the work runs on the rows holding a candidate."""
    frame = frame.with_row_index("_i")
    codes = (
        frame.filter(pl.col("text").str.contains(_CANDIDATE).fill_null(False))
        .with_columns(
            pl.col("text")
            .str.replace_all(rf"{B}P/S\s?(\d)", "PS${1}")
            .str.replace_all(_NUMBERED_CUE, "报警 ")
            .str.replace_all(_NOT_CODES, "\x1f")
            .str.extract_all(_ALARM_TOKENS)
            .list.eval(_canonical_token())
            .list.drop_nulls()
            .list.join(" ")
            .alias("_tokens"),
            pl.coalesce(
                _hint_family(pl.col("hint")),
                family_of(pl.col("text").str.extract(f"({_BRAND_MENTION})", 1)),
                pl.lit("ALARM"),
            ).alias("_family"),
        )
        .select(
            "_i",
            pl.col("_tokens")
            .str.replace_all("M?:", _in_context("MITSUBISHI"), literal=True)
            .str.replace_all("H?:", _in_context("HEIDENHAIN"), literal=True)
            .str.replace_all("?:", pl.col("_family") + pl.lit(":"), literal=True)
            .str.split(" ")
            .list.eval(pl.element().filter(_valid_code()))
            .list.unique(maintain_order=True)
            .list.head(cap)
            .alias("codes"),
        )
    )
    joined = frame.select("_i").join(codes, on="_i", how="left", maintain_order="left")
    return joined.select(pl.col("codes").fill_null(_NO_CODES)).to_series()


def _in_context(family: str) -> pl.Expr:
    """Prefix for a family-shaped code: the family where the row is one, else a dropped one."""
    return pl.when(pl.col("_family") == family).then(pl.lit(f"{family}:")).otherwise(pl.lit("-:"))


# --- the stage ------------------------------------------------------------------------------


def normalize(
    df: pl.DataFrame, cfg: NormalizeConfig, other_names: Iterable[str] = ()
) -> StageResult:
    """Repair, canonicalize and redact work orders; every row is kept.

    Adds the NORMALIZED_EXTRA columns: language, alarm_codes, pii_redactions, repairs.
    Person names come from the frame's name columns and `other_names` (the name columns of
    the other files in the same run), and are redacted wherever they appear in the text.
    """
    missing = [c for c in INGESTED_SCHEMA if c not in df.columns]
    if missing:
        raise ValueError(f"normalize: input lacks columns {missing}")
    fields = list(WORKORDER_FIELDS)
    no_repairs = pl.lit([], dtype=pl.List(pl.String))

    fixed = df.with_columns([fix_mojibake(pl.col(f), cfg).alias(f"_fix_{f}") for f in fields])
    repaired = fixed.with_columns(
        *[
            finish_text(
                pl.coalesce(pl.col(f"_fix_{f}").struct.field("text"), pl.col(f)), cfg
            ).alias(f)
            for f in fields
        ],
        pl.concat_list(
            [pl.col(f"_fix_{f}").struct.field("repairs").fill_null(no_repairs) for f in fields]
        ).alias("repairs"),
    ).drop([f"_fix_{f}" for f in fields])
    unrecoverable = pl.any_horizontal([is_unrecoverable(pl.col(f)) for f in fields])

    names = known_names(
        chain(
            (v for f in NAME_FIELDS for v in repaired.get_column(f).unique().to_list()), other_names
        ),
        cfg,
    )
    text = pl.concat_str([pl.col(f) for f in TEXT_FIELDS], separator="\n", ignore_nulls=True)
    placeholders = pl.sum_horizontal([count_placeholders(pl.col(f)) for f in TEXT_FIELDS])
    out = (
        repaired.with_columns(
            pl.col("repairs")
            .list.concat(
                pl.when(unrecoverable).then(pl.lit(["unrecoverable"])).otherwise(no_repairs)
            )
            .list.unique(maintain_order=True),
            detect_language(text, cfg.min_han_share).alias("language"),
            extract_alarm_codes(text, pl.col("machine_model"), cfg).alias("alarm_codes"),
            (-placeholders).alias("_pii_before"),
        )
        .with_columns(
            *[redact_pii(pl.col(f), names) for f in TEXT_FIELDS],
            *[
                pl.when(pl.col(f).is_not_null()).then(pl.lit("[NAME]")).alias(f)
                for f in NAME_FIELDS
            ],
            pl.sum_horizontal(
                [
                    (pl.col(f).is_not_null() & (pl.col(f) != "[NAME]")).cast(pl.Int32)
                    for f in NAME_FIELDS
                ]
            ).alias("_pii_names"),
        )
        .with_columns(
            (placeholders + pl.col("_pii_before") + pl.col("_pii_names"))
            .cast(pl.Int32)
            .alias("pii_redactions")
        )
        .drop("_pii_before", "_pii_names")
        .select(*[c for c in df.columns if c not in NORMALIZED_EXTRA], *NORMALIZED_EXTRA)
        .cast(NORMALIZED_EXTRA)
    )
    counts = out.select(
        pl.col("repairs").list.contains("ftfy").sum().alias("repaired_ftfy"),
        pl.col("repairs").list.contains("gbk_as_utf8").sum().alias("repaired_gbk_as_utf8"),
        pl.col("repairs").list.contains("unrecoverable").sum().alias("unrecoverable"),
        (pl.col("pii_redactions") > 0).sum().alias("pii_redacted"),
        pl.col("pii_redactions").sum().alias("pii_strings_redacted"),
        (pl.col("alarm_codes").list.len() > 0).sum().alias("with_alarm_codes"),
    ).row(0, named=True)
    return stage_result(
        out, empty_rejects(), read=df.height, **{k: int(v or 0) for k, v in counts.items()}
    )
