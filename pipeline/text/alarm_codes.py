"""Alarm codes: the canonical form `FAMILY:CODE`, and codes found in free text.

`canonical_code` is the one canonicalizer for codes read from a code column (alarm logs, fault
tables); `extract_alarm_codes` finds them in text (work orders). Both give FANUC:SV0401 for
"SV401", "sv 0401" and "SV0401".
"""

from __future__ import annotations

import re

import polars as pl

from pipeline.text.pii import CN_ID, EMAIL, PHONES
from pipeline.text.regex import ASCII_BOUNDARY
from schemas.normalize import NormalizeConfig

B = ASCII_BOUNDARY

FAMILIES = ("FANUC_ROBOT", "FANUC", "SINUMERIK", "MITSUBISHI", "HEIDENHAIN", "HAAS")
# Families with their own code shapes, beyond the controller families a model names.
_SHAPE_FAMILIES = ("SINAMICS",)
_FAMILY_PATTERNS = {
    # FANUC robot controllers (before FANUC: "R-30iB" also reads as a 30i CNC)
    "FANUC_ROBOT": rf"{B}R-30i[AB]|{B}R-J3i[BC]?|(?:fanuc|发那科)\s*(?:robot|机器人)",
    "FANUC": rf"fanuc|发那科|法那科|{B}(?:0i|1[68]i|2[01]i|3[0-5]i)",
    "SINUMERIK": rf"sinumerik|sinamics|siemens|西门子|{B}8[0-4]\dD{B}",
    "MITSUBISHI": rf"mitsubishi|三菱|meldas|{B}M[78]\d{{1,2}}[A-Z]?{B}",
    "HEIDENHAIN": rf"heidenhain|海德汉|{B}i?TNC",
    "HAAS": rf"haas|哈斯|{B}VF-?\d",
}
_BRAND_MENTION = "(?i)" + "|".join(_FAMILY_PATTERNS.values())


def family_of(model: pl.Expr) -> pl.Expr:
    """FANUC_ROBOT/FANUC/SINUMERIK/MITSUBISHI/HEIDENHAIN/HAAS from a machine model or brand
    mention ("SINUMERIK 828D", "发那科 0i-MF", "Haas VF-2", "R-30iB"); null when none is
    named."""
    out = pl.lit(None, dtype=pl.String)
    for family in reversed(FAMILIES):
        out = (
            pl.when(model.str.contains(f"(?i){_FAMILY_PATTERNS[family]}"))
            .then(pl.lit(family))
            .otherwise(out)
        )
    return out


# Controllers a manual may name beyond FAMILIES (their codes are bare numbers: FAMILY:1010).
_OTHER_CONTROLLERS = {
    "MAZAK": r"mazak|mazatrol|马扎克",
    "OKUMA": rf"okuma|大隈|{B}OSP-?P\d",
    "GSK": rf"{B}GSK|广州数控|广数",
    "KND": rf"{B}KND|凯恩帝",
    "HNC": rf"{B}HNC-?\d|华中数控",
    "SYNTEC": r"syntec|新代",
    "AGIE": r"agie|charmilles|阿奇",
    "HURCO": r"hurco|winmax|赫克",
}


def most_named_family(text: pl.Expr) -> pl.Expr:
    """The controller family `text` names most often (FAMILIES, then Mazak, Okuma and the
    Chinese controllers GSK/KND/HNC/Syntec; ties: that order); null when it names none."""
    patterns = {**_FAMILY_PATTERNS, **_OTHER_CONTROLLERS}
    counts = {
        name: text.str.count_matches(f"(?i){rx}").fill_null(0) for name, rx in patterns.items()
    }
    best = pl.max_horizontal(*counts.values())
    out = pl.lit(None, dtype=pl.String)
    for name in reversed(patterns):
        out = pl.when((counts[name] == best) & (best > 0)).then(pl.lit(name)).otherwise(out)
    return out


