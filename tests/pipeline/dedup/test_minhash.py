"""Dedup stage: exact and near duplicates, alarm-code guard, kept member, incremental index."""

from __future__ import annotations

import json
import random

import numpy as np
import polars as pl
import pytest
from datasketch import LeanMinHash, MinHash
from pydantic import ValidationError

import pipeline.dedup.minhash as dedup_module
from pipeline.dedup.minhash import (
    CONTENT_PARTS,
    SHINGLE_ADD,
    SHINGLE_MULT,
    dedup,
    normalized_text,
    shingle_hashes,
    signatures,
    string_hashes,
)
from schemas.dedup import DedupConfig, index_schema
from schemas.records import REJECT_SCHEMA

ZH = {
    "symptom": "加工中心主轴在3000转以上运转时出现明显异响，主轴箱温度半小时内升高到65度，"
    "加工表面出现振纹，操作工反映换刀后声音更大。",
    "cause": "拆检发现主轴前端角接触轴承滚道磨损，润滑脂干涸结块，预紧力下降导致径向跳动"
    "超过0.02毫米。",
    "action": "更换主轴前端一对角接触轴承，清洗轴承座并重新加注高速润滑脂，按规定扭矩调整"
    "预紧螺母，空运转两小时后温升正常。",
    "prevention": "每季度检测主轴温升和振动，每年更换一次主轴润滑脂，记录跳动值变化趋势。",
}
EN = {
    "symptom": "Spindle makes a grinding noise above 3000 rpm and the headstock reaches 65 C "
    "within thirty minutes; chatter marks appear on the finished bore.",
    "cause": "Front angular contact bearings worn, grease dried out, preload lost so radial "
    "runout exceeded 0.02 mm.",
    "action": "Replaced the front bearing pair, cleaned the housing, repacked with high speed "
    "grease and set the preload nut to the specified torque; two hour run-in was normal.",
    "prevention": "Check spindle temperature rise and vibration every quarter and regrease the "
    "spindle once a year.",
}
SERVO = {
    "symptom": "X轴移动时机床突然停机，系统显示伺服报警，复位后可以短时间运行但很快再次报警。",
    "cause": "X轴伺服电机编码器反馈线缆在拖链内被反复弯折，屏蔽层破损导致反馈信号中断。",
    "action": "更换X轴编码器反馈线缆并重新固定走线，检查接地，试运行八小时无报警。",
    "prevention": "定期检查拖链内线缆的磨损情况，发现外皮破损及时更换。",
}

GOLDEN_HASHES = (18440877287916319196, 894332176025947715)
GOLDEN_SIGNATURE_HEAD = [13780250, 11727999, 135565651, 13177933]


def frame(*records: dict) -> pl.DataFrame:
    """Normalized-stage records; `records` give record_id, parts and alarm_codes."""
    rows = []
    for i, r in enumerate(records):
        rows.append(
            {
                "record_id": r["record_id"],
                "source_kind": "workorder",
                "source_file": "orders/2024.csv",
                "source_row": i + 2,
                "symptom": r.get("symptom"),
                "cause": r.get("cause"),
                "action": r.get("action"),
                "prevention": r.get("prevention"),
                "remarks": r.get("remarks"),
                "language": r.get("language", "zh"),
                "alarm_codes": r.get("alarm_codes", []),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "record_id": pl.String,
            "source_kind": pl.String,
            "source_file": pl.String,
            "source_row": pl.Int64,
            "symptom": pl.String,
            "cause": pl.String,
            "action": pl.String,
            "prevention": pl.String,
            "remarks": pl.String,
            "language": pl.String,
            "alarm_codes": pl.List(pl.String),
        },
    )


def rejects_of(result) -> dict[str, tuple[str, str]]:
    return {
        r["record_id"]: (r["reason"], r["duplicate_of"])
        for r in result.rejected.select("record_id", "reason", "duplicate_of").to_dicts()
    }


def test_chinese_near_duplicates_are_found() -> None:
    rewritten = {
        **ZH,
        "symptom": ZH["symptom"].replace("明显异响", "异响").replace("操作工", "操作人员"),
        "action": ZH["action"].replace("空运转两小时后", "空转两个小时以后"),
    }
    df = frame(
        {"record_id": "wo-001", **ZH},
        {"record_id": "wo-002", **rewritten},
        {"record_id": "wo-003", **SERVO, "alarm_codes": ["FANUC:SV0401"]},
    )
    result, index = dedup(df, DedupConfig())
    assert rejects_of(result) == {"wo-002": ("near_dup", "wo-001")}
    assert result.kept.get_column("record_id").to_list() == ["wo-001", "wo-003"]
    assert result.counters["rejected_near_dup"] == 1
    assert sorted(index.get_column("record_id").to_list()) == ["wo-001", "wo-003"]


