from __future__ import annotations

import polars as pl

from pipeline.ledger import file_counts, funnel, plan_refresh
from pipeline.stage import make_rejects


def test_plan_refresh_classifies_files():
    ledger = pl.DataFrame({"path": ["a.csv", "b.csv", "gone.csv"], "sha256": ["1", "2", "3"]})
    current = pl.DataFrame({"path": ["a.csv", "b.csv", "new.xlsx"], "sha256": ["1", "9", "4"]})
    plan = plan_refresh(current, ledger)
    assert (plan.new, plan.changed, plan.unchanged, plan.removed) == (
        ["new.xlsx"],
        ["b.csv"],
        ["a.csv"],
        ["gone.csv"],
    )
    assert plan.to_process == ["b.csv", "new.xlsx"]
    assert plan_refresh(current, None).new == ["a.csv", "b.csv", "new.xlsx"]


def test_counts_per_file_sum_into_a_funnel():
    kept = pl.DataFrame({"record_id": ["1", "2", "3"], "source_file": ["a.csv", "a.csv", "b.csv"]})
    dropped = make_rejects(
        pl.DataFrame(
            {"record_id": ["4", "5"], "source_file": ["a.csv", "b.csv"], "source_row": [9, 3]}
        ),
        "filter",
        pl.Series(["placeholder", "test_entry"]),
    )
    counts = pl.concat(
        [
            file_counts(
                "ingest",
                pl.concat([kept, dropped.select("record_id", "source_file")]),
                make_rejects(pl.DataFrame(), "ingest", "malformed_row"),
            ),
            file_counts("filter", kept, dropped),
        ]
    )
    stages = funnel(counts, ["ingest", "filter", "dedup"])
    assert list(stages) == ["ingest", "filter"]
    assert stages["ingest"].read == 5 and stages["ingest"].rejected == 0
    assert stages["filter"].kept == 3
    assert stages["filter"].by_reason == {"placeholder": 1, "test_entry": 1}