def controller_family(asset: str | None, texts: list[str], table: dict[str, str]) -> str | None:
    """One machine's controller family: the controller `table` (asset glob -> family or model,
    as `NormalizeConfig.asset_controllers`) gives `asset`, else the family `texts` name most
    often (`most_named_family`: "Mazak01" -> MAZAK, "Okuma-MB5000" -> OKUMA); else None."""
    frame = pl.DataFrame(
        {"asset": [asset], "text": ["\n".join(texts)]},
        schema=[("asset", pl.String), ("text", pl.String)],
    )
    configured = _asset_controller(pl.col("asset"), table)
    token = configured.str.strip_chars().str.to_uppercase()
    named = pl.coalesce(
        most_named_family(configured),
        pl.when(token.str.contains(r"^[A-Z][A-Z0-9_/]*$")).then(token),
        most_named_family(pl.col("text")),
    )
    return frame.select(named).item()


def _hint_family(hint: pl.Expr) -> pl.Expr:
    """A known family from a hint, or the hint itself when it is already a family token."""
    token = hint.str.strip_chars().str.to_uppercase()
    verbatim = pl.when(token.str.contains(r"^[A-Z][A-Z0-9_/]*$")).then(token)
    return pl.coalesce(family_of(hint), verbatim)


_FANUC_PREFIXES = "SV|PS|OT|SP|OH|SR|SW|IO|PW|BG|DS|IE|EX"
# FANUC robot alarm facilities (R-30iB error code manual): SRVO-050, MOTN-017, PWD -067. Words
# that also name other things (FILE, TOOL, JOG, PROG, HOST) are left out.
_ROBOT_FACILITIES = (
    "SRVO|MOTN|INTP|SYST|PRIO|MCTL|MEMO|TPIF|CVIS|SPOT|ARC|PALT|SEAL|DMER|SSPC|ACAL|ATZN|APSH|"
    "KALM|CNTR|DNET|ELOG|MACR|MHND|OPTN|PMON|QMGR|SRIO|SVGN|TCPP|THSR|TRAK|WEAV|PWD|DICT|VARS|"
    "FRSY|ASBN|HRTL|IBSS|LNTK|MUPS|SDTL|SCIO|SPRM|TMAT|TJOG|DJOG|RIPE|XMLF"
)
_ROBOT_FULL = rf"^({_ROBOT_FACILITIES})\s?-\s?(\d{{3,4}})$"
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
# "报" alone is a cue only right before the number: 机床报700023, 报 108, Z轴报10621.
_CUED_NUMBERS = (
    rf"(?:{_ALARM_CUES}|报(?:了|出)?)[\s:：#=]*\d+(?:-\d+)*{B}(?:{_LIST_SEP}\d+(?:-\d+)*{B})*"
)
# The cue after the number: 出现401号报警, 2012号报警, 401 servo alarm, 1010 error.
_AFTER_CUES = r"报警|告警|警报|报错|(?i:alarm|alm|error|fault)"
# Not after a word and a space (TNC 640报错8B40: a model number, and the cue is the next code's).
_NUMBERS_CUED_AFTER = (
    rf"(?:^|[^A-Za-z0-9\s\-./]\s*|(?i:axis)\s+)\d{{3,6}}{B}(?:{_LIST_SEP}\d{{3,6}}{B})*"
    rf"\s*号?\s*(?:[A-Za-z]{{3,}}\s+)?(?:{_AFTER_CUES})"
)
# A code opening a line, followed by alarm text: "25201 Axis Z drive fault", "108 X SERVO
# OVERLOAD", "700105 液压站油温高".
_ALARM_WORDS = (
    r"[A-Z]{2,}|[XYZABCUVW]\s(?:[A-Z]{2,}|(?i:axis))|(?i:axis|spindle|servo|drive|encoder|"
    r"overload|overheat|overtravel|limit|emergency|hydraulic|lubricat|coolant|pressure|"
    r"power|battery|fan|tool|magazine|door|air|fault|error|alarm)"
    r"|[XYZABC]?轴|主轴|伺服|驱动|编码器|过载|过热|过流|超程|限位|急停|液压|润滑|冷却|压力|"
    r"油温|油位|液位|电池|风扇|刀库|换刀|气压|报警|故障|异常"
)
_LINE_START_CODE = rf"(?m:^)[ \t]*\d{{3,6}}[ \t]+(?:{_ALARM_WORDS})"
# Mitsubishi class and detail number around the alarm text: "S02 伺服报警：PR 0031",
# "M01 Operation error 0005" (only where the row's family is MITSUBISHI).
_MITSUBISHI_DETAIL = r"[SMYZPLTU]\d{2}[ \t]+[^\d\n]{1,40}?(?:PR[ \t]*)?[0-9A-F]{4}"
# SINAMICS drive faults and alarms: F07011, A07910 (in a SINUMERIK row).
_SINAMICS = rf"{B}[FA]\d{{5}}{B}"
_COMMON_TOKENS = (
    rf"{B}(?:{_ROBOT_FACILITIES}) ?- ?\d{{3,4}}{B}",  # FANUC robot SRVO-050
    rf"{B}(?:{_FANUC_PREFIXES})[ -]?\d+{B}",
    rf"{B}[SMYZPLTU]\d{{2}}(?:[ -]?[0-9A-F]{{4}})?{B}",  # Mitsubishi S01 0052, Z70
    rf"{B}[0-9A-F]{{4}}-[0-9A-F]{{4}}(?:-[0-9A-Za-z]+)*{B}",  # Heidenhain 8B40-0001
    _SINAMICS,
    _CUED_NUMBERS,
    _NUMBERS_CUED_AFTER,
    _LINE_START_CODE,
    _HEIDENHAIN_SHORT,  # after the cued numbers: "error 1234" stays a bare number
)
_ALARM_TOKENS = "|".join(_COMMON_TOKENS)
_MITSUBISHI_TOKENS = "|".join((rf"{B}{_MITSUBISHI_DETAIL}{B}", *_COMMON_TOKENS))
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
        # diagnosis numbers and PLC addresses (X8.4, G0008.4, Q2.3, DB2.DBX180.0, R100.1)
        r"(?i:诊断号?|诊断画面|diagnos(?:is|tic)s?|diag\.?|dgn)\s*(?:no\.?|#|号)?\s*[:：=]?\s*"
        r"\d+(?:\.\d+)?",
        rf"{B}(?i:DB\d+\.DB[XBWD]\d+(?:\.\d)?)",
        rf"{B}[XYGFRDAEKCTIQM][ ]?\d{{1,5}}\.\d{{1,2}}{B}",
        rf"{B}[IQEA][BWD]?\d{{1,4}}\.\d{B}",
        # feed words (F12000) in NC blocks and after 进给/feed: not SINAMICS faults
        rf"(?i:进给速度|进给|feed(?:rate)?|{B}G0?[0-3]{B}[^\n]{{0,40}}?)\s*[:：=]?\s*F\d+",
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
        pl.when(e.str.contains(_ROBOT_FULL))
        .then(pl.lit("FANUC_ROBOT:") + e.str.replace(_ROBOT_FULL, "${1}-${2}"))
        .when(e.str.contains(_FANUC_FULL))
        .then(
            pl.lit("FANUC:")
            + e.str.replace(_FANUC_FULL, "${1}")
            + e.str.replace(_FANUC_FULL, "${2}").str.zfill(4)
        )
        .when(e.str.contains(_MITSUBISHI_FULL))
        .then(pl.lit("M?:") + e.str.replace(_MITSUBISHI_FULL, "${1}-${2}${3}").str.strip_chars("-"))
        .when(e.str.contains(rf"^{_MITSUBISHI_DETAIL}$"))
        .then(
            pl.lit("M?:")
            + e.str.extract(r"^([A-Z]\d{2})", 1)
            + pl.lit("-")
            + e.str.extract(r"([0-9A-F]{4})$", 1)
        )
        .when(e.str.contains(r"^[FA]\d{5}$"))
        .then(pl.lit("D?:") + e)
        .when(e.str.contains(_HEIDENHAIN_FULL))
        .then(pl.lit("H?:") + e)
        .when(e.str.extract(_HEIDENHAIN_SHORT_FULL, 1).str.contains("[A-F]").fill_null(False))
        .then(pl.lit("H?:") + e.str.replace(_HEIDENHAIN_SHORT_FULL, "${1}"))
        .when(e.str.contains(rf"^(?:{_ALARM_CUES}|报)|(?:{_AFTER_CUES})$"))
        .then(pl.lit("?:") + e.str.extract_all(r"\d+(?:-\d+)*").list.join(" ?:"))
        .when(e.str.contains(r"^\s*\d"))
        .then(pl.lit("?:") + e.str.extract(r"(\d+)", 1))
    )


