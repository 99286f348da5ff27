"""The report's charts as inline SVG (and coloured tables): funnel, tiers, token-length CDF,
GPU fit, trend across refreshes, incident timeline."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

import polars as pl

from pipeline.publish.report.data import cdf_points, tier_totals
from pipeline.publish.report.markup import Cell, Raw, muted, pct, table
from schemas.manifest import FamilyCoverage, StageCounts
from schemas.plan import GpuFit, Plan

CORPUS_COLORS = {
    "tier_A": "#1b7837",
    "tier_B": "#2166ac",
    "tier_C": "#b35806",
    "pretrain": "#762a83",
}
KEPT, REJECTED, NEUTRAL = "#5aae61", "#d6604d", "#4393c3"
_QUANTILES = (0.5, 0.9, 0.99)  # dotted on each CDF, listed in its legend


def bar(segments: Sequence[tuple[int, str]], top: int, width: int = 240) -> str:
    """An inline SVG bar: segments (value, color) stacked left to right, `top` fills `width`."""
    x, rects = 0.0, []
    for value, color in segments:
        span = width * value / top if top else 0.0
        rects.append(f'<rect x="{x:.1f}" width="{span:.1f}" height="12" fill="{color}"/>')
        x += span
    return f'<svg class="bar" width="{width}" height="12">{"".join(rects)}</svg>'


def bar_table(head: list[str], rows: list[tuple[Cell, ...]], color: str) -> str:
    """A table of (label, count, ...) rows with a bar for the count."""
    if not rows:
        return muted("none")
    top = max(int(r[1]) for r in rows)
    return table([*head, ""], [[*r, Raw(bar([(int(r[1]), color)], top))] for r in rows])


def funnel(stages: dict[str, StageCounts]) -> str:
    """One table per source kind (the stage key's part before `/`), a kept/rejected bar a stage."""
    kinds: dict[str, list[tuple[str, StageCounts]]] = {}
    for key, st in stages.items():
        kind, _, stage = key.rpartition("/")
        kinds.setdefault(kind or "all", []).append((stage, st))
    parts = [f"<h3>{escape(kind)}</h3>" + _funnel_table(rows) for kind, rows in kinds.items()]
    return "".join(parts) or muted("no stages")


def _funnel_table(rows: list[tuple[str, StageCounts]]) -> str:
    top = max(st.read for _, st in rows)
    cells = [
        [
            stage,
            st.read,
            st.kept,
            st.rejected,
            ", ".join(f"{r} {n}" for r, n in sorted(st.by_reason.items())) or "-",
            Raw(bar([(st.kept, KEPT), (st.rejected, REJECTED)], top)),
        ]
        for stage, st in rows
    ]
    return table(["stage", "read", "kept", "rejected", "reasons", "kept | rejected"], cells)


def coverage_table(families: Sequence[FamilyCoverage]) -> str:
    """Per code family: knowledge-base codes, codes seen, covered, missing and never seen,
    incidents with and without an entry; a covered | missing bar of the codes seen."""
    top = max((f.seen for f in families), default=0)
    head = ["family", "KB codes", "seen", "covered", "missing", "never seen", "incidents",
            "incidents without entry", "covered share", "covered | missing"]  # fmt: skip
    rows = [
        [f.family, f.kb_codes, f.seen, f.covered, f.missing, f.never_seen, f.incidents,
         f.incidents_without_entry, pct(f.covered, f.seen),
         Raw(bar([(f.covered, KEPT), (f.missing, REJECTED)], top))]
        for f in families
    ]  # fmt: skip
    return table(head, rows)


def tiers(sft_tokens: pl.DataFrame) -> str:
    """Rows and tokens per SFT tier, a bar for the rows."""
    return bar_table(["tier", "rows", "tokens"], tier_totals(sft_tokens).rows(), NEUTRAL)


@dataclass(frozen=True)
class _TokenAxes:
    """The CDF chart's frame: x tokens per row from `lo` to `hi` (log scale when the lengths
    span 30x or more), y the share of rows up to that length."""

    lo: int
    hi: int
    log: bool
    W, H, LEFT, TOP, PW, PH = 720, 320, 50, 10, 640, 270  # the SVG and its plot area

    @classmethod
    def of(cls, corpora: dict[str, pl.Series]) -> _TokenAxes:
        lo = min(int(s.min()) for s in corpora.values())  # type: ignore[arg-type]
        hi = max(int(s.max()) for s in corpora.values())  # type: ignore[arg-type]
        log = hi / max(lo, 1) >= 30
        lo, hi = (max(lo, 1), max(hi, 2)) if log else (0, max(hi, 1))
        return cls(lo, hi, log)

    def x(self, v: float) -> float:
        if not self.log:
            return self.LEFT + self.PW * v / self.hi
        return self.LEFT + self.PW * math.log(max(v, self.lo) / self.lo) / math.log(
            self.hi / self.lo
        )

    def y(self, p: float) -> float:
        return self.TOP + self.PH * (1 - p)

    def ticks(self) -> list[int]:
        if self.log:
            return [10**k for k in range(0, 8) if self.lo <= 10**k <= self.hi]
        step = 10 ** max(0, len(str(self.hi)) - 1)
        step = step // 2 if self.hi // step < 3 and step > 1 else step
        return list(range(0, self.hi + 1, step))


def cdf_chart(corpora: dict[str, pl.Series]) -> str:
    """Polylines of the token-length CDF per corpus; dots at p50/p90/p99; log x when skewed;
    a legend table with each corpus's rows, quantiles and longest row."""
    if not corpora:
        return muted("no token counts")
    axes = _TokenAxes.of(corpora)
    svg = [f'<svg width="{axes.W}" height="{axes.H}" role="img" aria-label="token length CDF">']
    svg += _cdf_grid(axes)
    legend = []
    for name, s in corpora.items():
        color = CORPUS_COLORS.get(name, "#333")
        qs = [int(s.quantile(q, interpolation="higher") or 0) for q in _QUANTILES]
        svg += _cdf_line(axes, name, s, color, qs)
        swatch = Raw(f'<span style="color:{color}">&#9644;</span> {escape(name)}')
        legend.append([swatch, s.len(), *qs, int(s.max())])  # type: ignore[arg-type]
    svg.append("</svg>")
    return "".join(svg) + table(["corpus", "rows", "p50", "p90", "p99", "max"], legend)


def _cdf_grid(axes: _TokenAxes) -> list[str]:
    """Horizontal lines at shares of rows, vertical ones at token ticks, the x axis label."""
    left, top, pw, ph = axes.LEFT, axes.TOP, axes.PW, axes.PH
    svg = []
    for p in (0.0, 0.25, 0.5, 0.75, 0.9, 0.99):
        y = axes.y(p)
        svg.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{p:g}</text>')
    for t in axes.ticks():
        x = axes.x(t)
        svg.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" stroke="#eee"/>')
        svg.append(f'<text x="{x:.1f}" y="{top + ph + 14}" text-anchor="middle">{t:,}</text>')
    axis = f"tokens per row ({'log' if axes.log else 'linear'} scale)"
    svg.append(f'<text x="{left + pw / 2}" y="{axes.H - 4}" text-anchor="middle">{axis}</text>')
    return svg


def _cdf_line(axes: _TokenAxes, name: str, s: pl.Series, color: str, qs: list[int]) -> list[str]:
    """One corpus's CDF polyline and a dot (with a tooltip) at each of its quantiles `qs`."""
    pts = " ".join(f"{axes.x(x):.1f},{axes.y(y):.1f}" for x, y in cdf_points(s).iter_rows())
    svg = [
        f'<polyline class="cdf" data-corpus="{escape(name)}" fill="none" stroke="{color}"'
        f' stroke-width="1.5" points="{pts}"/>'
    ]
    svg += [
        f'<circle cx="{axes.x(v):.1f}" cy="{axes.y(q):.1f}" r="3" fill="{color}">'
        f"<title>{escape(name)} p{round(q * 100)} = {v}</title></circle>"
        for q, v in zip(_QUANTILES, qs, strict=True)
    ]
    return svg


def gpu_matrix(plan: Plan) -> str:
    """Stages by GPUs: a cell per fit, coloured fits / fits with recomputation / does not fit."""
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


def line_chart(series: dict[str, list[int]], colors: dict[str, str]) -> str:
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


def timeline_chart(inc: pl.DataFrame, lanes: list[str]) -> str:
    """One lane per machine of `lanes`; a mark per incident of `inc`, first to last raise."""
    t0, t1 = inc["first_at"].min(), inc["last_at"].max()
    span = max((t1 - t0).total_seconds(), 1.0)  # type: ignore[operator,union-attr]
    left, pw, lane = 110, 600, 22
    h = 30 + lane * len(lanes)

    def fx(t: datetime) -> float:
        return left + pw * (t - t0).total_seconds() / span  # type: ignore[operator]

    svg = [f'<svg width="{left + pw + 20}" height="{h}" role="img" aria-label="incident timeline">']
    for k, machine in enumerate(lanes):
        y = 10 + lane * k
        svg.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{escape(machine)}</text>')
        svg.append(f'<line x1="{left}" x2="{left + pw}" y1="{y + 8}" y2="{y + 8}" stroke="#eee"/>')
    lane_of = {machine: k for k, machine in enumerate(lanes)}
    svg += [
        _incident(row, 10 + lane * lane_of[row["machine"]], fx) for row in inc.iter_rows(named=True)
    ]
    axis = f"{t0:%Y-%m-%d %H:%M} to {t1:%Y-%m-%d %H:%M}"  # type: ignore[str-format]
    svg.append(f'<text x="{left}" y="{h - 2}">{escape(axis)}</text></svg>')
    return "".join(svg)


def _incident(row: dict[str, object], y: int, fx: Callable[[datetime], float]) -> str:
    """An incident's mark in its lane (top at `y`), its codes and raises in the tooltip."""
    x0, x1 = fx(row["first_at"]), fx(row["last_at"])  # type: ignore[arg-type]
    codes = ", ".join(row["alarm_codes"] or [])  # type: ignore[arg-type]
    title = f"{row['machine']} {codes}: {row['first_at']} - {row['last_at']}, {row['count']}x"
    return (
        f'<rect class="incident" x="{x0:.1f}" y="{y + 2}" width="{max(x1 - x0, 3):.1f}" '
        f'height="12" fill="{REJECTED}"><title>{escape(title)}</title></rect>'
    )