def test_english_near_duplicates_are_found() -> None:
    retyped = {
        **EN,
        "symptom": EN["symptom"].replace("grinding", "rumbling").replace("thirty", "twenty"),
        "cause": EN["cause"].upper(),
        "action": EN["action"].replace("specified", "specified."),
    }
    unrelated = {
        "symptom": "Coolant pump runs but no flow at the nozzle; low coolant alarm on the panel.",
        "cause": "Suction strainer clogged with chips.",
        "action": "Cleaned the strainer and the tank, refilled coolant.",
        "prevention": "Clean the chip basket weekly.",
    }
    df = frame(
        {"record_id": "en-9", **retyped, "language": "en"},
        {"record_id": "en-1", **EN, "language": "en"},
        {"record_id": "en-5", **unrelated, "language": "en"},
    )
    result, _ = dedup(df, DedupConfig())
    # equally complete and as long: the smaller record_id is kept
    assert rejects_of(result) == {"en-9": ("near_dup", "en-1")}


def test_records_differing_only_in_alarm_code_are_kept_apart() -> None:
    in_text = [
        {
            "record_id": f"al-{code}",
            **SERVO,
            "symptom": f"X轴移动时机床突然停机，系统显示伺服报警 SV{code}，复位后可以短时间运行。",
            "alarm_codes": [f"FANUC:SV{code}"],
        }
        for code in ("0401", "0436")
    ]
    column_only = [
        {"record_id": "col-a", **EN, "alarm_codes": ["SIEMENS:25000"], "language": "en"},
        {"record_id": "col-b", **EN, "alarm_codes": ["SIEMENS:25201"], "language": "en"},
    ]
    # the normalizer did not recognize these codes: the numbers in the text keep them apart
    # (they differ in two digits; one re-typed digit would be a slip, see the test below)
    bare = [
        {
            "record_id": f"bare-{code}",
            "symptom": f"After a power cycle, Z axis homes to the wrong spot, {code} displayed.",
            "action": "Re-set the reference point and checked the deceleration dog.",
            "language": "en",
        }
        for code in ("25080", "25201")
    ]
    result, _ = dedup(frame(*in_text, *column_only, *bare), DedupConfig())
    assert result.rejected.height == 0
    assert result.counters["kept"] == 6


def test_a_retyping_slip_in_a_number_is_weighed_not_a_veto() -> None:
    """One dropped, doubled, swapped or mistyped digit in a number of otherwise the same text
    is a re-typed copy; a recognized alarm code with another digit is another alarm."""
    text = "After a power cycle, Z axis homes to the wrong spot, {} displayed on the screen."
    action = "Re-set the reference point and checked the deceleration dog."
    slips = [
        {"record_id": f"s-{code}", "symptom": text.format(code), "action": action}
        for code in ("25080", "2508", "25800", "25090")
    ]
    two_slips = {"record_id": "s-two", "symptom": text.format("25080 / 1203"), "action": action}
    other = {"record_id": "s-x", "symptom": text.format("25080 / 1230"), "action": action}
    alarms = [
        {**SERVO, "record_id": f"a-{c}", "alarm_codes": [f"FANUC:SV{c}"]} for c in ("0410", "0411")
    ]
    result, _ = dedup(frame(*slips, two_slips, other, *alarms), DedupConfig())
    assert rejects_of(result) == {
        "s-2508": ("near_dup", "s-25080"),
        "s-25800": ("near_dup", "s-25080"),
        "s-25090": ("near_dup", "s-25080"),
        "s-x": ("near_dup", "s-two"),
    }
    assert result.counters["slip_pairs"] >= 3


def test_records_on_different_machines_are_kept_apart() -> None:
    df = frame(
        {"record_id": "m-1", **SERVO},
        {"record_id": "m-2", **SERVO},
        {"record_id": "m-3", **SERVO},
        {"record_id": "m-4", **SERVO, "remarks": "no machine recorded"},
    ).with_columns(
        asset=pl.Series(["VMC-01", "VMC-02", "VMC-01", None]),
        machine_model=pl.Series(["VMC850", "VMC850", "VMC850", None]),
    )
    result, _ = dedup(df, DedupConfig())
    assert rejects_of(result) == {"m-3": ("exact_dup", "m-1")}
    kept_apart, _ = dedup(df, DedupConfig(machine_columns=()))
    assert kept_apart.counters["kept"] == 1


def test_an_extra_verification_number_does_not_split_a_duplicate() -> None:
    df = frame(
        {"record_id": "t-1", **SERVO, "action": SERVO["action"] + "试切120件尺寸合格。"},
        {"record_id": "t-2", **SERVO},
    )
    result, _ = dedup(df, DedupConfig())
    assert rejects_of(result) == {"t-2": ("near_dup", "t-1")}


