"""Parameter counts against published model sizes."""

from __future__ import annotations

import pytest

from pipeline.memory.models import get_model
from pipeline.memory.params import param_counts

QWEN7 = get_model("qwen2.5-7b")


def test_param_counts_match_published_sizes() -> None:
    # Published totals: Qwen2.5-7B 7.62 B, Llama-3.1-8B 8.03 B, Llama-2-7B 6.74 B.
    assert param_counts(QWEN7).total == pytest.approx(7.6156e9, rel=1e-3)
    assert param_counts(get_model("llama-3.1-8b")).total == pytest.approx(8.0303e9, rel=1e-3)
    assert param_counts(get_model("llama-2-7b")).total == pytest.approx(6.7384e9, rel=1e-3)
