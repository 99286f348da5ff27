"""Work-order columns found the way a person finds them.

1. The header row: the row among the first ones whose cells a person reads as column names,
   below report titles and blank rows.
2. Headers: the configured mapping, then the synonym vocabulary (`schemas.ingest`): exact
   names first, then names that contain a synonym (`故障现象描述`, `Corrective Action Taken`),
   the longest synonym winning; headers that name none of the fields (完成时间, Cost) stay out.
3. Contents, for headers still unknown: dates -> reported_at, unique ids -> order_id, controller
   names -> machine_model, person names -> technician, short repeated tags -> asset, and long
   text by its wording -> action / cause / symptom / prevention.
4. In a workbook, the sheet whose header names the most fields (a code list or a summary
   names few).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import polars as pl

from pipeline.text.alarm_codes import family_of
from pipeline.text.pii import SURNAMES
from schemas.ingest import (
    BUILTIN_HEADER_ALIASES,
    CUSTOMER_COLUMN,
    CUSTOMER_HEADERS,
    IGNORED_HEADERS,
    IngestConfig,
)
from schemas.records import WORKORDER_FIELDS

CONTENT_FIELDS = ("symptom", "cause", "action")
_HEADER_NOISE = re.compile(r"[\s_\-./()（）:：#*\[\]【】]+")
HEADER_ROWS = 30  # rows searched for the header
CONTENT_SAMPLE = 500  # values per column looked at for content inference
_IGNORED = "_ignored"
_SPECIFIC_PAIRS = {"现象", "原因", "措施", "建议", "型号", "备注", "状态", "诊断", "预防", "单号"}


def header_key(name: str) -> str:
    """Header comparison key: NFKC, lower case, no spaces or punctuation."""
    return _HEADER_NOISE.sub("", unicodedata.normalize("NFKC", name).lower().lstrip("\ufeff"))


def _vocabulary(cfg: IngestConfig) -> list[tuple[str, str, int]]:
    """(key, field, priority) of every synonym; configured extras first."""
    entries = []
    for field in WORKORDER_FIELDS:
        words = [*cfg.header_aliases.get(field, []), *BUILTIN_HEADER_ALIASES[field]]
        entries += [(header_key(w), field, i) for i, w in enumerate(words) if header_key(w)]
    entries += [(header_key(w), CUSTOMER_COLUMN, 0) for w in CUSTOMER_HEADERS]
    return entries + [(header_key(w), _IGNORED, 0) for w in IGNORED_HEADERS]


def header_field(header: str, cfg: IngestConfig) -> tuple[str, bool] | None:
    """(field or `_ignored`, exact) a person reads in one header, or None."""
    key = header_key(header)
    if not key:
        return None
    vocabulary = _vocabulary(cfg)
    exact = [(p, f) for k, f, p in vocabulary if k == key]
    if exact:
        return min(exact)[1], True
    # Containment: the longest synonym inside the header (故障现象描述, correctiveactiontaken);
    # generic short words (故障, 设备, 时间, id) name a field only as the whole header.
    found = [
        (len(k), -p, f)
        for k, f, p in vocabulary
        if k in key and (len(k) >= 4 if k.isascii() else len(k) >= 3 or k in _SPECIFIC_PAIRS)
    ]
    return (max(found)[2], False) if found else None


def find_header_row(rows: Sequence[Sequence[str | None]], cfg: IngestConfig) -> int:
    """Index of the header among the first rows: the row naming the most fields, at least two
    cells filled; without any recognizable row, the first row at least half as wide as the
    widest."""
    best, best_score = None, 0
    width = max((sum(1 for c in r if c and str(c).strip()) for r in rows), default=0)
    for i, row in enumerate(rows[:HEADER_ROWS]):
        cells = [str(c) for c in row if c is not None and str(c).strip()]
        if len(cells) < 2:
            continue
        fields = {header_field(c, cfg) for c in cells} - {None}
        score = len({f for f, _ in fields if f != _IGNORED})
        if score > best_score:
            best, best_score = i, score
    if best is not None:
        return best
    for i, row in enumerate(rows[:HEADER_ROWS]):
        if sum(1 for c in row if c and str(c).strip()) >= max(2, width / 2):
            return i
    return 0


def sheet_score(headers: Sequence[str | None], rows: int, cfg: IngestConfig) -> tuple[int, ...]:
    """How much a sheet looks like the work-order data: content fields named, fields named,
    rows."""
    fields = {header_field(str(h), cfg) for h in headers if h} - {None}
    named = {f for f, _ in fields} - {_IGNORED}
    return (len(named & set(CONTENT_FIELDS)) > 0, len(named), rows)


def map_headers(
    headers: list[str], preset: dict[str, list[str]], cfg: IngestConfig
) -> tuple[dict[str, list[str]], set[str]]:
    """Field -> [header] by the vocabulary, for fields not in `preset`; and the headers a
    person reads as none of the fields (not to be guessed from their contents)."""
    mapping = dict(preset)
    taken = {h for hs in mapping.values() for h in hs}
    ignored: set[str] = set()
    matches = []
    for order, header in enumerate(headers):
        found = header_field(header, cfg)
        if found is None or header in taken:
            continue
        field, exact = found
        if field == _IGNORED:
            ignored.add(header)
        else:
            matches.append((not exact, order, field, header))
    for _, _, field, header in sorted(matches):
        if field not in mapping and header not in taken:
            mapping[field] = [header]
            taken.add(header)
    return mapping, ignored


_DATE = r"^\s*\d{4}\s*[-/.年]\s*\d{1,2}\s*[-/.月]\s*\d{1,2}|^\s*\d{1,2}/\d{1,2}/\d{2,4}\b"
_ORDER_ID = r"^[A-Za-z]{0,8}[-_/]?\d{3,}(?:[-_/][0-9A-Za-z]+)*$"
_ASSET = (
    r"^(?:[A-Za-z]{1,8}[-_ ]?\d{1,5}(?:[-_][0-9A-Za-z]{1,4})?|\d{1,3}#?号?(?:机|机床|线)"
    r"|\p{Han}{1,8}\d{1,3}#?号?)$"
)
_PERSON = (
    rf"^(?:[{SURNAMES}]\p{{Han}}{{1,2}}|[A-Z][a-z]+(?:\s[A-Z]\.?[a-z]*)?|[A-Z]\.\s?[A-Z][a-z]+)$"
)
_TEXT_CUES = {
    "action": r"更换|检查|调整|清洗|清理|清洁|紧固|修复|维修|重新|校正|修改|加注|补充|焊接|拆|装|"
    r"(?i:replac|check|adjust|clean|tighten|repair|reset|install|refill|re-?set|swapp|fixed|"
    r"changed|inspect|lubricat|calibrat)",
    "cause": r"磨损|松动|损坏|老化|堵塞|短路|断路|断线|烧坏|烧毁|失效|不良|疲劳|过载|污染|变形|"
    r"导致|由于|(?i:worn|loose|damag|broken|fail|fatigue|contaminat|due to|caused|short|blocked|"
    r"clogged|leak)",
    "symptom": r"报警|异响|不能|无法|不动|异常|漏|抖动|振动|停机|卡|过热|不亮|失灵|"
    r"(?i:alarm|noise|not |won't|doesn't|cannot|stopp|vibrat|overheat|error|fault|jam)",
    "prevention": r"定期|每周|每月|每天|每班|每年|加强|建议|培训|点检|规范|(?i:regular|weekly|"
    r"monthly|daily|periodic|recommend|schedul|train|routine|every)",
}


def _share(values: pl.Series, pattern: str) -> float:
    return float(values.str.contains(pattern).mean() or 0.0)


def _controller_share(values: pl.Series) -> float:
    return float(pl.select(family_of(pl.lit(values)).is_not_null().mean()).item() or 0.0)


def infer_from_contents(
    frame: pl.DataFrame, mapping: dict[str, list[str]], ignored: set[str]
) -> dict[str, list[str]]:
    """Fields for the still-unmapped columns, judged by their contents (see module doc)."""
    mapping = dict(mapping)
    taken = {h for hs in mapping.values() for h in hs} | ignored
    free = [c for c in frame.columns if c not in taken]
    claims = [
        claim
        for column, values in _free_values(frame, free).items()
        for claim in _claims(column, values)
    ]
    for _, field, column in sorted(claims, key=lambda c: -c[0]):
        if field not in mapping and column not in taken:
            mapping[field] = [column]
            taken.add(column)
    return mapping


def _free_values(frame: pl.DataFrame, free: list[str]) -> dict[str, pl.Series]:
    """The non-blank values (stripped) of each free column in the sample, for the columns
    that have any."""
    sample = frame.select(free).head(CONTENT_SAMPLE)
    profiles = {}
    for column in free:
        values = sample[column].drop_nulls().str.strip_chars()
        values = values.filter(values.str.len_chars() > 0)
        if values.len() >= 1:
            profiles[column] = values
    return profiles


def _claims(column: str, values: pl.Series) -> list[tuple[float, str, str]]:
    """(confidence, field, column): the first typed field the values fit (a date, a
    controller, an order id, a person, an asset), else each free-text field whose cue words
    enough of its (longer) values hold."""
    length = float(values.str.len_chars().median() or 0)
    unique = values.n_unique() / values.len()
    if _share(values, _DATE) >= 0.8:
        return [(3.0, "reported_at", column)]
    if _controller_share(values) >= 0.6:
        return [(2.9, "machine_model", column)]
    if _share(values, _ORDER_ID) >= 0.9 and unique >= 0.95:
        return [(2.8, "order_id", column)]
    if _share(values, _PERSON) >= 0.7 and length <= 12:
        return [(2.7, "technician", column)]
    if _share(values, _ASSET) >= 0.7 and length <= 20:
        return [(2.6, "asset", column)]
    if length < 6:
        return []
    shares = ((field, _share(values, cue)) for field, cue in _TEXT_CUES.items())
    return [(share, field, column) for field, share in shares if share >= 0.3]
