"""A self-contained HTML report of one snapshot: funnel, tiers, token CDFs, plan and GPU fit.

Inline CSS and SVG only: no JavaScript, no external assets, every text escaped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

import polars as pl

from pipeline.stages.normalize import redact_pii
from schemas.manifest import Manifest, StageCounts
from schemas.plan import GpuFit, Plan

CDF_POINTS = 200  # most points one CDF polyline carries
TOP_N = 10  # alarm codes and machines listed
EXAMPLES_PER_TIER = 3
TIMELINE_MACHINES = 20  # machines with the most incidents drawn
_COLORS = {"tier_A": "#1b7837", "tier_B": "#2166ac", "tier_C": "#b35806", "pretrain": "#762a83"}
_KEPT, _REJECTED, _NEUTRAL = "#5aae61", "#d6604d", "#4393c3"
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


def _distinct(codes: pl.Expr) -> pl.Expr:
    """A group's distinct codes: empty and null lists add none, a null code inside counts."""
    return codes.list.explode(keep_nulls=False, empty_as_null=False).unique()


def _first_examples(rows: pl.DataFrame) -> pl.DataFrame:
    return (
        rows.sort("tier", "_h", maintain_order=True)
        .group_by("tier", maintain_order=True)
        .head(EXAMPLES_PER_TIER)
    )


class _Raw(str):
    """HTML already built and escaped: a table cell that is not escaped again."""


