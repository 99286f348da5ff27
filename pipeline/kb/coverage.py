"""Knowledge-base coverage: per code family, the alarm codes seen in alarm logs and work orders
that the fault-code table lacks (and how often each was seen), the entries never seen, and the
incidents without an entry, so a user knows which manual to add.

Alarm logs count by incident (the incidents table's `codes`). Work orders count every row read:
kept rows by their `alarm_codes`, rejected rows by the `alarm_codes` of their reject payload
(rows rejected before normalization carry none); a row citing a code twice counts once. The
work-order counts are gathered a chunk at a time (`CodeTally`), so no rows are held.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import polars as pl

from schemas.manifest import KbCoverage

TOP_N = 20  # most codes listed per family and list
COUNT_SCHEMA: dict[str, pl.DataType] = {"code": pl.String(), "workorders": pl.Int64()}
_WORKORDER = pl.col("source_kind") == "workorder"


def code_family(code: pl.Expr) -> pl.Expr:
    """The FAMILY of a canonical FAMILY:CODE; UNKNOWN where there is none."""
    return code.str.extract(r"^([^:]+):", 1).fill_null("UNKNOWN")


def sample_code_counts(sft: pl.DataFrame) -> pl.DataFrame:
    """Work-order rows per code among SFT rows (`source_kind`, `alarm_codes`): code, workorders."""
    return _per_code(sft.filter(_WORKORDER).select("alarm_codes"))


def rejected_code_counts(rejects: pl.DataFrame) -> pl.DataFrame:
    """Work-order rows per code among rejects, read from the payload's `alarm_codes` (a payload
    that is no JSON object or has no such list counts nothing): code, workorders."""
    codes = (
        pl.col("payload")
        .str.json_path_match("$.alarm_codes")
        .str.json_decode(pl.List(pl.String()))
        .alias("alarm_codes")
    )
    return _per_code(rejects.filter(_WORKORDER).select(codes))


def _per_code(rows: pl.DataFrame) -> pl.DataFrame:
    return (
        rows.select(pl.col("alarm_codes").list.unique().alias("code"))
        .explode("code")
        .drop_nulls()
        .group_by("code")
        .agg(pl.len().cast(pl.Int64).alias("workorders"))
    )


def summed_code_counts(counts: Iterable[pl.DataFrame]) -> pl.DataFrame:
    """Several (code, workorders) counts as one."""
    return (
        pl.concat([pl.DataFrame(schema=COUNT_SCHEMA), *counts])
        .group_by("code")
        .agg(pl.col("workorders").sum())
    )


@dataclass
class CodeTally:
    """Work-order rows per alarm code, summed a chunk at a time (one row per distinct code)."""

    counts: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=COUNT_SCHEMA))

    def add(self, counts: pl.DataFrame) -> None:
        self.counts = summed_code_counts([self.counts, counts])

    def rejects(self, chunks: Iterable[pl.DataFrame]) -> Iterator[pl.DataFrame]:
        """Reject chunks as they are, their work-order codes counted on the way."""
        for chunk in chunks:
            self.add(rejected_code_counts(chunk))
            yield chunk


def kb_coverage(
    knowledge_base: pl.DataFrame | None,
    incidents: pl.DataFrame | None,
    workorder_codes: pl.DataFrame,
    top_n: int = TOP_N,
) -> KbCoverage:
    """Coverage per family of the knowledge base (`code`), by the incidents (`codes`,
    `family`) and the work-order counts (`code`, `workorders`)."""
    known = (
        pl.DataFrame(schema={"code": pl.String()})
        if knowledge_base is None
        else knowledge_base.select("code").drop_nulls().unique()
    ).with_columns(family=code_family(pl.col("code")))
    per_incident = _incident_codes(incidents)
    seen = _seen(per_incident, workorder_codes, known["code"])
    families = _families(known, seen, _incident_entries(per_incident, known["code"]))
    by_count = pl.col("seen"), pl.col("code")
    top = (
        seen.filter(~pl.col("covered"))
        .sort(by_count, descending=[True, False])
        .group_by("family")
        .agg(pl.struct("code", "incidents", "workorders", "seen").head(top_n).alias("top_missing"))
    )
    never = (
        known.filter(~pl.col("code").is_in(seen["code"].implode()))
        .sort("code")
        .group_by("family")
        .agg(pl.col("code").head(top_n).alias("never_seen_codes"))
    )
    rows = families.join(top, on="family", how="left").join(never, on="family", how="left")
    return KbCoverage.model_validate(
        {
            "top_n": top_n,
            "families": [
                {
                    **r,
                    "top_missing": r["top_missing"] or [],
                    "never_seen_codes": r["never_seen_codes"] or [],
                }
                for r in rows.iter_rows(named=True)
            ],
        }
    )


def _incident_codes(incidents: pl.DataFrame | None) -> pl.DataFrame:
    """One row per (incident `_i`, distinct code), with the incident's family (its first code's,
    else its `family`); an incident without codes keeps one row with a null code."""
    if incidents is None:
        return pl.DataFrame(schema={"_i": pl.UInt32(), "family": pl.String(), "code": pl.String()})
    first = pl.col("codes").list.first()
    family = pl.when(first.is_not_null()).then(code_family(first)).otherwise(pl.col("family"))
    return (
        incidents.with_row_index("_i")
        .select("_i", family.fill_null("UNKNOWN").alias("family"), pl.col("codes").list.unique())
        .explode("codes")
        .rename({"codes": "code"})
    )


def _seen(per_incident: pl.DataFrame, workorders: pl.DataFrame, known: pl.Series) -> pl.DataFrame:
    """Every code seen: code, family, incidents, workorders, seen (their sum), covered."""
    by_incidents = (
        per_incident.drop_nulls("code")
        .group_by("code")
        .agg(pl.len().cast(pl.Int64).alias("incidents"))
    )
    return (
        by_incidents.join(workorders, on="code", how="full", coalesce=True)
        .with_columns(pl.col("incidents", "workorders").fill_null(0))
        .with_columns(
            family=code_family(pl.col("code")),
            seen=pl.col("incidents") + pl.col("workorders"),
            covered=pl.col("code").is_in(known.implode()),
        )
    )


def _incident_entries(per_incident: pl.DataFrame, known: pl.Series) -> pl.DataFrame:
    """Per incident: family, entry (one of its codes has a knowledge-base entry)."""
    return per_incident.group_by("_i").agg(
        pl.col("family").first(), pl.col("code").is_in(known.implode()).any().alias("entry")
    )


def _families(known: pl.DataFrame, seen: pl.DataFrame, incidents: pl.DataFrame) -> pl.DataFrame:
    """The figures per family, the family with the most missing codes first."""
    kb = known.group_by("family").agg(
        pl.len().alias("kb_codes"),
        (~pl.col("code").is_in(seen["code"].implode())).sum().alias("never_seen"),
    )
    codes = seen.group_by("family").agg(
        pl.len().alias("seen"),
        pl.col("covered").sum(),
        (~pl.col("covered")).sum().alias("missing"),
    )
    inc = incidents.group_by("family").agg(
        pl.len().alias("incidents"), (~pl.col("entry")).sum().alias("incidents_without_entry")
    )
    return (
        kb.join(codes, on="family", how="full", coalesce=True)
        .join(inc, on="family", how="full", coalesce=True)
        .fill_null(0)
        .sort(["missing", "family"], descending=[True, False])
    )
