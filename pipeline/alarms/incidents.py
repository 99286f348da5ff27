"""Alarm events → incidents: cascades and bursts on one machine merge; work orders link.

Raises on one machine are linked, and each group of linked raises is one incident carrying
every code of its raises:

- a cascade: a raise within `cascade_window_s` of the previous raise on the machine, whatever
  its code (a drive fault and the axis alarm it causes, an emergency stop and the alarms
  behind it are raised within a controller cycle; the log shows them seconds apart at most);
- a burst: a raise within `burst_gap_s` of the previous raise with the same key (machine and
  alarm code, or machine alone with `merge_by="machine"`);
- a continuation, on a log that reports condition state (MTConnect): a raise of a code still
  active (no clear of the code or of its whole data item since its previous raise, an
  `Unavailable` gap being no clear), however long ago, or raised within `burst_gap_s` of its
  clear (the gap counts from the end of its previous activity, not from its raise).

The grouping reads only times, machines and codes, never a list of code pairs. An incident's
`cleared_at` is when the last of its codes cleared (null while one has not), `acknowledged_at`
when the first was acknowledged: per code, the first such event (of the code, or an MTConnect
clear of its whole data item) at or after the code's last raise in the incident and before the
code is raised again.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import xxhash

from pipeline.core.stage import StageResult, empty_rejects, make_rejects, stage_result
from schemas.alarm_logs import INCIDENT_SCHEMA, IncidentConfig

_KEY = "_key"
_ORDER = ("occurred_at", "source_file", "source_row")
_RAISE = ("alarm_code", "channel", "occurred_at")


def _incident_ids(machines: pl.Series, keys: pl.Series, first_ids: pl.Series) -> pl.Series:
    ids = [
        xxhash.xxh3_64_hexdigest(f"incident\x1f{m}\x1f{k}\x1f{r}".encode())
        for m, k, r in zip(machines.to_list(), keys.to_list(), first_ids.to_list(), strict=True)
    ]
    return pl.Series("record_id", ids, dtype=pl.String)


def _seconds(s: float) -> pl.Expr:
    return pl.duration(microseconds=int(s * 1_000_000))


def _continues(raises: pl.DataFrame, events: pl.DataFrame, gap: pl.Expr) -> pl.Expr:
    """Per raise (sorted by machine and time): an MTConnect condition raised again within `gap`
    of the end of its previous activity (the first clear of its code, or of its whole data
    item, at or after its previous raise), or while still active (not cleared since)."""
    clears = events.filter(pl.col("event") == "cleared")
    by_code = clears.filter(pl.col("alarm_code").is_not_null()).select(
        "machine", "alarm_code", pl.col("occurred_at").alias("_code_clear")
    )
    by_item = clears.filter(pl.col("alarm_code").is_null(), pl.col("channel").is_not_null())
    by_item = by_item.select("machine", "channel", pl.col("occurred_at").alias("_item_clear"))
    previous = pl.col("occurred_at").shift(1).over("machine", "alarm_code", "channel")
    found = raises.with_row_index("_r").with_columns(_prev=previous)
    for right, by in ((by_code, "alarm_code"), (by_item, "channel")):
        found = found.sort("_prev", nulls_last=True).join_asof(
            right.drop_nulls(by).sort(right.columns[-1]),
            left_on="_prev",
            right_on=right.columns[-1],
            by=["machine", by],
            strategy="forward",
            check_sortedness=False,  # sorted on the join keys above; by-groups follow
        )
    ended = pl.min_horizontal("_code_clear", "_item_clear")
    flags = found.sort("_r").select(
        pl.col("channel").is_not_null()
        & pl.col("_prev").is_not_null()
        & (ended.is_null() | (pl.col("occurred_at") - ended <= gap))
    )
    return pl.lit(flags.to_series().fill_null(False))


def _episodes(raises: pl.DataFrame, events: pl.DataFrame, cfg: IncidentConfig) -> pl.Series:
    """The incident of each raise (sorted by machine and time): the smallest row number among
    the raises linked to it, each link joining a raise to the previous one of its group."""
    gap = _seconds(cfg.burst_gap_s)
    linked = {
        ("machine",): pl.col("occurred_at").diff() <= _seconds(cfg.cascade_window_s),
        ("machine", _KEY): pl.col("occurred_at").diff() <= gap,
        ("machine", "alarm_code", "channel"): pl.col("_continues"),
    }
    rows = raises.with_columns(
        _continues=_continues(raises, events, gap), _i=pl.int_range(pl.len(), dtype=pl.Int64)
    )
    edges = pl.concat(
        rows.select(
            pl.col("_i").alias("u"),
            pl.col("_i").shift(1).over(*by).alias("v"),
            link.over(*by).fill_null(False).alias("linked"),
        ).filter("linked", pl.col("v").is_not_null())
        for by, link in linked.items()
    )
    labels = _components(rows.height, edges["u"].to_numpy(), edges["v"].to_numpy())
    return pl.Series("_n", labels, dtype=pl.Int64)


def _components(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Connected components of the graph on 0..n-1 with edges (u, v): each node's smallest
    member (hooking roots to the smaller root, then pointer jumping, until every edge is in
    one component)."""
    parent = np.arange(n, dtype=np.int64)
    while True:
        pu, pv = parent[u], parent[v]
        if np.array_equal(pu, pv):
            return parent
        np.minimum.at(parent, np.maximum(pu, pv), np.minimum(pu, pv))
        while not np.array_equal(jumped := parent[parent], parent):
            parent = jumped


