"""What the report shows, computed from the manifest, the token lengths, the SFT rows and the
incidents: polars frames and plain values, no HTML."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.text.pii import redact_pii
from schemas.manifest import KbCoverage, Manifest

CDF_POINTS = 200  # most points one CDF polyline carries
TOP_N = 10  # alarm codes and machines listed
EXAMPLES_PER_TIER = 3
TIMELINE_MACHINES = 20  # machines with the most incidents drawn


@dataclass(frozen=True)
class SampleDigest:
    """What the report shows of the SFT rows, gathered a chunk at a time (`of` each chunk, then
    `merge`): occurrences per alarm code, samples and distinct codes per machine, and each
    tier's examples (the lowest hashes of record_id, ties in row order)."""

    rows: int
    codes: pl.DataFrame  # code, len
    machines: pl.DataFrame  # asset, len, codes (distinct; a null code inside a list counts)
    examples: pl.DataFrame  # tier, _h, record_id, source_file, source_row, messages

    @classmethod
    def of(cls, sft: pl.DataFrame) -> SampleDigest:
        """The digest of SFT rows (`tier`, `asset`, `alarm_codes`, `messages`, lineage)."""
        return cls(
            rows=sft.height,
            codes=sft.select(pl.col("alarm_codes").explode().alias("code"))
            .drop_nulls()
            .group_by("code")
            .len(),
            machines=sft.drop_nulls("asset")
            .group_by("asset")
            .agg(pl.len(), _distinct(pl.col("alarm_codes")).alias("codes")),
            examples=_first_examples(
                sft.select(
                    "tier",
                    pl.col("record_id").hash(0).alias("_h"),
                    "record_id",
                    "source_file",
                    "source_row",
                    "messages",
                )
            ),
        )

    def merge(self, later: SampleDigest) -> SampleDigest:
        """The digest of this digest's rows followed by `later`'s."""
        machines = pl.concat([self.machines, later.machines], how="vertical_relaxed")
        return SampleDigest(
            rows=self.rows + later.rows,
            codes=pl.concat([self.codes, later.codes], how="vertical_relaxed")
            .group_by("code")
            .agg(pl.col("len").sum()),
            machines=machines.group_by("asset").agg(
                pl.col("len").sum(), _distinct(pl.col("codes")).alias("codes")
            ),
            examples=_first_examples(
                pl.concat([self.examples, later.examples], how="vertical_relaxed")
            ),
        )

    def top_codes(self) -> pl.DataFrame:
        """The TOP_N alarm codes with the most samples: code, len."""
        return self.codes.sort(["len", "code"], descending=[True, False]).head(TOP_N)

    def top_machines(self) -> pl.DataFrame:
        """The TOP_N machines with the most samples: asset, len, codes (how many distinct)."""
        return (
            self.machines.with_columns(pl.col("codes").list.len())
            .sort(["len", "asset"], descending=[True, False])
            .head(TOP_N)
        )

    def example_turns(self) -> pl.DataFrame:
        """The examples' turns but the system prompt, PII redacted once more: one row a turn
        (`_n` numbers the sample), in the examples' order."""
        return (
            self.examples.drop("_h")
            .with_row_index("_n")
            .explode("messages")
            .unnest("messages")
            .filter(pl.col("role") != "system")
            .with_columns(content=redact_pii(pl.col("content")))
        )


def _distinct(codes: pl.Expr) -> pl.Expr:
    """A group's distinct codes: empty and null lists add none, a null code inside counts."""
    return codes.list.explode(keep_nulls=False, empty_as_null=False).unique()


def _first_examples(rows: pl.DataFrame) -> pl.DataFrame:
    return (
        rows.sort("tier", "_h", maintain_order=True)
        .group_by("tier", maintain_order=True)
        .head(EXAMPLES_PER_TIER)
    )


def snapshot_history(out: Path) -> list[Manifest]:
    """Manifests of the published snapshots under `out`, oldest first."""
    paths = sorted((Path(out) / "snapshots").glob("[!.]*/manifest.json"))
    return [Manifest.model_validate_json(p.read_text(encoding="utf-8")) for p in paths]