Cell = int | float | str


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
    m, c, r = manifest, manifest.counts, manifest.refresh
    refresh = f"{len(r.processed)} processed, {len(r.carried)} carried, {len(r.removed)} removed"
    reasons = sorted(c.by_reason.items(), key=lambda kv: (-kv[1], kv[0]))
    inputs = [
        [i.path, i.source_kind, i.encoding, i.rows, i.skipped_lines, i.bytes] for i in m.inputs
    ]
    sources = "".join(f"<h3>{escape(k)}</h3>{_dl(v.items())}" for k, v in m.sources.items())
    body = [
        f"<h1>cnc-corpus snapshot {escape(m.snapshot_id)}</h1>",
        _dl(
            [
                ("snapshot", m.snapshot_id),
                ("flow", m.flow),
                ("code version", m.code_version),
                ("config hash", m.config_hash),
                ("created", m.created_at),
                ("previous snapshot", r.previous_snapshot or "none"),
                ("input files", refresh),
            ]
        ),
        f"<p>Rows read <b>{c.read:,}</b>, kept <b>{c.kept:,}</b>, rejected <b>{c.rejected:,}</b>"
        f" ({_pct(c.kept, c.read)} kept).</p>",
        "<h2>Funnel</h2>" + _funnel(c.stages),
        "<h2>Rejects by reason</h2>" + _bar_table(["reason", "rows"], reasons, _REJECTED),
        "<h2>Samples per tier</h2>" + _tiers(sft_tokens),
        "<h2>Token length CDF</h2>" + _cdf_chart(_corpora(sft_tokens, pretrain_tokens)),
        f"<h2>Stage plan</h2><p>Headroom {plan.headroom:.0%} of each card.</p>" + _plan_table(plan),
        "<h2>GPU fit</h2><p>micro-batch · recompute · peak / card GiB "
        '<span class="muted">(green fits, yellow fits with recomputation, red does not fit)'
        "</span></p>" + _gpu_matrix(plan),
        _section("trend", "Trend across refreshes", _trend([*history, m])),
        _section("top", "Top alarm codes and machines", _top(samples)),
        _section("timeline", "Incident timeline per machine", _timeline(incidents)),
        _section("examples", "Example samples per tier (redacted)", _examples(samples)),
        "<h2>Inputs</h2>"
        + _table(["path", "kind", "encoding", "rows", "skipped lines", "bytes"], inputs),
        "<h2>Other sources</h2>" + (sources or '<p class="muted">none</p>'),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>cnc-corpus snapshot {escape(m.snapshot_id)}</title><style>{_CSS}</style></head>"
        "<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _funnel(stages: dict[str, StageCounts]) -> str:
    """One table per source kind (the stage key's part before `/`), a kept/rejected bar a stage."""
    kinds: dict[str, list[tuple[str, StageCounts]]] = {}
    for key, st in stages.items():
        kind, _, stage = key.rpartition("/")
        kinds.setdefault(kind or "all", []).append((stage, st))
    parts = []
    for kind, rows in kinds.items():
        top = max(st.read for _, st in rows)
        table = [
            [
                stage,
                st.read,
                st.kept,
                st.rejected,
                ", ".join(f"{r} {n}" for r, n in sorted(st.by_reason.items())) or "-",
                _Raw(_bar([(st.kept, _KEPT), (st.rejected, _REJECTED)], top)),
            ]
            for stage, st in rows
        ]
        parts.append(
            f"<h3>{escape(kind)}</h3>"
            + _table(["stage", "read", "kept", "rejected", "reasons", "kept | rejected"], table)
        )
    return "".join(parts) or '<p class="muted">no stages</p>'


def _tiers(sft_tokens: pl.DataFrame) -> str:
    per = sft_tokens.group_by("tier").agg(pl.len(), pl.col("n_tokens").sum()).sort("tier")
    return _bar_table(["tier", "rows", "tokens"], per.rows(), _NEUTRAL)


def _corpora(sft_tokens: pl.DataFrame, pretrain: pl.Series | None) -> dict[str, pl.Series]:
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


def _cdf_points(lengths: pl.Series) -> pl.DataFrame:
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


def _cdf_chart(corpora: dict[str, pl.Series]) -> str:
    """Polylines of the token-length CDF per corpus; dots at p50/p90/p99; log x when skewed."""
    if not corpora:
        return '<p class="muted">no token counts</p>'
    lo = min(int(s.min()) for s in corpora.values())  # type: ignore[arg-type]
    hi = max(int(s.max()) for s in corpora.values())  # type: ignore[arg-type]
    log = hi / max(lo, 1) >= 30
    lo, hi = (max(lo, 1), max(hi, 2)) if log else (0, max(hi, 1))
    w, h, left, top, pw, ph = 720, 320, 50, 10, 640, 270

    def fx(v: float) -> float:
        if not log:
            return left + pw * v / hi
        return left + pw * math.log(max(v, lo) / lo) / math.log(hi / lo)

    def fy(p: float) -> float:
        return top + ph * (1 - p)

    ticks = [10**k for k in range(0, 8) if lo <= 10**k <= hi] if log else _lin_ticks(hi)
    svg = [f'<svg width="{w}" height="{h}" role="img" aria-label="token length CDF">']
    for p in (0.0, 0.25, 0.5, 0.75, 0.9, 0.99):
        svg.append(
            f'<line x1="{left}" x2="{left + pw}" y1="{fy(p):.1f}" y2="{fy(p):.1f}" stroke="#ddd"/>'
        )
        svg.append(f'<text x="{left - 6}" y="{fy(p) + 4:.1f}" text-anchor="end">{p:g}</text>')
    for t in ticks:
        svg.append(
            f'<line x1="{fx(t):.1f}" x2="{fx(t):.1f}" y1="{top}" y2="{top + ph}" stroke="#eee"/>'
        )
        svg.append(f'<text x="{fx(t):.1f}" y="{top + ph + 14}" text-anchor="middle">{t:,}</text>')
    axis = f"tokens per row ({'log' if log else 'linear'} scale)"
    svg.append(f'<text x="{left + pw / 2}" y="{h - 4}" text-anchor="middle">{axis}</text>')
    legend = []
    for name, s in corpora.items():
        color = _COLORS.get(name, "#333")
        pts = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in _cdf_points(s).iter_rows())
        svg.append(
            f'<polyline class="cdf" data-corpus="{escape(name)}" fill="none" stroke="{color}"'
            f' stroke-width="1.5" points="{pts}"/>'
        )
        qs = [int(s.quantile(q, interpolation="higher") or 0) for q in (0.5, 0.9, 0.99)]
        for q, v in zip((0.5, 0.9, 0.99), qs, strict=True):
            svg.append(
                f'<circle cx="{fx(v):.1f}" cy="{fy(q):.1f}" r="3" fill="{color}">'
                f"<title>{escape(name)} p{round(q * 100)} = {v}</title></circle>"
            )
        swatch = _Raw(f'<span style="color:{color}">&#9644;</span> {escape(name)}')
        legend.append([swatch, s.len(), *qs, int(s.max())])  # type: ignore[arg-type]
    svg.append("</svg>")
    return "".join(svg) + _table(["corpus", "rows", "p50", "p90", "p99", "max"], legend)