def test_dates_do_not_make_records_different() -> None:
    df = frame(
        {"record_id": "d-1", **SERVO, "symptom": "2024-03-05 14:20 " + SERVO["symptom"]},
        {"record_id": "d-2", **SERVO, "symptom": "2024年3月9日 " + SERVO["symptom"]},
    )
    result, _ = dedup(df, DedupConfig())
    assert rejects_of(result) == {"d-2": ("exact_dup", "d-1")}


def test_most_complete_member_is_kept() -> None:
    no_prevention = {**ZH, "prevention": None}
    vague_cause = {**ZH, "cause": "轴承磨损，润滑不足，预紧力下降导致径向跳动超过0.02毫米。"}
    df = frame(
        {"record_id": "a-1", **no_prevention, "alarm_codes": ["FANUC:SP9031"]},
        {"record_id": "a-2", **vague_cause, "alarm_codes": ["FANUC:SP9031"]},
        {"record_id": "a-3", **ZH},  # complete, but no alarm code
        {"record_id": "a-4", **ZH, "alarm_codes": ["FANUC:SP9031"]},  # complete, with code
    )
    result, _ = dedup(df, DedupConfig())
    assert result.kept.get_column("record_id").to_list() == ["a-4"]
    assert rejects_of(result) == {
        "a-1": ("near_dup", "a-4"),
        "a-2": ("near_dup", "a-4"),
        "a-3": ("exact_dup", "a-4"),
    }


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


def test_new_records_are_checked_against_a_persisted_index(tmp_path) -> None:
    cfg = DedupConfig()
    old_result, old_index = dedup(
        frame({"record_id": "old-1", **ZH, "prevention": None}, {"record_id": "old-2", **EN}),
        cfg,
    )
    assert old_result.rejected.height == 0
    path = tmp_path / "dedup_index.parquet"
    old_index.write_parquet(path)
    index = pl.read_parquet(path)
    assert index.schema == pl.Schema(index_schema(cfg.num_perm))

    new = frame(
        # more complete than old-1, still rejected: published records are never replaced
        {"record_id": "new-1", **ZH, "symptom": ZH["symptom"].replace("操作工", "操作人员")},
        {"record_id": "new-2", **{k: v.lower() for k, v in EN.items()}},
        {"record_id": "new-3", **SERVO, "alarm_codes": ["FANUC:SV0401"]},
        {"record_id": "new-4", **SERVO, "alarm_codes": ["FANUC:SV0401"], "remarks": "急"},
    )
    result, new_index = dedup(new, cfg, index)
    assert rejects_of(result) == {
        "new-1": ("near_dup", "old-1"),
        "new-2": ("exact_dup", "old-2"),
        "new-4": ("exact_dup", "new-3"),
    }
    assert new_index.get_column("record_id").to_list() == ["new-3"]


def test_index_from_other_signature_settings_is_refused() -> None:
    _, index = dedup(frame({"record_id": "x", **ZH}), DedupConfig(seed=7))
    with pytest.raises(ValueError, match="seed=7"):
        dedup(frame({"record_id": "y", **ZH}), DedupConfig(), index)


@pytest.mark.parametrize("scheme", ["affine32", "legacy"])
def test_signatures_equal_datasketch(scheme: str) -> None:
    cfg = DedupConfig(scheme=scheme, num_perm=64, bands=8, rows=8, moderate_bands=16, seed=3)
    texts = pl.Series(["主轴异响温升65度", "spindlenoise", "sv0401", "ab"])
    hashes, offsets = shingle_hashes(texts, cfg.shingle_size)
    ours = signatures(hashes, offsets, cfg)
    per_text = [hashes[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))]
    reference = MinHash.bulk(per_text, num_perm=64, seed=3, scheme=scheme, hashfunc=lambda h: h)
    for row, m in zip(ours, reference, strict=True):
        assert np.array_equal(row, LeanMinHash(m).hashvalues)


def test_shingle_hashes_follow_their_definition() -> None:
    def reference(shingle: str, k: int) -> int:
        codes = [ord(ch) for ch in shingle] + [0] * (k - len(shingle))
        total = int(SHINGLE_ADD) + sum(
            c * int(m) for c, m in zip(codes, SHINGLE_MULT, strict=False)
        )
        return (total % (1 << 64)) >> 32

    texts = ["主轴异响温升", "sv0401", "ab"]
    hashes, offsets = shingle_hashes(pl.Series(texts), 5)
    expected = [reference(t[i : i + 5], 5) for t in texts for i in range(max(len(t) - 4, 1))]
    assert hashes.tolist() == expected
    assert offsets.tolist() == [0, 2, 4, 5]


