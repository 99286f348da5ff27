from __future__ import annotations

import polars as pl

from pipeline.core.stage import make_rejects
from pipeline.publish.ledger import file_counts, funnel, plan_refresh


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
    kept = pl.DataFrame(
        {"record_id": ["1", "2", "3"], "source_file": ["a.csv", "a.csv", "b.csv"]}
    ).with_columns(source_kind=pl.lit("workorder"))
    dropped = make_rejects(
        pl.DataFrame(
            {
                "record_id": ["4", "5"],
                "source_kind": ["workorder", "workorder"],
                "source_file": ["a.csv", "b.csv"],
                "source_row": [9, 3],
                "_reason": ["placeholder", "test_entry"],
            }
        ),
        "filter",
        pl.col("_reason"),
    )
    ingested = pl.concat([kept, dropped.select(kept.columns)])
    counts = pl.concat(
        [
            file_counts("ingest", ingested, make_rejects(pl.DataFrame(), "ingest", "x")),
            file_counts("filter", kept, dropped),
        ]
    )
    stages = funnel(counts, {"workorder": ["ingest", "filter", "dedup"]})
    assert list(stages) == ["workorder/ingest", "workorder/filter"]
    assert stages["workorder/ingest"].read == 5
    assert stages["workorder/ingest"].rejected == 0
    assert stages["workorder/filter"].kept == 3
    assert stages["workorder/filter"].by_reason == {"placeholder": 1, "test_entry": 1}
