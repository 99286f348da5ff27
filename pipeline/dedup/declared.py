"""The dedup stage's steps, declared: per shard, per partition of the bucket entries, per
source of nodes, and per shard again (`pipeline.dedup.sharded` plans the calls; the work-order
funnel runs it as its `dedup` step)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pipeline.dedup import steps
from pipeline.execution.stage_files import read_frames
from pipeline.execution.step import Frames, Step
from schemas.config import PipelineConfig


def _verify(cfg: PipelineConfig, f: Frames, p: dict[str, Any]) -> Any:
    groups: Iterator = (
        (g["sources"], read_frames(g["imported"]), read_frames(g["imported_signatures"]))
        for g in p["groups"]
    )
    return steps.verify_pairs(
        f["nodes"], f["signatures"], f["ids"], f["pairs"], groups, p["starts"], cfg.dedup
    )


def _apply(cfg: PipelineConfig, f: Frames, p: dict[str, Any]) -> Any:
    return steps.apply_decisions(
        f["records"],
        f["features"],
        f["nodes"],
        f["signatures"],
        f["foreign"],
        f["foreign_signatures"],
        f["decisions"],
        cfg.dedup,
        p["counters"],
    )


NODES = Step(
    "dedup.nodes",
    "shard",
    lambda cfg, f, p: steps.shard_nodes(f["records"], cfg.dedup),
    inputs=("records",),
    doc="node keys, signatures and features of one shard's records",
)
INDEX = Step(
    "dedup.index",
    "shard",
    lambda cfg, f, p: steps.index_nodes(f["index"], cfg.dedup),
    inputs=("index",),
    doc="nodes of one part of the published dedup index",
)
BUCKETS = Step(
    "dedup.buckets",
    "shard",
    lambda cfg, f, p: steps.node_buckets(
        f["nodes"], f["signatures"], f["ids"], p["bits"], p["parts"], cfg.dedup
    ),
    inputs=("nodes", "signatures", "ids"),
    doc="LSH bucket entries of one source of nodes, by partition",
)
PAIRS = Step(
    "dedup.pairs",
    "partition",
    lambda cfg, f, p: steps.partition_pairs(
        f["buckets"], p["bits"], p["starts"], p["n_new"], cfg.dedup
    ),
    inputs=("buckets",),
    doc="candidate pairs of one partition of the bucket entries, routed to their shards",
)
EXPORT = Step(
    "dedup.export",
    "shard",
    lambda cfg, f, p: steps.export_nodes(
        f["nodes"], f["signatures"], f["ids"], f["requests"], cfg.dedup
    ),
    inputs=("nodes", "signatures", "ids", "requests"),
    doc="the rows other shards asked one source of nodes for",
)
VERIFY = Step(
    "dedup.verify",
    "shard",
    _verify,
    inputs=("nodes", "signatures", "ids", "pairs"),
    doc="verified edges among one shard's candidate pairs (the CNC rules)",
)
APPLY = Step(
    "dedup.apply",
    "shard",
    _apply,
    inputs=("records", "features", "nodes", "signatures", "foreign", "foreign_signatures"),
    stages=("dedup",),
    doc="one shard's kept records, duplicate rejects and index rows",
)

STEPS = (NODES, INDEX, BUCKETS, PAIRS, EXPORT, VERIFY, APPLY)
