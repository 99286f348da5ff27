"""The single-frame reference stage: its index guard, counters, rejects and order
independence."""

from __future__ import annotations

import json
import random

import polars as pl
import pytest

from pipeline.core.errors import StateError
from pipeline.dedup.steps import index_nodes
from schemas.dedup import DedupConfig
from schemas.records import REJECT_SCHEMA
from tests.pipeline.dedup.oracle import dedup
from tests.pipeline.dedup.support import EN, SERVO, ZH, frame, rejects_of


def test_index_from_other_signature_settings_is_refused() -> None:
    _, index = dedup(frame({"record_id": "x", **ZH}), DedupConfig(seed=7))
    with pytest.raises(StateError, match="seed=7"):
        dedup(frame({"record_id": "y", **ZH}), DedupConfig(), index)
    with pytest.raises(StateError, match="seed=7"):  # the production step that reads it
        index_nodes(index, DedupConfig())


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