def build_incidents(events: pl.DataFrame, cfg: IncidentConfig | None = None) -> StageResult:
    """Merge raised events (ALARM_EVENT_SCHEMA) into incidents (INCIDENT_SCHEMA).

    Counters: `read`/`kept` are incidents (nothing is rejected here); `events`, `raised`
    (raises merged into incidents), `merged_raises` (raises that joined an earlier one) and
    `cascades` (incidents of more than one code).
    """
    cfg = cfg or IncidentConfig()
    key = pl.col("alarm_code") if cfg.merge_by == "code" else pl.lit("*")
    raises = (
        events.filter(pl.col("event") == "raised")
        .with_columns(key.alias(_KEY))
        .sort("machine", *_ORDER)
    )
    grouped = (
        raises.with_columns(_n=_episodes(raises, events, cfg))
        .group_by("machine", "_n", maintain_order=True)
        .agg(
            pl.col(_KEY).first(),
            pl.col("record_id").first().alias("_first_id"),
            pl.lit("alarm_log").alias("source_kind"),
            pl.col("source_file").first(),
            pl.col("source_row").first(),
            pl.col("family").first(),
            pl.col("alarm_code").unique(maintain_order=True).alias("alarm_codes"),
            pl.col("message").drop_nulls().unique(maintain_order=True).alias("messages"),
            pl.col("occurred_at").first().alias("first_at"),
            pl.col("occurred_at").last().alias("last_at"),
            pl.len().cast(pl.UInt32).alias("count"),
            pl.col("source_file").unique(maintain_order=True).alias("source_files"),
            pl.col("record_id").alias("event_ids"),
        )
    )
    grouped = grouped.with_columns(
        _incident_ids(grouped["machine"], grouped[_KEY], grouped["_first_id"])
    )
    for kind, name in (("cleared", "cleared_at"), ("acknowledged", "acknowledged_at")):
        grouped = grouped.join(_first_after(grouped, raises, events, kind, name), on="record_id")
    incidents = grouped.with_columns(
        pl.lit([], dtype=pl.List(pl.String)).alias("workorder_ids")
    ).select([pl.col(c).cast(t) for c, t in INCIDENT_SCHEMA.items()])
    incidents = incidents.sort("machine", "first_at", "record_id")
    return stage_result(
        incidents,
        empty_rejects(),
        read=incidents.height,
        events=events.height,
        raised=raises.height,
        merged_raises=raises.height - incidents.height,
        cascades=int((incidents["alarm_codes"].list.len() > 1).sum()),
    )