def test_string_hashes_follow_their_definition() -> None:
    mask, mix = (1 << 64) - 1, 0x9E3779B97F4A7C15

    def fmix64(x: int) -> int:
        x ^= x >> 33
        x = (x * 0xFF51AFD7ED558CCD) & mask
        x ^= x >> 33
        x = (x * 0xC4CEB9FE1A85EC53) & mask
        return x ^ (x >> 33)

    def reference(text: str) -> int:
        total = 0
        for place, at in enumerate(range(0, len(text), 8)):
            codes = [ord(ch) for ch in text[at : at + 8]] + [0] * 8
            window = int(SHINGLE_ADD) + sum(
                c * int(m) for c, m in zip(codes[:8], SHINGLE_MULT[:8], strict=True)
            )
            total += fmix64((window & mask) ^ ((place * mix) & mask))
        return fmix64((total & mask) ^ ((len(text) * mix) & mask))

    texts = ["主轴异响温升65度\x1f轴承磨损", "sv0401", "", "spindle" * 3, "spindle" * 3 + "s"]
    hashes = string_hashes(pl.Series(texts)).tolist()
    assert hashes == [reference(t) for t in texts]
    assert hashes[2] == 0 and len(set(hashes)) == len(texts)


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


def test_counts_add_up_and_rejects_keep_the_payload() -> None:
    rng = random.Random(5)
    base = [
        {"record_id": "c-zh", **ZH},
        {"record_id": "c-en", **EN, "language": "en"},
        {"record_id": "c-sv", **SERVO},
        {"record_id": "c-empty", "remarks": "只有备注"},
        {"record_id": "c-empty2", "remarks": "只有备注"},
    ]
    copies = [{**rng.choice(base[:3]), "record_id": f"c-copy-{i}"} for i in range(6)]
    result, _ = dedup(frame(*base, *copies), DedupConfig())
    c = result.counters
    assert c["read"] == 11 == c["kept"] + c["rejected"]
    assert c["kept"] == 5 and c["rejected_exact_dup"] == 6 and c["empty_content"] == 2
    assert result.rejected.schema == pl.Schema(REJECT_SCHEMA)
    first = result.rejected.row(0, named=True)
    assert first["stage"] == "dedup"
    payload = json.loads(first["payload"])
    assert payload["record_id"] == first["record_id"] and payload["symptom"]


def test_result_does_not_depend_on_input_order() -> None:
    records = [
        {"record_id": "o-1", **ZH, "prevention": None},
        {"record_id": "o-2", **ZH},
        {"record_id": "o-3", **EN},
        {"record_id": "o-4", **{k: v.lower() for k, v in EN.items()}},
        {"record_id": "o-5", **SERVO},
    ]
    first, first_index = dedup(frame(*records), DedupConfig(batch_size=2))
    second, _ = dedup(frame(*reversed(records)), DedupConfig())
    # one record per batch: the exact duplicate o-3 is found in an earlier batch
    single, single_index = dedup(
        frame(*records, {"record_id": "o-6", **EN}), DedupConfig(batch_size=1)
    )
    assert rejects_of(first) == rejects_of(second)
    assert rejects_of(first) == {"o-1": ("near_dup", "o-2"), "o-4": ("exact_dup", "o-3")}
    assert rejects_of(single) == {**rejects_of(first), "o-6": ("exact_dup", "o-3")}
    assert single_index.equals(first_index)


def test_bands_must_fit_the_signature() -> None:
    with pytest.raises(ValidationError, match="exceeds num_perm"):
        DedupConfig(num_perm=64, bands=14, rows=8)


def test_candidates_are_the_same_machine_pairs_sharing_a_band() -> None:
    """Against a brute force over band hashes: every pair on one machine sharing a text band
    (or, both naming a machine, a moderate band) is a candidate; no pair on two machines is."""
    rng = np.random.default_rng(5)
    cfg = DedupConfig(num_perm=32, bands=4, rows=4, moderate_bands=4, moderate_rows=2)
    base = rng.integers(0, 2**32, (40, 32), dtype=np.uint32)
    sig = base[rng.integers(0, 40, 300)]  # copies of 40 texts, then some values changed
    changed = rng.random(sig.shape) < 0.3
    sig[changed] = rng.integers(0, 2**32, int(changed.sum()), dtype=np.uint32)
    machine = rng.choice(np.array([0, 11, 22, 33], dtype=np.uint64), 300)
    u, v = dedup_module._candidates(sig, machine, len(sig), cfg)
    found = set(zip(u.tolist(), v.tolist(), strict=True))
    assert all(machine[a] == machine[b] and a < b for a, b in found)
    expected = set()
    for bands, rows, named_only in ((4, 4, False), (4, 2, True)):
        for band in range(bands):
            block = sig[:, band * rows : (band + 1) * rows]
            for a in range(len(sig)):
                for b in range(a + 1, len(sig)):
                    same = machine[a] == machine[b] and (machine[a] != 0 or not named_only)
                    if same and np.array_equal(block[a], block[b]):
                        expected.add((a, b))
    assert len(expected) > 100
    assert expected <= found