def _lin_ticks(hi: int) -> list[int]:
    step = 10 ** max(0, len(str(hi)) - 1)
    step = step // 2 if hi // step < 3 and step > 1 else step
    return list(range(0, hi + 1, step))


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
        "global batch tokens",
    ]
    rows = [
        [s.name, s.corpus, s.model, s.method, f"{s.share:g}", s.stats.rows, s.stats.tokens,
         s.stats.p99, s.max_seq_len, f"{s.truncation_rate:.2%}", f"{s.truncated_token_rate:.2%}",
         "yes" if s.packing else "no", f"{s.packing_efficiency:.1%}", s.global_batch_tokens]
        for s in plan.stages
    ]  # fmt: skip
    return _table(head, rows)


def _gpu_matrix(plan: Plan) -> str:
    gpus = list(dict.fromkeys(g.gpu for s in plan.stages for g in s.gpus))
    out = ["<table><tr><th>stage</th>", *(f"<th>{escape(g)}</th>" for g in gpus), "</tr>"]
    for s in plan.stages:
        fits = {g.gpu: g for g in s.gpus}
        out.append(f"<tr><th>{escape(s.name)}</th>")
        out += [_gpu_cell(fits.get(g)) for g in gpus]
        out.append("</tr>")
    return "".join(out) + "</table>"


def _gpu_cell(g: GpuFit | None) -> str:
    if g is None:
        return '<td class="muted">-</td>'
    if not g.fits:
        return f'<td class="no" title="{escape(g.gpu)}">no fit<br>{g.memory_gib:.0f} GiB card</td>'
    cls = "rc" if g.recompute_needed else "ok"
    peak = f"{g.peak_gib:.1f}" if g.peak_gib is not None else "?"
    title = f"grad accum {g.grad_accum_steps}, tokens/step {g.tokens_per_step}, devices {g.devices}"
    return (
        f'<td class="{cls}" title="{escape(title)}">mb {g.micro_batch} · {escape(g.recompute)}'
        f"<br>{peak} / {g.memory_gib:.0f} GiB</td>"
    )


def _bar(segments: Sequence[tuple[int, str]], top: int, width: int = 240) -> str:
    """An inline SVG bar: segments (value, color) stacked left to right, `top` fills `width`."""
    x, rects = 0.0, []
    for value, color in segments:
        span = width * value / top if top else 0.0
        rects.append(f'<rect x="{x:.1f}" width="{span:.1f}" height="12" fill="{color}"/>')
        x += span
    return f'<svg class="bar" width="{width}" height="12">{"".join(rects)}</svg>'


def _bar_table(head: list[str], rows: list[tuple[Cell, ...]], color: str) -> str:
    """A table of (label, count, ...) rows with a bar for the count."""
    if not rows:
        return '<p class="muted">none</p>'
    top = max(int(r[1]) for r in rows)
    return _table([*head, ""], [[*r, _Raw(_bar([(int(r[1]), color)], top))] for r in rows])


