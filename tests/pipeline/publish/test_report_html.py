"""The snapshot report page, on a real manifest and a plan from the planner."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import polars as pl
import pytest

from pipeline.publish.report_html import CDF_POINTS, render_report
from pipeline.training.plan import plan_stages
from schemas.manifest import Counts, InputFile, Manifest, RefreshSummary, StageCounts
from schemas.plan import Plan, PlanConfig, StageConfig

HOSTILE = "workorders/<script>x</script>.csv"
STAGES = {
    "workorder/ingest": {"read": 138, "kept": 136, "rejected": 2, "rejected_malformed_row": 2},
    "workorder/filter": {"read": 136, "kept": 107, "rejected": 29, "rejected_placeholder": 8,
                         "rejected_test_entry": 6, "rejected_empty": 5, "rejected_phone_only": 10},
    "workorder/dedup": {"read": 107, "kept": 100, "rejected": 7, "rejected_exact_dup": 4,
                        "rejected_near_dup": 3},
    "alarm_log/ingest": {"read": 48, "kept": 45, "rejected": 3, "rejected_bad_timestamp": 1,
                         "rejected_malformed_line": 2},
    "alarm_log/incidents": {"read": 45, "kept": 20, "rejected": 25, "rejected_state_change": 16,
                            "rejected_merged_into_incident": 9},
}  # fmt: skip


def _manifest() -> Manifest:
    stages = {k: StageCounts.from_counters(v) for k, v in STAGES.items()}
    by_reason: dict[str, int] = {}
    for st in stages.values():
        for reason, n in st.by_reason.items():
            by_reason[reason] = by_reason.get(reason, 0) + n
    rejected = sum(by_reason.values())
    inputs = [
        InputFile(path="workorders/维修工单_2024.csv", source_kind="workorder", bytes=13179,
                  sha256="a" * 64, encoding="gbk", rows=62),
        InputFile(path=HOSTILE, source_kind="workorder", bytes=10120, sha256="b" * 64,
                  encoding="utf-8-sig", rows=76),
        InputFile(path="alarm_logs/VMC-03_fanuc_alarm_history.txt", source_kind="alarm_log",
                  bytes=1748, sha256="c" * 64, encoding="gbk", rows=48, skipped_lines=8),
    ]  # fmt: skip
    return Manifest(
        snapshot_id="20240320T080000000000Z",
        created_at="20240320T080000000000Z",
        flow="refresh-corpus",
        code_version="0.1.0+g3db217b",
        config_hash="d9435be5" * 8,
        inputs=inputs,
        counts=Counts(
            read=186, kept=186 - rejected, rejected=rejected, by_reason=by_reason, stages=stages
        ),  # fmt: skip
        sources={"manual": {"files": 3, "sections": 24, "chunks": 7}},
        refresh=RefreshSummary(
            previous_snapshot=None, processed=[i.path for i in inputs], carried=[], removed=[]
        ),  # fmt: skip
        outputs=[],
    )


def _tokens() -> tuple[pl.DataFrame, pl.Series]:
    rng = np.random.default_rng(11)
    a = rng.lognormal(5.0, 0.4, 700).astype(np.int64) + 40  # four-part samples, long tail
    b = rng.lognormal(4.0, 0.6, 170).astype(np.int64) + 10  # short B rows
    sft = pl.DataFrame(
        {"tier": ["A"] * len(a) + ["B"] * len(b), "n_tokens": np.concatenate([a, b])},
        schema={"tier": pl.String, "n_tokens": pl.Int32},
    )
    return sft, pl.Series("n_tokens", rng.integers(300, 2049, 90), pl.Int32)  # manual chunks


def _plan(sft: pl.DataFrame, pretrain: pl.Series) -> Plan:
    gpus = ("rtx-4090", "h200-141g")
    cfg = PlanConfig(
        stages=[
            StageConfig(name="domain-adapt", corpus="pretrain", model="qwen2.5-14b",
                        method="full", gpus=gpus),
            StageConfig(name="sft-expert", corpus="tier_A", model="qwen2.5-0.5b", method="full",
                        quantile=1.0, gpus=gpus),
        ]
    )  # fmt: skip
    long_a = pl.Series([4000] * 50 + [300] * 50)  # long rows: the small card needs recomputation
    return plan_stages({"pretrain": pretrain, "tier_A": long_a}, cfg)


class _Balance(HTMLParser):
    """Every opened element closed in order (void and self-closing SVG elements aside)."""

    VOID = {"meta", "br", "img", "hr", "input", "link"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.seen: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


@pytest.fixture(scope="module")
def page() -> str:
    sft, pretrain = _tokens()
    return render_report(_manifest(), _plan(sft, pretrain), sft, pretrain)


def _cdf_lines(page: str) -> dict[str, list[tuple[float, float]]]:
    found = re.findall(r'<polyline class="cdf" data-corpus="([^"]+)"[^>]* points="([^"]*)"', page)
    return {
        name: [tuple(map(float, p.split(","))) for p in pts.split()]  # type: ignore[misc]
        for name, pts in found
    }


def test_page_is_balanced_self_contained_html(page: str) -> None:
    parser = _Balance()
    parser.feed(page)
    parser.close()
    assert parser.errors == [] and parser.stack == []
    assert page.startswith("<!DOCTYPE html>")
    assert {"html", "head", "body", "table", "svg", "polyline", "h1", "h2"} <= set(parser.seen)
    assert "script" not in parser.seen and "http" not in page and "src=" not in page


def test_header_and_funnel_with_every_stage_and_reason(page: str) -> None:
    for text in ("20240320T080000000000Z", "refresh-corpus", "0.1.0+g3db217b", "d9435be5" * 8):
        assert text in page
    assert "<h3>workorder</h3>" in page and "<h3>alarm_log</h3>" in page
    for key, counters in STAGES.items():
        stage = key.split("/")[1]
        row = f"<tr><td>{stage}</td>" + "".join(
            f'<td class="n">{counters[k]}</td>' for k in ("read", "kept", "rejected")
        )
        assert row in page, key
        for name, n in counters.items():
            if name.startswith("rejected_"):
                reason = name.removeprefix("rejected_")
                assert f"{reason} {n}" in page  # in the stage's row
    # all-stage reasons, most rejected first
    assert '<td>state_change</td><td class="n">16</td>' in page
    assert '<td>phone_only</td><td class="n">10</td>' in page
    assert page.index("<td>state_change</td>") < page.index("<td>bad_timestamp</td>")


def test_tiers_and_one_cdf_per_corpus_with_data(page: str) -> None:
    sft, pretrain = _tokens()
    assert (
        f'<td>A</td><td class="n">700</td><td class="n">{sft["n_tokens"][:700].sum():,}</td>'
        in page
    )
    lines = _cdf_lines(page)
    assert sorted(lines) == ["pretrain", "tier_A", "tier_B"]  # no tier C rows: no line
    for points in lines.values():
        assert 2 <= len(points) <= CDF_POINTS
        xs, ys = zip(*points, strict=True)
        assert list(xs) == sorted(xs) and list(ys) == sorted(ys, reverse=True)  # SVG y grows down
    p99 = int(pretrain.quantile(0.99, interpolation="higher"))  # type: ignore[arg-type]
    assert f"<title>pretrain p99 = {p99}</title>" in page
    assert sft["n_tokens"].min() < 2048 / 30  # type: ignore[operator]
    assert "log scale" in page  # lengths span more than 30x


def test_cdf_drops_nothing_but_points_and_goes_linear_on_narrow_lengths() -> None:
    sft = pl.DataFrame({"tier": ["C"] * 5000, "n_tokens": list(range(200, 700)) * 10})
    page = render_report(_manifest(), Plan(headroom=0.15, stages=[]), sft, None)
    (points,) = _cdf_lines(page).values()
    assert len(points) == CDF_POINTS
    assert "linear scale" in page and '<td class="n">699</td>' in page  # max in the legend


def test_gpu_matrix_cells(page: str) -> None:
    sft, pretrain = _tokens()
    plan = _plan(sft, pretrain)
    cells = re.findall(r'<td class="(ok|rc|no)"[^>]*>(.*?)</td>', page)
    assert len(cells) == 4
    expected = []
    for st in plan.stages:
        for g in st.gpus:
            cls = "no" if not g.fits else "rc" if g.recompute_needed else "ok"
            expected.append(cls)
            if g.fits:
                assert f"mb {g.micro_batch} · {g.recompute}<br>{g.peak_gib:.1f} / " in page
    assert [c for c, _ in cells] == expected
    assert {"no", "rc", "ok"} <= set(expected)  # 14B full fine-tune fits nowhere; recompute on 4090
    assert "<th>rtx-4090</th><th>h200-141g</th>" in page
    assert "<td>sft-expert</td><td>tier_A</td><td>qwen2.5-0.5b</td>" in page


def test_hostile_names_are_escaped(page: str) -> None:
    assert "<script>" not in page
    assert "workorders/&lt;script&gt;x&lt;/script&gt;.csv" in page
    assert "workorders/维修工单_2024.csv" in page
    assert "<dt>chunks</dt><dd>7</dd>" in page


def test_run_that_kept_nothing_still_renders() -> None:
    empty = pl.DataFrame(schema={"tier": pl.String, "n_tokens": pl.Int32})
    page = render_report(_manifest(), Plan(headroom=0.15, stages=[]), empty, None)
    parser = _Balance()
    parser.feed(page)
    assert parser.errors == [] and parser.stack == []
    assert "no token counts" in page and _cdf_lines(page) == {}


def _work_orders() -> pl.DataFrame:
    """Rendered work-order samples as technicians type them; machines recur across files."""
    from pipeline.stages.messages import render_messages

    return render_messages(
        pl.DataFrame(
            {
                "record_id": [f"wo-{i}" for i in range(8)],
                "source_file": ["workorders/维修工单_2024.csv"] * 4 + ["workorders/sv.csv"] * 4,
                "source_row": [3, 4, 5, 6, 2, 3, 4, 5],
                "tier": ["A", "A", "B", "C", "A", "A", "B", "A"],
                "asset": ["CNC-25", "CNC-25", "M-205", None, "CNC-25", "M-205", "CNC-25", "M-102"],
                "language": ["zh", "zh", "zh", "zh", "en", "en", "en", "en"],
                "alarm_codes": [["FANUC:SV0436"], ["FANUC:SV0436", "FANUC:SV0401"], [], None,
                                ["FANUC:SV0401"], ["SINUMERIK:25000"], ["FANUC:SV0436"],
                                ["HAAS:161"]],
                "symptom": ["Y轴报警SV0436", "开机报警SV0401 SV0436", "换刀卡刀", "主轴异响",
                            "SV0401 at power on", "25000 X axis encoder", "SV436 again",
                            "Alarm 161 X axis drive fault"],
                "diagnosis": ["润滑不良", "MCC未吸合", None, None, "MCC contact worn",
                              "Encoder cable chafed", "Y axis gib dry", "Amplifier"],
                "action": ["疏通油路", "更换MCC", "调整机械手", None, "Replaced MCC",
                           "Replaced cable", "Lubed Y way", "Replaced amplifier"],
                "prevention": [None] * 8,
            }
        )
    )  # fmt: skip


def _section_html(page: str, key: str) -> str:
    start = page.index(f'<section id="{key}">')
    return page[start : page.index("</section>", start)]


def test_digest_merged_chunk_by_chunk_shows_what_the_whole_table_shows() -> None:
    """Top codes, machines (distinct codes over all chunks, not summed) and examples are the
    same whether the SFT rows are digested at once or a chunk at a time."""
    from pipeline.publish.report_html import SampleDigest

    rows = _work_orders()
    plan = Plan(headroom=0.15, stages=[])
    tokens = pl.DataFrame(schema={"tier": pl.String, "n_tokens": pl.Int32})
    whole = render_report(_manifest(), plan, tokens, None, samples=SampleDigest.of(rows))
    merged = SampleDigest.of(rows.slice(0, 3))
    for chunk in (rows.slice(3, 2), rows.slice(5, 3)):
        merged = merged.merge(SampleDigest.of(chunk))
    chunked = render_report(_manifest(), plan, tokens, None, samples=merged)
    assert merged.rows == rows.height
    for key in ("top", "examples"):
        assert _section_html(chunked, key) == _section_html(whole, key)
    machines = dict(zip(merged.machines["asset"], merged.machines["codes"].list.len(), strict=True))
    assert machines == {"CNC-25": 2, "M-205": 1, "M-102": 1}  # SV0436 in 3 chunks, counted once
    samples = dict(zip(merged.machines["asset"], merged.machines["len"], strict=True))
    assert samples == {"CNC-25": 4, "M-205": 2, "M-102": 1}
    codes = dict(zip(merged.codes["code"], merged.codes["len"], strict=True))
    assert codes["FANUC:SV0436"] == 3 and codes["FANUC:SV0401"] == 2
    assert merged.examples.group_by("tier").len().sort("tier")["len"].to_list() == [3, 2, 1]