def _first_after(
    incidents: pl.DataFrame, raises: pl.DataFrame, events: pl.DataFrame, kind: str, name: str
) -> pl.DataFrame:
    """Per incident, its clear (`kind` cleared: when the last of its codes cleared, null while
    one has not) or acknowledgement (the first of its codes acknowledged): per code, the first
    such event (of the code, or without a code on the code's data item) at or after the code's
    last raise in the incident and before its next raise."""
    codes = (
        incidents.select("record_id", "machine", pl.col("event_ids").alias("_id"))
        .explode("_id")
        .join(raises.select(pl.col("record_id").alias("_id"), *_RAISE), on="_id")
        .group_by("record_id", "machine", "alarm_code", "channel", maintain_order=True)
        .agg(pl.col("occurred_at").max().alias("_last"))
        .sort("_last")
    )
    marks = events.filter(pl.col("event") == kind)
    sides = {
        "_next": (raises, "alarm_code", False),
        "_by_code": (marks.filter(pl.col("alarm_code").is_not_null()), "alarm_code", True),
        "_by_item": (marks.filter(pl.col("alarm_code").is_null()), "channel", True),
    }
    for column, (right, by, exact) in sides.items():
        codes = codes.join_asof(
            right.drop_nulls(by)
            .select("machine", by, pl.col("occurred_at").alias(column))
            .sort(column),
            left_on="_last",
            right_on=column,
            by=["machine", by],
            strategy="forward",
            allow_exact_matches=exact,
            check_sortedness=False,  # sorted on the join keys above; by-groups follow
        )
    first = pl.min_horizontal("_by_code", "_by_item")
    before_next = pl.when(pl.col("_next").is_null() | (first < pl.col("_next"))).then(first)
    every = before_next.is_not_null().all()
    found = codes.group_by("record_id").agg(
        (pl.when(every).then(before_next.max()) if kind == "cleared" else before_next.min()).alias(
            name
        )
    )
    return incidents.select("record_id").join(found, on="record_id", how="left")


def _code_key(col: str) -> pl.Expr:
    """The code after its family (`MTCONNECT:1253` and `MAZAK:1253` are the same alarm): the
    machine and the time window keep such a match to the one controller."""
    return pl.col(col).str.split(":").list.last()


def _as_datetime(col: str) -> pl.Expr:
    """A work order's timestamp column, whether already a datetime or text in a common layout."""
    text = pl.col(col).cast(pl.String).str.strip_chars().str.replace_all(r"[/.]", "-")
    return pl.coalesce(
        text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False),
        text.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", time_unit="us", strict=False),
        text.str.to_datetime("%Y-%m-%d %H:%M", time_unit="us", strict=False),
        text.str.to_datetime("%Y-%m-%d", time_unit="us", strict=False),
    )


# The work-order columns `link_workorders` reads (with its default column names).
WORKORDER_LINK_COLUMNS = ("record_id", "asset", "reported_at", "alarm_codes")