def _table(head: Sequence[str], rows: Iterable[Sequence[Cell]]) -> str:
    out = ["<table><tr>", *(f"<th>{escape(h)}</th>" for h in head), "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(_td(v) for v in row) + "</tr>")
    return "".join(out) + "</table>"


def _td(v: Cell) -> str:
    if isinstance(v, _Raw):
        return f"<td>{v}</td>"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return f"<td>{escape(str(v))}</td>"
    return f'<td class="n">{v:,}</td>'


def _dl(items: Iterable[tuple[str, object]]) -> str:
    return (
        "<dl>"
        + "".join(f"<dt>{escape(str(k))}</dt><dd>{escape(str(v))}</dd>" for k, v in items)
        + "</dl>"
    )


def _pct(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "n/a"


def snapshot_history(out: Path) -> list[Manifest]:
    """Manifests of the published snapshots under `out`, oldest first."""
    paths = sorted((Path(out) / "snapshots").glob("[!.]*/manifest.json"))
    return [Manifest.model_validate_json(p.read_text(encoding="utf-8")) for p in paths]


def _section(key: str, title: str, body: str) -> str:
    return f'<section id="{key}"><h2>{escape(title)}</h2>{body}</section>'


def _tier_rows(m: Manifest) -> dict[str, int]:
    """Rows per SFT tier, from the manifest's output files (`sft/tier=X/...`)."""
    tiers: dict[str, int] = {}
    for o in m.outputs:
        parts = o.path.split("/")
        if len(parts) > 2 and parts[0] == "sft" and parts[1].startswith("tier="):
            tier = parts[1].removeprefix("tier=")
            tiers[tier] = tiers.get(tier, 0) + o.rows
    return tiers


def _trend(manifests: Sequence[Manifest]) -> str:
    """Per refresh: read / kept / rejected, rows per tier, rejects per reason; a line chart."""
    tiers = sorted({t for m in manifests for t in _tier_rows(m)})
    reasons = sorted({r for m in manifests for r in m.counts.by_reason})
    head = ["snapshot", "created", "read", "kept", "rejected", *(f"tier {t}" for t in tiers)]
    rows = [
        [m.snapshot_id, m.created_at, m.counts.read, m.counts.kept, m.counts.rejected,
         *(_tier_rows(m).get(t, 0) for t in tiers)]
        for m in manifests
    ]  # fmt: skip
    by_reason = [[r, *(m.counts.by_reason.get(r, 0) for m in manifests)] for r in reasons]
    series = {
        "read": [m.counts.read for m in manifests],
        "kept": [m.counts.kept for m in manifests],
        "rejected": [m.counts.rejected for m in manifests],
    }
    return (
        _line_chart(series, {"read": _NEUTRAL, "kept": _KEPT, "rejected": _REJECTED})
        + _table(head, rows)
        + "<h3>Rejects by reason per refresh</h3>"
        + (_table(["reason", *(f"#{i + 1}" for i in range(len(manifests)))], by_reason)
           if by_reason else '<p class="muted">no rejects</p>')
    )  # fmt: skip


def _line_chart(series: dict[str, list[int]], colors: dict[str, str]) -> str:
    """One polyline per series over the refreshes (x: refresh number)."""
    n = max(len(v) for v in series.values())
    top = max(max(v) for v in series.values()) or 1
    w, h, left, pw, ph = 520, 200, 50, 440, 160

    def fx(i: int) -> float:
        return left + (pw * i / (n - 1) if n > 1 else pw / 2)

    def fy(v: int) -> float:
        return 10 + ph * (1 - v / top)

    svg = [f'<svg width="{w}" height="{h}" role="img" aria-label="trend across refreshes">']
    for frac in (0.0, 0.5, 1.0):
        y = fy(round(top * frac))
        svg.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{round(top * frac):,}'
                   "</text>")  # fmt: skip
    for i in range(n):
        svg.append(f'<text x="{fx(i):.1f}" y="{h - 14}" text-anchor="middle">#{i + 1}</text>')
    for j, (name, values) in enumerate(series.items()):
        pts = " ".join(f"{fx(i):.1f},{fy(v):.1f}" for i, v in enumerate(values))
        color = colors[name]
        svg.append(f'<polyline class="trend" fill="none" stroke="{color}" stroke-width="2" '
                   f'points="{pts}"/>')  # fmt: skip
        svg += [f'<circle cx="{fx(i):.1f}" cy="{fy(v):.1f}" r="3" fill="{color}">'
                f"<title>{escape(name)} #{i + 1}: {v:,}</title></circle>"
                for i, v in enumerate(values)]  # fmt: skip
        svg.append(f'<text x="{left + 10 + 80 * j}" y="{h - 1}" fill="{color}">{name}</text>')
    return "".join(svg) + "</svg>"


def _top(samples: SampleDigest | None) -> str:
    if samples is None or samples.rows == 0:
        return '<p class="muted">no samples</p>'
    codes = samples.codes.sort(["len", "code"], descending=[True, False]).head(TOP_N)
    machines = (
        samples.machines.with_columns(pl.col("codes").list.len())
        .sort(["len", "asset"], descending=[True, False])
        .head(TOP_N)
    )
    return (
        "<h3>Alarm codes</h3>"
        + _bar_table(["code", "samples"], codes.rows(), _REJECTED)
        + "<h3>Machines</h3>"
        + _bar_table(["machine", "samples", "distinct codes"], machines.rows(), _NEUTRAL)
    )


def _timeline(incidents: pl.DataFrame | None) -> str:
    """One lane per machine (the most incidents first); a mark per incident, first to last raise."""
    if incidents is None or incidents.height == 0:
        return '<p class="muted">no alarm-log incidents in this snapshot</p>'
    inc = incidents.drop_nulls(["machine", "first_at"]).with_columns(
        pl.col("last_at").fill_null(pl.col("first_at"))
    )
    lanes = (
        (inc.group_by("machine").len().sort(["len", "machine"], descending=[True, False]))
        .head(TIMELINE_MACHINES)["machine"]
        .to_list()
    )
    inc = inc.filter(pl.col("machine").is_in(lanes)).sort("first_at")
    t0, t1 = inc["first_at"].min(), inc["last_at"].max()
    span = max((t1 - t0).total_seconds(), 1.0)  # type: ignore[operator,union-attr]
    left, pw, lane = 110, 600, 22
    h = 30 + lane * len(lanes)

    def fx(t: object) -> float:
        return left + pw * (t - t0).total_seconds() / span  # type: ignore[operator]

    svg = [f'<svg width="{left + pw + 20}" height="{h}" role="img" aria-label="incident timeline">']
    for k, machine in enumerate(lanes):
        y = 10 + lane * k
        svg.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{escape(machine)}</text>')
        svg.append(f'<line x1="{left}" x2="{left + pw}" y1="{y + 8}" y2="{y + 8}" stroke="#eee"/>')
    for row in inc.iter_rows(named=True):
        y = 10 + lane * lanes.index(row["machine"])
        x0, x1 = fx(row["first_at"]), fx(row["last_at"])
        codes = ", ".join(row["alarm_codes"] or [])
        title = f"{row['machine']} {codes}: {row['first_at']} - {row['last_at']}, {row['count']}x"
        svg.append(
            f'<rect class="incident" x="{x0:.1f}" y="{y + 2}" width="{max(x1 - x0, 3):.1f}" '
            f'height="12" fill="{_REJECTED}"><title>{escape(title)}</title></rect>'
        )
    axis = f"{t0:%Y-%m-%d %H:%M} to {t1:%Y-%m-%d %H:%M}"  # type: ignore[str-format]
    svg.append(f'<text x="{left}" y="{h - 2}">{escape(axis)}</text></svg>')
    table = _table(
        ["machine", "incidents", "raises", "first", "last"],
        inc.group_by("machine")
        .agg(pl.len(), pl.col("count").sum(), pl.col("first_at").min(), pl.col("last_at").max())
        .sort(["len", "machine"], descending=[True, False])
        .with_columns(pl.col("first_at", "last_at").dt.to_string("%Y-%m-%d %H:%M"))
        .rows(),
    )
    return "".join(svg) + table


def _examples(samples: SampleDigest | None) -> str:
    """Three samples per tier (picked by a hash of record_id), PII redacted once more."""
    if samples is None or samples.rows == 0:
        return '<p class="muted">no samples</p>'
    turns = (
        samples.examples.drop("_h")
        .with_row_index("_n")
        .explode("messages")
        .unnest("messages")
        .filter(pl.col("role") != "system")
        .with_columns(content=redact_pii(pl.col("content")))
    )
    parts = []
    for (tier,), rows in turns.group_by("tier", maintain_order=True):
        parts.append(f"<h3>Tier {escape(str(tier))}</h3>")
        for (_,), sample in rows.group_by("_n", maintain_order=True):
            first = sample.row(0, named=True)
            parts.append(
                f'<div class="example"><p class="muted">{escape(first["source_file"] or "")}'
                f" row {first['source_row']} · {escape(first['record_id'] or '')}</p>"
            )
            parts += [
                f'<div class="turn"><span class="role">{escape(r)}</span>\n{escape(c or "")}</div>'
                for r, c in sample.select("role", "content").iter_rows()
            ]
            parts.append("</div>")
    return "".join(parts)