def tier_rows(m: Manifest) -> dict[str, int]:
    """Rows per SFT tier, from the manifest's output files (`sft/tier=X/...`)."""
    tiers: dict[str, int] = {}
    for o in m.outputs:
        parts = o.path.split("/")
        if len(parts) > 2 and parts[0] == "sft" and parts[1].startswith("tier="):
            tier = parts[1].removeprefix("tier=")
            tiers[tier] = tiers.get(tier, 0) + o.rows
    return tiers


def tier_totals(sft_tokens: pl.DataFrame) -> pl.DataFrame:
    """Rows and tokens per tier: tier, len, n_tokens."""
    return sft_tokens.group_by("tier").agg(pl.len(), pl.col("n_tokens").sum()).sort("tier")


def corpora(sft_tokens: pl.DataFrame, pretrain: pl.Series | None) -> dict[str, pl.Series]:
    """Token lengths per corpus with rows, named as in the plan: `tier_A`, ..., `pretrain`."""
    out = {
        f"tier_{t}": g["n_tokens"]
        for (t,), g in sft_tokens.drop_nulls("n_tokens")
        .sort("tier")
        .group_by("tier", maintain_order=True)
    }
    if pretrain is not None and pretrain.drop_nulls().len():
        out["pretrain"] = pretrain.drop_nulls()
    return out


def cdf_points(lengths: pl.Series) -> pl.DataFrame:
    """Empirical CDF from (min, 0): at most CDF_POINTS (x, y), the last row of each bucket."""
    n, buckets = lengths.len(), CDF_POINTS - 1
    x = lengths.cast(pl.Int64).sort()
    tail = (
        pl.DataFrame({"x": x})
        .with_row_index("i")
        .group_by((pl.col("i") * buckets // n).alias("b"), maintain_order=True)
        .agg(pl.col("x").last(), ((pl.col("i").last() + 1) / n).alias("y"))
        .select("x", "y")
    )
    return pl.concat([pl.DataFrame({"x": [x[0]], "y": [0.0]}), tail])


def timeline_incidents(incidents: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """The incidents drawn (open ones end where they start), by first raise, and their
    machines: the TIMELINE_MACHINES with the most incidents, most first."""
    inc = incidents.drop_nulls(["machine", "first_at"]).with_columns(
        pl.col("last_at").fill_null(pl.col("first_at"))
    )
    lanes = (
        (inc.group_by("machine").len().sort(["len", "machine"], descending=[True, False]))
        .head(TIMELINE_MACHINES)["machine"]
        .to_list()
    )
    return inc.filter(pl.col("machine").is_in(lanes)).sort("first_at"), lanes


def incidents_per_machine(inc: pl.DataFrame) -> pl.DataFrame:
    """Per machine: incidents, raises, first and last raise (as text), the most incidents first."""
    return (
        inc.group_by("machine")
        .agg(pl.len(), pl.col("count").sum(), pl.col("first_at").min(), pl.col("last_at").max())
        .sort(["len", "machine"], descending=[True, False])
        .with_columns(pl.col("first_at", "last_at").dt.to_string("%Y-%m-%d %H:%M"))
    )


def top_missing_codes(coverage: KbCoverage) -> list[tuple[str, int, int, int]]:
    """The TOP_N codes without a knowledge-base entry seen most often, over all families:
    (code, seen, incidents, work orders), most seen first (ties by code)."""
    codes = [m for f in coverage.families for m in f.top_missing]
    codes.sort(key=lambda m: (-m.seen, m.code))
    return [(m.code, m.seen, m.incidents, m.workorders) for m in codes[:TOP_N]]


def never_seen_codes(coverage: KbCoverage) -> list[tuple[str, str]]:
    """Per family with entries no incident or work order cites: ("FAMILY (n)", the codes
    listed, `…` where there are more than the manifest lists)."""
    return [
        (
            f"{f.family} ({f.never_seen})",
            ", ".join(f.never_seen_codes)
            + (" …" if f.never_seen > len(f.never_seen_codes) else ""),
        )
        for f in coverage.families
        if f.never_seen
    ]