def link_workorders(
    incidents: pl.DataFrame,
    workorders: pl.DataFrame,
    cfg: IncidentConfig | None = None,
    *,
    machine_col: str = "asset",
    time_col: str = "reported_at",
    codes_col: str = "alarm_codes",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Link each work order to the nearest incident on its machine that shares a code.

    A work order qualifies when it is reported within `link_window_s` of the incident's span
    [first_at, last_at]. Machines compare without case, spaces, `-` and `_`; codes by the part
    after their family. Returns the incidents with `workorder_ids` filled and the link table
    (incident_id, workorder_id, alarm_code, distance_s), one row per linked work order.
    """
    cfg = cfg or IncidentConfig()
    orders = _order_codes(workorders, machine_col, time_col, codes_col)
    links = (
        _candidates(incidents, orders, cfg.link_window_s)
        .sort("workorder_id", "distance_s", "first_at", "incident_id", "alarm_code")
        .group_by("workorder_id", maintain_order=True)
        .first()
        .select("incident_id", "workorder_id", "alarm_code", "distance_s")
        .sort("incident_id", "workorder_id")
    )
    per_incident = links.group_by("incident_id").agg(pl.col("workorder_id").sort().alias("_linked"))
    linked = (
        incidents.join(per_incident, left_on="record_id", right_on="incident_id", how="left")
        .with_columns(workorder_ids=pl.coalesce("_linked", pl.lit([], dtype=pl.List(pl.String))))
        .drop("_linked")
    )
    return linked, links


def _order_codes(
    workorders: pl.DataFrame, machine_col: str, time_col: str, codes_col: str
) -> pl.DataFrame:
    """One row per work order and code: workorder_id, _machine, _at and _code (the keys)."""
    return (
        workorders.select(
            pl.col("record_id").alias("workorder_id"),
            _machine_key(machine_col).alias("_machine"),
            _as_datetime(time_col).alias("_at"),
            pl.col(codes_col).alias("alarm_code"),
        )
        .explode("alarm_code")
        .drop_nulls()
        .with_columns(_code=_code_key("alarm_code"))
        .drop("alarm_code")
        .unique()
    )


def _candidates(incidents: pl.DataFrame, orders: pl.DataFrame, window_s: float) -> pl.DataFrame:
    """Every (incident code, work order) pair on one machine and code with the order reported
    within `window_s` of the incident's span, and `distance_s` from that span (0 inside it)."""
    window = pl.duration(microseconds=int(window_s * 1_000_000))
    return (
        incidents.select(
            pl.col("record_id").alias("incident_id"),
            "machine",
            "first_at",
            "last_at",
            "alarm_codes",
        )
        .explode("alarm_codes")
        .rename({"alarm_codes": "alarm_code"})
        .with_columns(_machine=_machine_key("machine"), _code=_code_key("alarm_code"))
        .join(orders, on=["_machine", "_code"])
        .filter(
            pl.col("_at") >= pl.col("first_at") - window,
            pl.col("_at") <= pl.col("last_at") + window,
        )
        .with_columns(
            distance_s=pl.max_horizontal(
                (pl.col("first_at") - pl.col("_at")).dt.total_microseconds(),
                (pl.col("_at") - pl.col("last_at")).dt.total_microseconds(),
                pl.lit(0),
            )
            / 1_000_000
        )
    )


def _machine_key(col: str) -> pl.Expr:
    """A machine id compared loosely: case, spaces, `-` and `_` ignored (VMC-03 = vmc 03)."""
    return pl.col(col).cast(pl.String).str.to_uppercase().str.replace_all(r"[\s_\-]", "")


def machine_partition(frame: pl.DataFrame, column: str, parts: int) -> pl.Series:
    """Partition (0 .. parts-1) of each row by its machine in `column`, compared as work
    orders are linked (`_machine_key`): rows of one machine, however typed, share a partition.
    A stable hash (xxh3) of each distinct machine; no machine: partition 0."""
    keys = frame.select(_machine_key(column).alias("_m")).to_series()
    distinct = keys.drop_nulls().unique().sort()
    part = [xxhash.xxh3_64_intdigest(m.encode()) % parts for m in distinct.to_list()]
    lookup = pl.DataFrame({"_m": distinct, "_part": pl.Series(part, dtype=pl.UInt32)})
    found = keys.to_frame().join(lookup, on="_m", how="left", maintain_order="left")
    return found.get_column("_part").fill_null(0)


def incident_table(
    incidents: pl.DataFrame,
    events: pl.DataFrame,
    workorders: pl.DataFrame,
    knowledge_base: pl.DataFrame,
    cfg: IncidentConfig | None = None,
) -> pl.DataFrame:
    """Every incident as published in `incidents/` (schemas.arrow.INCIDENTS): its span, codes,
    messages, the file and line of every raise, whether and when it cleared, whether the
    fault-code table has an entry for one of its codes, and the related work orders."""
    linked, _ = link_workorders(incidents, workorders, cfg)
    raises = (
        linked.select("record_id", pl.col("event_ids").alias("event_id"))
        .explode("event_id")
        .join(
            events.select(pl.col("record_id").alias("event_id"), "source_file", "source_row"),
            on="event_id",
            how="left",
            maintain_order="left",
        )
        .group_by("record_id", maintain_order=True)
        .agg(pl.col("source_file").alias("raise_files"), pl.col("source_row").alias("raise_lines"))
    )
    known = knowledge_base["code"].unique().implode()
    return (
        linked.join(raises, on="record_id", how="left", maintain_order="left")
        .select(
            pl.col("record_id").alias("incident_id"),
            "source_file",
            "machine",
            "family",
            pl.col("first_at").alias("start"),
            pl.coalesce("cleared_at", "last_at").alias("end"),
            pl.col("last_at").alias("last_raise_at"),
            pl.col("alarm_codes").alias("codes"),
            "messages",
            pl.col("count").cast(pl.Int32).alias("occurrences"),
            "raise_files",
            "raise_lines",
            pl.col("cleared_at").is_not_null().alias("cleared"),
            "cleared_at",
            "acknowledged_at",
            pl.col("alarm_codes")
            .list.set_intersection(known)
            .list.len()
            .gt(0)
            .alias("fault_code_entry"),
            pl.col("workorder_ids").list.first().alias("workorder_id"),
            "workorder_ids",
        )
        .sort("machine", "start", "incident_id")
    )


def incident_funnel(events: pl.DataFrame, cfg: IncidentConfig | None = None) -> StageResult:
    """Events -> incidents. Each incident keeps its first raise's place in the funnel; later
    raises are rejected as `merged_into_incident` (pointing at the incident) and clears and
    acknowledgements, folded into the incident's times, as `state_change`."""
    incidents = build_incidents(events, cfg).kept
    members = (
        incidents.select(
            pl.col("record_id").alias("incident_id"), pl.col("event_ids").alias("record_id")
        )
        .explode("record_id")
        .with_columns(first=pl.int_range(pl.len()).over("incident_id") == 0)
    )
    tagged = events.join(members, on="record_id", how="left")
    merged = tagged.filter(pl.col("incident_id").is_not_null() & ~pl.col("first"))
    state_changes = tagged.filter(pl.col("incident_id").is_null())
    rejected = pl.concat(
        [
            make_rejects(
                merged.drop("first"),
                "incidents",
                "merged_into_incident",
                duplicate_of=pl.col("incident_id"),
            ),
            make_rejects(
                state_changes.drop("first", "incident_id"),
                "incidents",
                "state_change",
                detail=pl.col("event"),
            ),
        ]
    )
    return stage_result(incidents, rejected, read=events.height)


def drop_described_incidents(
    samples: pl.DataFrame,
    incidents: pl.DataFrame,
    workorders: pl.DataFrame,
    cfg: IncidentConfig | None = None,
) -> StageResult:
    """An incident that a published work order already describes (same machine, a shared code,
    close in time) is that work order's sample: reject it as `same_incident`."""
    _, links = link_workorders(incidents, workorders, cfg)
    first_link = links.group_by("incident_id").agg(pl.col("workorder_id").sort().first())
    tagged = samples.join(first_link, left_on="record_id", right_on="incident_id", how="left")
    duplicate = pl.col("workorder_id").is_not_null()
    rejected = make_rejects(
        tagged.filter(duplicate),
        "cross_source",
        "same_incident",
        duplicate_of=pl.col("workorder_id"),
    )
    return stage_result(
        tagged.filter(~duplicate).drop("workorder_id"), rejected, read=samples.height
    )
