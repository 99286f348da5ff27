"""What dedup compares of a record: normalized text, content and machine hashes
(exact duplicates whatever the case, width, spacing, punctuation or dates)."""

from __future__ import annotations

import polars as pl

from pipeline.dedup.content import CONTENT_PARTS, normalized_text
from pipeline.dedup.hashing import string_hashes
from schemas.dedup import DedupConfig
from tests.pipeline.dedup.oracle import dedup
from tests.pipeline.dedup.support import EN, SERVO, ZH, frame, rejects_of

GOLDEN_HASHES = (18440877287916319196, 894332176025947715)
GOLDEN_SIGNATURE_HEAD = [13780250, 11727999, 135565651, 13177933]


def test_plain_text_normalizes_as_the_full_path_does() -> None:
    """ASCII/CJK rows skip NFKC and lower-case as ASCII; an ideographic space (NFKC: a
    space, then removed) sends a row down the full path, so both must give the same text."""
    plain = [
        "".join(map(chr, range(128))),
        "".join(map(chr, range(0x4E00, 0xA000))),
        "、。〈〉《》「」『』【】°“”！（），；？",
        "2024年3月5日 14:20，X轴伺服报警（SV0401）！复位后再次报警；原因？",
        "2024-03-05 08:15 Spindle ALM 9031 (FANUC), replaced bearing; OK!",
        *SERVO.values(),
        *EN.values(),
    ]
    not_plain = ["ＡＢＣ１２３，测试", "℃ ① ㈠ Ⅳ ΣΑΣ İ", "a\u0301，\u0301b", "14：20 完成"]
    texts = pl.DataFrame({"text": plain + not_plain})
    fast = texts.select(normalized_text("text")).to_series()
    full = texts.select(pl.col("text") + "\u3000").select(normalized_text("text")).to_series()
    assert fast.to_list() == full.to_list()
    assert fast[3] == "x轴伺服报警sv0401复位后再次报警原因"
    assert fast[len(plain)] == "abc123测试"


def test_exact_duplicates_ignore_case_width_whitespace_and_punctuation() -> None:
    shouted = {k: v.upper() for k, v in EN.items()}
    spaced = {k: "  " + v.replace(", ", " ,  ").replace(";", " ") for k, v in EN.items()}
    full_width = {**ZH, "cause": ZH["cause"].replace("0.02", "０．０２")}
    df = frame(
        {"record_id": "e-1", **EN},
        {"record_id": "e-2", **shouted},
        {"record_id": "e-3", **spaced},
        {"record_id": "z-1", **ZH},
        {"record_id": "z-2", **full_width},
    )
    result, _ = dedup(df, DedupConfig())
    assert rejects_of(result) == {
        "e-2": ("exact_dup", "e-1"),
        "e-3": ("exact_dup", "e-1"),
        "z-2": ("exact_dup", "z-1"),
    }
    assert result.counters["rejected_exact_dup"] == 3


def test_dates_do_not_make_records_different() -> None:
    df = frame(
        {"record_id": "d-1", **SERVO, "symptom": "2024-03-05 14:20 " + SERVO["symptom"]},
        {"record_id": "d-2", **SERVO, "symptom": "2024年3月9日 " + SERVO["symptom"]},
    )
    result, _ = dedup(df, DedupConfig())
    assert rejects_of(result) == {"d-2": ("exact_dup", "d-1")}


def test_persisted_hashes_are_stable() -> None:
    """Published indexes depend on these values: a change needs NORMALIZATION_VERSION bumped."""
    records = frame({"record_id": "s-1", **ZH, "alarm_codes": ["FANUC:SP9031"]})
    _, index = dedup(records.with_columns(asset=pl.lit("VMC-01")), DedupConfig())
    row = index.row(0, named=True)
    assert row["sig_key"] == "affine32/seed=1/perm=128/k=5/norm=3"
    assert (row["content_hash"], row["machine_hash"]) == GOLDEN_HASHES
    content = records.select(
        pl.concat_str([normalized_text(c) for c in CONTENT_PARTS], separator="\x1f")
    ).to_series()
    assert row["content_hash"] == string_hashes(content)[0]
    assert row["machine_hash"] == string_hashes(pl.Series(["vmc01"]))[0]
    assert (row["codes"], row["numbers"]) == (["fanuc:sp9031"], ["3000", "002"])
    assert row["signature"][:4] == GOLDEN_SIGNATURE_HEAD
