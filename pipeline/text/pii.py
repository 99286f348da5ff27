"""Personal data: e-mail, phone and ID numbers, person names -> placeholders.

Rust's regex engine has no look-around: a consumed neighbour is put back through a capture group,
and word boundaries are ASCII ones (Han characters count as non-word there).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import polars as pl

from pipeline.text.mojibake import on_matching
from pipeline.text.regex import ASCII_BOUNDARY
from schemas.normalize import NormalizeConfig

B = ASCII_BOUNDARY

PLACEHOLDER_PATTERN = r"\[(?:PHONE|EMAIL|ID|NAME|CUSTOMER)\]"

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
    "检修人|处理人|确认人|审核人|验收人|值班人|申请人|签字|签名|工程师|联系|致电|询问|请教|通知"
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
    rf"serviced\s+by|approved\s+by|handled\s+by|done\s+by|verified\s+by|inspected\s+by|"
    rf"call(?:\s+back)?|ask(?:\s+for)?|phone|ring|talk\s+to|speak\s+(?:to|with)|reach)"
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


def redact_pii(text: pl.Expr, names: Sequence[str] = (), customers: Sequence[str] = ()) -> pl.Expr:
    """Replace e-mail addresses, ID numbers, phone numbers, person and customer names by
    placeholders.

    `names` (e.g. from `known_names`) are replaced wherever they occur; names after cue words
    (联系人：张伟, 王工, Contact: John Smith, signed by J. Doe) are found by pattern;
    `customers` (configured, and the values of a customer column) become [CUSTOMER].
    Count what was replaced with `count_placeholders(after) - count_placeholders(before)`.
    """
    out = on_matching(redact_customers(text, customers), _MAY_HOLD_CONTACT, _redact_contacts)
    if names:
        ordered = sorted(set(names), key=lambda n: (-len(n), n))
        out = out.str.replace_many(ordered, ["[NAME]"] * len(ordered), leftmost=True)
    out = out.str.replace_all(_ZH_CUED_NAME, "${1}[NAME]")
    out = out.str.replace_all(_ZH_TITLED_NAME, "[NAME]${1}")
    return out.str.replace_all(_EN_CUED_NAME, "${1}[NAME]")


def redact_customers(text: pl.Expr, customers: Sequence[str]) -> pl.Expr:
    """Every occurrence of a customer or company name -> [CUSTOMER] (longest first; ASCII
    letters in any case)."""
    if not customers:
        return text
    ordered = sorted(set(customers), key=lambda n: (-len(n), n))
    return text.str.replace_many(
        ordered, ["[CUSTOMER]"] * len(ordered), ascii_case_insensitive=True, leftmost=True
    )


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
