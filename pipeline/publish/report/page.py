"""A self-contained HTML report of one snapshot: funnel, tiers, token CDFs, plan and GPU fit.

Inline CSS and SVG only: no JavaScript, no external assets, every text escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import polars as pl

import pipeline.publish.report.charts as charts
from pipeline.publish.report.charts import KEPT, NEUTRAL, REJECTED, bar_table
from pipeline.publish.report.data import (
    SampleDigest,
    corpora,
    incidents_per_machine,
    never_seen_codes,
    tier_rows,
    timeline_incidents,
    top_missing_codes,
)
from pipeline.publish.report.markup import dl, muted, pct, section, table
from schemas.manifest import KbCoverage, Manifest
from schemas.plan import Plan

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:20px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f4f4f4}dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}
dt{font-weight:600}dd{margin:0;font-family:monospace}.muted{color:#777}
td.ok{background:#d9f0d3}td.rc{background:#fee8a0}td.no{background:#f4c7c3}
svg text{font:11px system-ui,sans-serif}
.turn{white-space:pre-wrap;font-family:monospace;background:#f7f7f7;padding:4px 8px;margin:2px 0}
.role{font-weight:600;color:#555}
"""


def render_report(
    manifest: Manifest,
    plan: Plan,
    sft_tokens: pl.DataFrame,
    pretrain_tokens: pl.Series | None,
    *,
    history: Sequence[Manifest] = (),
    samples: SampleDigest | None = None,
    incidents: pl.DataFrame | None = None,
) -> str:
    """The report page of a snapshot; `sft_tokens` has columns `tier` and `n_tokens`.

    `history`: manifests of the earlier snapshots under the same output (oldest first) for the
    trend; `samples`: the digest of the SFT rows for the top codes and machines and the
    examples; `incidents`: alarm-log incidents (`machine`,
    `alarm_codes`, `first_at`, `last_at`, `count`) for the timeline."""
    c = manifest.counts
    reasons = sorted(c.by_reason.items(), key=lambda kv: (-kv[1], kv[0]))
    body = [
        *_header(manifest),
        "<h2>Funnel</h2>" + charts.funnel(c.stages),
        "<h2>Rejects by reason</h2>" + bar_table(["reason", "rows"], reasons, REJECTED),
        "<h2>Samples per tier</h2>" + charts.tiers(sft_tokens),
        "<h2>Token length CDF</h2>" + charts.cdf_chart(corpora(sft_tokens, pretrain_tokens)),
        f"<h2>Stage plan</h2><p>Headroom {plan.headroom:.0%} of each card.</p>" + _plan_table(plan),
        "<h2>GPU fit</h2><p>micro-batch · recompute · peak / card GiB "
        '<span class="muted">(green fits, yellow fits with recomputation, red does not fit)'
        "</span></p>" + charts.gpu_matrix(plan),
        section("trend", "Trend across refreshes", _trend([*history, manifest])),
        section("top", "Top alarm codes and machines", _top(samples)),
        section("timeline", "Incident timeline per machine", _timeline(incidents)),
        section("kb_coverage", "Knowledge-base coverage", _kb_coverage(manifest.kb_coverage)),
        section("examples", "Example samples per tier (redacted)", _examples(samples)),
        "<h2>Inputs</h2>" + _inputs(manifest),
        "<h2>Other sources</h2>" + _other_sources(manifest),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>cnc-corpus snapshot {escape(manifest.snapshot_id)}</title>"
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _header(m: Manifest) -> list[str]:
    """The title, what made the snapshot and from which inputs, the totals."""
    c, r = m.counts, m.refresh
    refresh = f"{len(r.processed)} processed, {len(r.carried)} carried, {len(r.removed)} removed"
    facts = [
        ("snapshot", m.snapshot_id),
        ("flow", m.flow),
        ("code version", m.code_version),
        ("config hash", m.config_hash),
        ("created", m.created_at),
        ("previous snapshot", r.previous_snapshot or "none"),
        ("input files", refresh),
    ]
    return [
        f"<h1>cnc-corpus snapshot {escape(m.snapshot_id)}</h1>",
        dl(facts),
        f"<p>Rows read <b>{c.read:,}</b>, kept <b>{c.kept:,}</b>, rejected <b>{c.rejected:,}</b>"
        f" ({pct(c.kept, c.read)} kept).</p>",
    ]


def _plan_table(plan: Plan) -> str:
    head = [
        "stage",
        "corpus",
        "model",
        "method",
        "share",
        "rows",
        "tokens",
        "p99",
        "max_seq_len",
        "truncated rows",
        "truncated tokens",
        "packing",
        "packing efficiency",
        "tokens per step",
        "epochs",
        "learning rate",
    ]
    rows = [
        [s.name, s.corpus, s.model, s.method, f"{s.share:g}", s.stats.rows, s.stats.tokens,
         s.stats.p99, s.max_seq_len, f"{s.truncation_rate:.2%}", f"{s.truncated_token_rate:.2%}",
         "yes" if s.packing else "no", f"{s.packing_efficiency:.1%}",
         s.batch.target_tokens_per_step, s.schedule.epochs, f"{s.schedule.learning_rate:g}"]
        for s in plan.stages
    ]  # fmt: skip
    return table(head, rows)


def _trend(manifests: Sequence[Manifest]) -> str:
    """Per refresh: read / kept / rejected, rows per tier, rejects per reason; a line chart."""
    tiers = sorted({t for m in manifests for t in tier_rows(m)})
    reasons = sorted({r for m in manifests for r in m.counts.by_reason})
    head = ["snapshot", "created", "read", "kept", "rejected", *(f"tier {t}" for t in tiers)]
    rows = [
        [m.snapshot_id, m.created_at, m.counts.read, m.counts.kept, m.counts.rejected,
         *(tier_rows(m).get(t, 0) for t in tiers)]
        for m in manifests
    ]  # fmt: skip
    by_reason = [[r, *(m.counts.by_reason.get(r, 0) for m in manifests)] for r in reasons]
    series = {
        "read": [m.counts.read for m in manifests],
        "kept": [m.counts.kept for m in manifests],
        "rejected": [m.counts.rejected for m in manifests],
    }
    return (
        charts.line_chart(series, {"read": NEUTRAL, "kept": KEPT, "rejected": REJECTED})
        + table(head, rows)
        + "<h3>Rejects by reason per refresh</h3>"
        + (table(["reason", *(f"#{i + 1}" for i in range(len(manifests)))], by_reason)
           if by_reason else muted("no rejects"))
    )  # fmt: skip


def _top(samples: SampleDigest | None) -> str:
    if samples is None or samples.rows == 0:
        return muted("no samples")
    return (
        "<h3>Alarm codes</h3>"
        + bar_table(["code", "samples"], samples.top_codes().rows(), REJECTED)
        + "<h3>Machines</h3>"
        + bar_table(
            ["machine", "samples", "distinct codes"], samples.top_machines().rows(), NEUTRAL
        )
    )


def _timeline(incidents: pl.DataFrame | None) -> str:
    """One lane per machine (the most incidents first); a mark per incident, first to last raise."""
    if incidents is None or incidents.height == 0:
        return muted("no alarm-log incidents in this snapshot")
    inc, lanes = timeline_incidents(incidents)
    head = ["machine", "incidents", "raises", "first", "last"]
    return charts.timeline_chart(inc, lanes) + table(head, incidents_per_machine(inc).rows())


def _kb_coverage(coverage: KbCoverage | None) -> str:
    """Per family, the codes seen against the fault-code table; the codes seen most that lack
    an entry (the manuals to add); the entries no incident or work order cites."""
    if coverage is None:
        return muted("no coverage figures in this manifest")
    if not coverage.families:
        return muted("no alarm codes seen and no knowledge-base entries")
    never = never_seen_codes(coverage)
    return (
        "<p>Distinct alarm codes cited by alarm-log incidents and by work orders read (kept or"
        " rejected), against the fault-code knowledge base. Missing codes name the manual or"
        " vendor table to add.</p>"
        + charts.coverage_table(coverage.families)
        + "<h3>Codes seen most that have no entry</h3>"
        + bar_table(
            ["code", "seen", "incidents", "work orders"], top_missing_codes(coverage), REJECTED
        )
        + "<h3>Entries never seen</h3>"
        + (dl(never) if never else muted("none: every entry is cited"))
    )


def _examples(samples: SampleDigest | None) -> str:
    """Three samples per tier (picked by a hash of record_id), PII redacted once more."""
    if samples is None or samples.rows == 0:
        return muted("no samples")
    parts = []
    for (tier,), rows in samples.example_turns().group_by("tier", maintain_order=True):
        parts.append(f"<h3>Tier {escape(str(tier))}</h3>")
        parts += [_example(sample) for (_,), sample in rows.group_by("_n", maintain_order=True)]
    return "".join(parts)


def _example(turns: pl.DataFrame) -> str:
    """One sample: where it came from, then its turns."""
    first = turns.row(0, named=True)
    return (
        f'<div class="example"><p class="muted">{escape(first["source_file"] or "")}'
        f" row {first['source_row']} · {escape(first['record_id'] or '')}</p>"
        + "".join(
            f'<div class="turn"><span class="role">{escape(r)}</span>\n{escape(c or "")}</div>'
            for r, c in turns.select("role", "content").iter_rows()
        )
        + "</div>"
    )


def _inputs(m: Manifest) -> str:
    rows = [[i.path, i.source_kind, i.encoding, i.rows, i.skipped_lines, i.bytes] for i in m.inputs]
    return table(["path", "kind", "encoding", "rows", "skipped lines", "bytes"], rows)


def _other_sources(m: Manifest) -> str:
    """Counts of the sources that are not rows of the funnel (manuals: files, sections, ...)."""
    sources = "".join(f"<h3>{escape(k)}</h3>{dl(v.items())}" for k, v in m.sources.items())
    return sources or muted("none")
