"""The report's charts: funnel per source kind, tiers, token-length CDFs, GPU fit."""

from __future__ import annotations

import re

import polars as pl

from pipeline.publish.report.charts import cdf_chart, funnel, gpu_matrix, tiers
from pipeline.publish.report.data import CDF_POINTS, corpora
from tests.pipeline.publish.report.fixtures import STAGES, manifest, plan, tokens


def _cdf_lines(html: str) -> dict[str, list[tuple[float, float]]]:
    found = re.findall(r'<polyline class="cdf" data-corpus="([^"]+)"[^>]* points="([^"]*)"', html)
    return {
        name: [tuple(map(float, p.split(","))) for p in pts.split()]  # type: ignore[misc]
        for name, pts in found
    }


def test_funnel_with_every_stage_and_reason() -> None:
    html = funnel(manifest().counts.stages)
    assert "<h3>workorder</h3>" in html and "<h3>alarm_log</h3>" in html
    for key, counters in STAGES.items():
        stage = key.split("/")[1]
        row = f"<tr><td>{stage}</td>" + "".join(
            f'<td class="n">{counters[k]}</td>' for k in ("read", "kept", "rejected")
        )
        assert row in html, key
        for name, n in counters.items():
            if name.startswith("rejected_"):
                reason = name.removeprefix("rejected_")
                assert f"{reason} {n}" in html  # in the stage's row


def test_tiers_and_one_cdf_per_corpus_with_data() -> None:
    sft, pretrain = tokens()
    assert (
        f'<td>A</td><td class="n">700</td><td class="n">{sft["n_tokens"][:700].sum():,}</td>'
        in tiers(sft)
    )
    html = cdf_chart(corpora(sft, pretrain))
    lines = _cdf_lines(html)
    assert sorted(lines) == ["pretrain", "tier_A", "tier_B"]  # no tier C rows: no line
    for points in lines.values():
        assert 2 <= len(points) <= CDF_POINTS
        xs, ys = zip(*points, strict=True)
        assert list(xs) == sorted(xs) and list(ys) == sorted(ys, reverse=True)  # SVG y grows down
    p99 = int(pretrain.quantile(0.99, interpolation="higher"))  # type: ignore[arg-type]
    assert f"<title>pretrain p99 = {p99}</title>" in html
    assert sft["n_tokens"].min() < 2048 / 30  # type: ignore[operator]
    assert "log scale" in html  # lengths span more than 30x


def test_cdf_drops_nothing_but_points_and_goes_linear_on_narrow_lengths() -> None:
    sft = pl.DataFrame({"tier": ["C"] * 5000, "n_tokens": list(range(200, 700)) * 10})
    html = cdf_chart(corpora(sft, None))
    (points,) = _cdf_lines(html).values()
    assert len(points) == CDF_POINTS
    assert "linear scale" in html and '<td class="n">699</td>' in html  # max in the legend


def test_no_token_counts_no_chart() -> None:
    empty = pl.DataFrame(schema={"tier": pl.String, "n_tokens": pl.Int32})
    assert cdf_chart(corpora(empty, None)) == '<p class="muted">no token counts</p>'


def test_gpu_matrix_cells() -> None:
    sft, pretrain = tokens()
    the_plan = plan(sft, pretrain)
    html = gpu_matrix(the_plan)
    cells = re.findall(r'<td class="(ok|rc|no)"[^>]*>(.*?)</td>', html)
    assert len(cells) == 4
    expected = []
    for st in the_plan.stages:
        for g in st.gpus:
            cls = "no" if not g.fits else "rc" if g.recompute_needed else "ok"
            expected.append(cls)
            if g.fits:
                assert f"mb {g.micro_batch} · {g.recompute}<br>{g.peak_gib:.1f} / " in html
    assert [c for c, _ in cells] == expected
    assert {"no", "rc", "ok"} <= set(expected)  # 14B full fine-tune fits nowhere; recompute on 4090
    assert "<th>rtx-4090</th><th>h200-141g</th>" in html
