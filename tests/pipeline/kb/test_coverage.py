"""Knowledge-base coverage per code family: hand-made tables with hand-counted figures, and the
manifest and report of a refresh of sample_data checked against its published tables."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from pipeline.funnels.refresh import Sources, refresh
from pipeline.kb.coverage import (
    CodeTally,
    kb_coverage,
    rejected_code_counts,
    sample_code_counts,
)
from schemas.config import PipelineConfig
from schemas.manifest import FamilyCoverage, KbCoverage

# A FANUC 0i-F entry in Chinese and English (one code), a spindle alarm no record cites, and
# one SINUMERIK 840D entry.
KB = pl.DataFrame(
    {
        "family": ["FANUC", "FANUC", "FANUC", "SINUMERIK"],
        "code": ["FANUC:SV0401", "FANUC:SV0401", "FANUC:SP9012", "SINUMERIK:25000"],
        "language": ["zh", "en", "zh", "en"],
    }
)
INCIDENTS = pl.DataFrame(
    {
        "incident_id": ["i1", "i2", "i3", "i4", "i5"],
        "family": ["FANUC", "FANUC", "FANUC", "SINUMERIK", "SINUMERIK"],
        "codes": [
            ["FANUC:SV0436"],  # SV0436 OVC soft thermal: no entry, twice
            ["FANUC:SV0436"],
            ["FANUC:SV0401"],
            ["SINUMERIK:25000", "SINUMERIK:25050"],  # one of its codes has an entry
            ["SINUMERIK:700016"],  # PLC user alarm: no entry
        ],
    }
)


def _sft(kinds: list[str], codes: list[list[str]]) -> pl.DataFrame:
    return pl.DataFrame(
        {"source_kind": kinds, "alarm_codes": codes},
        schema={"source_kind": pl.String, "alarm_codes": pl.List(pl.String)},
    )


SFT = _sft(
    ["workorder", "workorder", "workorder", "alarm_log"],
    [
        ["FANUC:SV0436"],
        ["FANUC:SV0436", "FANUC:SV0436"],  # one work order citing it twice counts once
        ["HAAS:108"],
        ["FANUC:SV0401"],  # an incident's sample: counted by the incidents table, not here
    ],
)


def _payload(codes: list[str] | None) -> str:
    record = {"record_id": "r", "symptom": "SV0436 过热 Z轴"}
    return json.dumps(record | ({"alarm_codes": codes} if codes is not None else {}))


REJECTS = pl.DataFrame(
    {
        "source_kind": ["workorder", "workorder", "workorder", "alarm_log"],
        "stage": ["dedup", "ingest", "quarantine", "incidents"],
        "reason": ["near_dup", "malformed_row", "binary", "merged_into_incident"],
        "payload": [
            _payload(["FANUC:SV0436"]),  # rejected, but a work order read: counted
            _payload(None),  # rejected before normalization: no codes
            None,
            _payload(["FANUC:SV0436"]),  # an alarm raise: incidents count those
        ],
    }
)


def _workorder_codes() -> pl.DataFrame:
    tally = CodeTally()
    tally.add(sample_code_counts(SFT))
    assert list(tally.rejects([REJECTS])) == [REJECTS]  # the chunks pass as they are
    return tally.counts


def _family(cov: KbCoverage, name: str) -> FamilyCoverage:
    return next(f for f in cov.families if f.family == name)


def test_a_code_seen_in_work_orders_and_incidents_without_an_entry_is_missing() -> None:
    cov = kb_coverage(KB, INCIDENTS, _workorder_codes())
    fanuc = _family(cov, "FANUC")
    assert (fanuc.kb_codes, fanuc.seen, fanuc.covered, fanuc.missing, fanuc.never_seen) == (
        2, 2, 1, 1, 1,
    )  # fmt: skip
    assert (fanuc.incidents, fanuc.incidents_without_entry) == (3, 2)
    [sv0436] = fanuc.top_missing
    assert (sv0436.code, sv0436.incidents, sv0436.workorders, sv0436.seen) == (
        "FANUC:SV0436", 2, 3, 5,
    )  # fmt: skip
    assert fanuc.never_seen_codes == ["FANUC:SP9012"]


def test_families_are_kept_apart_and_an_incident_with_one_entry_has_an_entry() -> None:
    cov = kb_coverage(KB, INCIDENTS, _workorder_codes())
    sinumerik = _family(cov, "SINUMERIK")
    assert (sinumerik.seen, sinumerik.covered, sinumerik.missing, sinumerik.never_seen) == (
        3, 1, 2, 0,
    )  # fmt: skip
    assert (sinumerik.incidents, sinumerik.incidents_without_entry) == (2, 1)
    assert [m.code for m in sinumerik.top_missing] == ["SINUMERIK:25050", "SINUMERIK:700016"]
    haas = _family(cov, "HAAS")  # cited by a work order only, no Haas manual at all
    assert (haas.kb_codes, haas.seen, haas.missing, haas.incidents) == (0, 1, 1, 0)
    assert [(m.code, m.workorders) for m in haas.top_missing] == [("HAAS:108", 1)]
    # most missing codes first, then by name
    assert [f.family for f in cov.families] == ["SINUMERIK", "FANUC", "HAAS"]


def test_lists_hold_top_n_most_seen_first_and_counts_stay_whole() -> None:
    cov = kb_coverage(KB, INCIDENTS, _workorder_codes(), top_n=1)
    sinumerik = _family(cov, "SINUMERIK")
    assert [m.code for m in sinumerik.top_missing] == ["SINUMERIK:25050"]  # tie: code order
    assert sinumerik.missing == 2 and cov.top_n == 1


def test_chunk_by_chunk_counts_equal_the_whole() -> None:
    tally = CodeTally()
    for chunk in (SFT.head(1), SFT.slice(1, 2), SFT.tail(1)):
        tally.add(sample_code_counts(chunk))
    assert tally.counts.sort("code").equals(sample_code_counts(SFT).sort("code"))
    rejected = rejected_code_counts(REJECTS)
    assert rejected.rows() == [("FANUC:SV0436", 1)]


def test_no_knowledge_base_makes_every_code_seen_missing() -> None:
    cov = kb_coverage(None, INCIDENTS, _workorder_codes())
    assert all(f.covered == 0 and f.missing == f.seen for f in cov.families)
    assert _family(cov, "FANUC").incidents_without_entry == 3
    assert kb_coverage(None, None, sample_code_counts(SFT.clear())).families == []


def test_figures_that_do_not_add_up_are_refused() -> None:
    with pytest.raises(ValidationError, match="does not add up"):
        FamilyCoverage(
            family="FANUC", kb_codes=2, seen=3, covered=1, missing=1, never_seen=1,
            incidents=0, incidents_without_entry=0, top_missing=[], never_seen_codes=[],
        )  # fmt: skip


def _published(snapshot: Path, table: str) -> pl.DataFrame:
    return pl.read_parquet(snapshot / table / "**" / "*.parquet", hive_partitioning=False)


def test_refresh_of_sample_data_publishes_coverage_that_matches_its_tables(
    sample_data: Path, tmp_path: Path
) -> None:
    published = refresh(
        "refresh-corpus", Sources.everything(sample_data), tmp_path, PipelineConfig()
    )
    cov = published.manifest.kb_coverage
    assert cov is not None
    kb = set(_published(published.path, "fault_codes")["code"])
    incidents = _published(published.path, "incidents")
    sft = _published(published.path, "sft").filter(pl.col("source_kind") == "workorder")
    rejects = _published(published.path, "rejects").filter(pl.col("source_kind") == "workorder")
    seen = set(incidents["codes"].explode().drop_nulls()) | set(
        sft["alarm_codes"].explode().drop_nulls()
    )
    payloads = [json.loads(p) for p in rejects["payload"].drop_nulls()]
    seen |= {c for p in payloads for c in p.get("alarm_codes") or []}
    for f in cov.families:
        mine = {c for c in seen if c.startswith(f"{f.family}:")}
        assert f.seen == len(mine) and f.missing + f.covered == f.seen
        entries = {c for c in kb if c.startswith(f"{f.family}:")}
        assert f.missing == len(mine - kb) and f.kb_codes == len(entries)
        assert f.never_seen == len(entries - seen) and f.covered + f.never_seen == f.kb_codes
        without = incidents.filter(pl.col("family") == f.family, ~pl.col("fault_code_entry"))
        assert f.incidents_without_entry == without.height
    assert sum(f.seen for f in cov.families) == len(seen)
    fanuc = next(f for f in cov.families if f.family == "FANUC")
    assert {"FANUC:OT0500", "FANUC:PS0010"} <= {m.code for m in fanuc.top_missing}
    manifest = json.loads((published.path / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["kb_coverage"] == cov.model_dump(mode="json")
    report = (published.path / "report.html").read_text(encoding="utf-8")
    assert '<section id="kb_coverage"><h2>Knowledge-base coverage</h2>' in report
    assert "<td>HAAS:108</td>" in report  # Haas work orders, no Haas manual in sample_data
