"""The alarm-log layouts, their parsers, and the layout of a file by its content.

Layouts (what each export looks like is described in its module):

- `fanuc`: FANUC 0i-F / 0i-MF / 30i alarm history, one line per alarm or the screen's two-line
  form (date line, then code line), newest first, `%` tape delimiters and header lines skipped.
- `sinumerik`: SINUMERIK Operate alarm logs: one event a line (`;`, tab or space separated;
  date first or number first), or one alarm a row with came / went / acknowledged time columns
  (`;`/tab separated or fixed columns under a header), in English, German or Chinese.
- `mtconnect`: MTConnect agent / adapter logs (SHDR): conditions of any data item, any device.
- `mitsubishi`: Mitsubishi M70/M80 alarm history: class (S02, M01, ...) message detail [axis].
- `haas`: Haas alarm history: date time number text, or number text date time.

A parser takes a file's lines (`fields.lines_frame`) and returns `fields.events` rows, each
line's `kind` one of alarm, malformed or skip.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import polars as pl

from pipeline.ingest.alarm_logs import fanuc, haas, mitsubishi, mtconnect, sinumerik
from pipeline.ingest.alarm_logs.fields import lines_frame

PARSERS: dict[str, Callable[[pl.DataFrame], pl.DataFrame]] = {
    "fanuc": fanuc.parse,
    "sinumerik": sinumerik.parse,
    "mtconnect": mtconnect.parse,
    "mitsubishi": mitsubishi.parse,
    "haas": haas.parse,
}
LAYOUTS = tuple(PARSERS)


def detect_layout(lines: list[str], name: str = "") -> str | None:
    """The layout whose parser recognizes the most of `lines` (a file's first lines), or None
    when none recognizes a fifth of the non-blank lines. A FANUC-shaped history with bare
    numbers is Haas when the file or its name says Haas."""
    frame = lines_frame(lines)
    content = sum(1 for line in lines if line.strip())
    if not content:
        return None
    scores = {}
    for layout, parse in PARSERS.items():
        parsed = parse(frame)
        alarms = parsed.filter(pl.col("kind") == "alarm")["source_row"].n_unique()
        if layout == "mtconnect":  # samples and events are part of the layout
            alarms = frame.filter(pl.col("raw").str.contains(mtconnect.SHDR_TIME)).height
        scores[layout] = alarms
    best = max(scores, key=lambda k: (scores[k], k != "haas"))
    haas_named = re.search(r"(?i)haas|哈斯", name + "\n" + "\n".join(lines[:20])) is not None
    if scores["haas"] and haas_named and scores["haas"] >= scores[best]:
        best = "haas"
    return best if scores[best] and scores[best] * 5 >= content else None