def _valid_code() -> pl.Expr:
    """A resolved code of the right shape for its family; bare numbers: the digits the family
    uses (FANUC/Haas 3-4, SINUMERIK 4-6, other families 3-6)."""
    e = pl.element()
    known = "|".join(
        [
            r"FANUC:(?:[A-Z]{2}\d{4}|\d{3,4})",
            r"FANUC_ROBOT:[A-Z]{3,4}-\d{3,4}",
            r"MITSUBISHI:(?:[A-Z]\d{2}(?:-[0-9A-F]{4})?|\d{3,4})",
            r"HEIDENHAIN:(?:[0-9A-F]{4}(?:-[0-9A-F]{4})?|\d{3,6})",
            r"SINUMERIK:\d{4,6}",
            r"SINAMICS:[FA]\d{5}",
            r"HAAS:\d{3,4}",
        ]
    )
    generic = r"^[A-Z][A-Z0-9_/]*:\d{3,6}$"
    is_known_family = e.str.contains(rf"^(?:{'|'.join(FAMILIES + _SHAPE_FAMILIES)}):")
    return e.str.contains(rf"^(?:{known})$") | (~is_known_family & e.str.contains(generic))


def extract_alarm_codes(
    text: pl.Expr,
    family_hint: pl.Expr | None,
    cfg: NormalizeConfig,
    asset: pl.Expr | None = None,
) -> pl.Expr:
    """list[str] of canonical `FAMILY:CODE`, unique, in order of mention, at most
    `cfg.max_alarm_codes`.

    Prefixed FANUC codes (SV0401, SV401 -> FANUC:SV0401) need no context. Bare numbers count
    with an alarm cue before them (报警/报/告警/alarm/ALM/Alarm No., or in a list continuing
    one), with a cue after them (401号报警, 401 servo alarm), or opening a line followed by
    alarm text (25201 Axis Z drive fault). They take their family from `family_hint` (machine
    model such as "SINUMERIK 828D", or a family name), else from `asset` through
    `cfg.asset_controllers`, else from a brand named in the text, else `ALARM`. Mitsubishi
    (S01 0052, S02 伺服报警：PR 0031 -> S02-0031), SINAMICS (F07011) and Heidenhain (8B40-0001)
    shapes need their family in context. Parameters, machine data, diagnosis numbers, PLC
    addresses, dates, times, part numbers, phone/ID numbers and speeds are blanked first.
    Run it on repaired text (`fix_mojibake`, then `finish_text`): full-width codes are found
    after NFKC.
    """
    hint = pl.lit(None, dtype=pl.String) if family_hint is None else family_hint.cast(pl.String)
    if asset is not None and cfg.asset_controllers:
        hint = pl.coalesce(_hint_family(hint), _asset_controller(asset, cfg.asset_controllers))
    return pl.struct(text.cast(pl.String).alias("text"), hint.alias("hint")).map_batches(
        lambda s: _alarm_codes_batch(s.struct.unnest(), cfg.max_alarm_codes),
        return_dtype=pl.List(pl.String),
        is_elementwise=True,
    )


