"""Pilot slice: strata in proportion, rare strata kept, a small-model plan beside it."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from flows.cli import main
from pipeline.publish.writer import SnapshotWriter
from pipeline.stages.messages import render_messages
from pipeline.stages.tokens import count_tokens
from pipeline.training.pilot import allocate, pilot
from schemas import arrow
from schemas.manifest import Counts, Manifest, RefreshSummary
from schemas.publish import PublishConfig
from schemas.tokens import TokenizerConfig

# (tier, language, source kind, first alarm code or None, rows): a shop where FANUC work orders
# in Chinese dominate and one Heidenhain alarm-log incident in English is the rare stratum.
STRATA = [
    ("A", "zh", "workorder", "FANUC:SV0436", 120),
    ("A", "en", "workorder", "SINUMERIK:25000", 45),
    ("B", "zh", "workorder", None, 80),
    ("B", "en", "workorder", "HAAS:161", 14),
    ("C", "zh", "alarm_log", "FANUC:EX1002", 30),
    ("C", "en", "alarm_log", "HEIDENHAIN:8B40", 1),
    ("C", "zh", "workorder", "MITSUBISHI:S01-0052", 10),
]
SYMPTOM = {
    "zh": "主轴启动后报警，复位无效",
    "en": "Alarm after spindle start, reset does not clear",
}


def _corpus(root: Path) -> Path:
    rows = []
    for tier, lang, kind, code, n in STRATA:
        for i in range(n):
            rows.append({
                "record_id": f"{kind}-{tier}-{lang}-{code}-{i}", "source_kind": kind,
                "source_file": f"{kind}s/export_{lang}.csv", "source_row": i + 2, "tier": tier,
                "language": lang, "alarm_codes": [code] if code else [],
                "symptom": f"{SYMPTOM[lang]} #{i}", "diagnosis": "x" * (i % 7 + 1),
                "action": "y" * (i % 5 + 1), "prevention": None,
            })  # fmt: skip
    sft = count_tokens(
        render_messages(pl.DataFrame(rows, schema_overrides={"alarm_codes": pl.List(pl.String)})),
        TokenizerConfig(),
    )
    sft = sft.select(
        pl.col(c) if c in sft.columns else pl.lit(None).alias(c) for c in arrow.SFT.names
    )
    with SnapshotWriter(root, PublishConfig()) as writer:
        writer.write_table("sft", sft, arrow.SFT, partition_by="tier")
        manifest = Manifest(
            snapshot_id=writer.snapshot_id, created_at="2024-04-01T00:00:00+00:00",
            flow="refresh-corpus", code_version="test", config_hash="0" * 64, inputs=[],
            counts=Counts(read=sft.height, kept=sft.height, rejected=0),
            refresh=RefreshSummary(previous_snapshot=None, processed=[], carried=[], removed=[]),
            outputs=[],
        )  # fmt: skip
        writer.commit(manifest)
    return root


def test_allocate_keeps_rare_strata_and_sums_to_n() -> None:
    # ideal 24, 9, 16, 2.8, 6, 0.2, 2: the rare stratum's one row is paid by the floors
    assert allocate([120, 45, 80, 14, 30, 1, 10], 60) == [24, 9, 16, 2, 6, 1, 2]
    assert sum(allocate([500, 3, 1, 1], 10)) == 10 and allocate([500, 3, 1, 1], 10)[1:] == [1] * 3
    assert allocate([5, 4, 3], 100) == [5, 4, 3]  # more asked than there is: everything
    assert allocate([5, 4, 3], 2) == [1, 1, 0]  # fewer rows than strata: the largest first


def test_slice_strata_in_proportion(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    total = sum(n for *_, n in STRATA)
    result = pilot(corpus, tmp_path / "pilot", rows=60)
    got = pl.read_parquet(tmp_path / "pilot" / "sft", hive_partitioning=False)
    assert got.height == 60 and got["record_id"].n_unique() == 60
    family = pl.col("alarm_codes").list.first().str.split(":").list.first().fill_null("none")
    counts = {
        (t, lang, k, f): n
        for t, lang, k, f, n in got.group_by("tier", "language", "source_kind", family.alias("f"))
        .len()
        .iter_rows()
    }
    for tier, lang, kind, code, n in STRATA:
        fam = code.split(":")[0] if code else "none"
        share = 60 * n / total
        assert counts[(tier, lang, kind, fam)] >= 1  # the one-row Heidenhain stratum too
        assert abs(counts[(tier, lang, kind, fam)] - share) <= 1, (tier, lang, kind, fam)
    assert result.strata["slice"].sum() == 60
    # Reproducible: the same seed picks the same rows.
    again = pilot(corpus, tmp_path / "pilot2", rows=60)
    assert again.strata.equals(result.strata)
    got2 = pl.read_parquet(tmp_path / "pilot2" / "sft", hive_partitioning=False)
    assert sorted(got2["record_id"]) == sorted(got["record_id"])


def test_plan_and_configs_for_the_small_model(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    assert (
        main(["pilot", "--corpus", str(corpus), "--out", str(tmp_path / "p"), "--rows", "40"]) == 0
    )
    plan = json.loads((tmp_path / "p" / "plan.json").read_text(encoding="utf-8"))
    assert {s["model"] for s in plan["stages"]} == {"qwen2.5-0.5b"}
    rows = {s["corpus"]: s["stats"]["rows"] for s in plan["stages"]}
    sliced = pl.read_parquet(tmp_path / "p" / "sft", hive_partitioning=False)
    assert rows["tier_A"] == sliced.filter(pl.col("tier") == "A").height > 0
    assert rows["tier_C"] == round(0.1 * sliced.filter(pl.col("tier") == "C").height)  # share
    expert = (tmp_path / "p" / "trainer" / "llamafactory" / "sft-expert.yaml").read_text()
    assert "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct" in expert
    summary = json.loads((tmp_path / "p" / "pilot.json").read_text(encoding="utf-8"))
    assert summary["rows"]["sft"] == 40 and summary["rows"]["sft_of"] == 300


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pilot", "--corpus", str(tmp_path), "--out", str(tmp_path / "p")]) == 2
    assert "no published snapshot" in capsys.readouterr().err
    corpus = _corpus(tmp_path / "corpus")
    args = ["pilot", "--corpus", str(corpus), "--out", str(tmp_path / "p"), "--model", "gpt-9"]
    assert main(args) == 2
    assert "unknown model 'gpt-9'" in capsys.readouterr().err
