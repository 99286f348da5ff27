"""Evaluation set, sample quality: each hand-written record reaches its labelled tier or
reject reason through the real normalize, filter, dedup, structure and tier stages."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipeline.stages.filters import apply_filters
from pipeline.stages.normalize import normalize
from pipeline.stages.structure import structure
from pipeline.stages.tiers import assign_tiers
from schemas.dedup import DedupConfig
from schemas.filters import FilterConfig
from schemas.normalize import NormalizeConfig
from schemas.samples import StructureConfig, TierConfig
from tests.pipeline.dedup.oracle import dedup

from .test_eval_duplicates import ingested

HERE = Path(__file__).parent
RECORDS = yaml.safe_load((HERE / "quality.yaml").read_text(encoding="utf-8"))["records"]


@pytest.fixture(scope="module")
def outcome() -> dict[str, tuple[str, list[str]]]:
    """record_id -> (tier or "reject:<reason>", tier reasons)."""
    frame = normalize(ingested(RECORDS), NormalizeConfig()).kept
    stages = [apply_filters(frame, FilterConfig())]
    deduped, _ = dedup(stages[-1].kept, DedupConfig())
    stages.append(deduped)
    stages.append(structure(stages[-1].kept, StructureConfig()))
    stages.append(assign_tiers(stages[-1].kept, TierConfig()))
    got = {
        r["record_id"]: (f"reject:{r['reason']}", [])
        for s in stages
        for r in s.rejected.select("record_id", "reason").to_dicts()
    }
    for r in stages[-1].kept.select("record_id", "tier", "tier_reasons").to_dicts():
        got[r["record_id"]] = (r["tier"], r["tier_reasons"])
    return got


@pytest.mark.parametrize("record", RECORDS, ids=[r["id"] for r in RECORDS])
def test_quality_case_is_decided_as_labelled(record: dict, outcome: dict) -> None:
    decision, reasons = outcome[record["id"]]
    assert decision == record["expect"], reasons
    if "reason" in record:
        assert record["reason"] in reasons