def _asset_controller(asset: pl.Expr, table: dict[str, str]) -> pl.Expr:
    """The controller configured for an asset: glob patterns (`*`, `?`), case-insensitive,
    first match wins."""
    out = pl.lit(None, dtype=pl.String)
    for pattern, controller in reversed(list(table.items())):
        rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
        out = pl.when(asset.str.contains(f"(?i)^{rx}$")).then(pl.lit(controller)).otherwise(out)
    return out


# Without one of these in the raw text, the masked text holds no code either.
_CANDIDATE = f"{_MITSUBISHI_TOKENS}|P/S"
_NO_CODES = pl.lit([], dtype=pl.List(pl.String))


def _alarm_codes_batch(frame: pl.DataFrame, cap: int) -> pl.Series:
    """Codes for a frame of (text, hint); the work runs on the rows holding a candidate."""
    frame = frame.with_row_index("_i")
    masked = (
        pl.col("text")
        .str.replace_all(rf"{B}P/S\s?(\d)", "PS${1}")
        .str.replace_all(_NUMBERED_CUE, "报警 ")
        .str.replace_all(_NOT_CODES, "\x1f")
    )
    mitsubishi = pl.col("_family") == "MITSUBISHI"
    tokens = pl.when(mitsubishi).then(pl.col("_masked").str.extract_all(_MITSUBISHI_TOKENS))
    tokens = tokens.otherwise(pl.col("_masked").str.extract_all(_ALARM_TOKENS))
    codes = (
        frame.filter(pl.col("text").str.contains(_CANDIDATE).fill_null(False))
        .with_columns(
            masked.alias("_masked"),
            pl.coalesce(
                _hint_family(pl.col("hint")),
                family_of(pl.col("text").str.extract(f"({_BRAND_MENTION})", 1)),
                pl.lit("ALARM"),
            ).alias("_family"),
        )
        .with_columns(
            tokens.list.eval(_canonical_token()).list.drop_nulls().list.join(" ").alias("_tokens")
        )
        .select(
            "_i",
            pl.col("_tokens")
            .str.replace_all("M?:", _in_context("MITSUBISHI"), literal=True)
            .str.replace_all("H?:", _in_context("HEIDENHAIN"), literal=True)
            .str.replace_all("D?:", _in_context("SINUMERIK", "SINAMICS"), literal=True)
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


def _in_context(family: str, name: str | None = None) -> pl.Expr:
    """Prefix for a family-shaped code: `name` (default: the family) where the row is of
    `family`, else a prefix that no valid code has."""
    prefix = f"{name or family}:"
    return pl.when(pl.col("_family") == family).then(pl.lit(prefix)).otherwise(pl.lit("-:"))


def code_family(family: pl.Expr, code: pl.Expr) -> pl.Expr:
    """The family a code is filed under: a SINAMICS drive fault or alarm (F07801, A07850) of a
    SINUMERIK control is `SINAMICS`, as `extract_alarm_codes` files it; else `family`."""
    drive = (family == "SINUMERIK") & code_body(code).str.contains(r"^[FA]\d{5}$")
    return pl.when(drive.fill_null(False)).then(pl.lit("SINAMICS")).otherwise(family)


def canonical_code(family: pl.Expr, code: pl.Expr) -> pl.Expr:
    """`FAMILY:CODE` for a code read from a code column: spaces dropped, upper case, two-letter
    FANUC-style prefixes padded to four digits (SV401 -> SV0401); `UNKNOWN` without a family;
    the family as `code_family` files it."""
    return pl.concat_str(
        code_family(family, code).fill_null("UNKNOWN"), pl.lit(":"), code_body(code)
    )


def family_from_code(code: pl.Expr) -> pl.Expr:
    """The family a code's shape names on its own: FANUC robot facility and number (SRVO-050),
    FANUC prefixes (SV0401), Mitsubishi class plus detail number (S02 0031), Heidenhain hex
    pairs (8B40-0001); else null."""
    code = code.str.strip_chars().str.to_uppercase()
    return (
        pl.when(code.str.contains(_ROBOT_FULL))
        .then(pl.lit("FANUC_ROBOT"))
        .when(code.str.contains(_FANUC_FULL))
        .then(pl.lit("FANUC"))
        .when(code.str.contains(r"^[SMYZPLTU]\d{2}[ -][0-9A-F]{4}$"))
        .then(pl.lit("MITSUBISHI"))
        .when(code.str.contains(r"^[0-9A-F]{4}-[0-9A-F]{4}$") & code.str.contains("[A-F]"))
        .then(pl.lit("HEIDENHAIN"))
    )


def code_body(code: pl.Expr) -> pl.Expr:
    """The code part of `canonical_code` (no family); Mitsubishi `S02 0031` -> `S02-0031`."""
    code = (
        code.str.strip_chars()
        .str.to_uppercase()
        .str.replace(r"^([SMYZPLTU]\d{2})\s*[ -]\s*([0-9A-F]{4})$", "${1}-${2}")
        .str.replace_all(r"\s", "")
    )
    letters = code.str.extract(r"^([A-Z]{2})\d+$")
    return (
        pl.when(letters.is_not_null())
        .then(pl.concat_str(letters, code.str.slice(2).str.zfill(4)))
        .otherwise(code)
    )
