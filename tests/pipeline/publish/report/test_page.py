"""The snapshot report page, on a real manifest and a plan from the planner."""

from __future__ import annotations

from html.parser import HTMLParser

import polars as pl
import pytest

from pipeline.publish.report.page import render_report
from schemas.manifest import FamilyCoverage, KbCoverage, MissingCode
from schemas.plan import Plan
from tests.pipeline.publish.report.fixtures import manifest, plan, tokens


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
    sft, pretrain = tokens()
    return render_report(manifest(), plan(sft, pretrain), sft, pretrain)


def test_page_is_balanced_self_contained_html(page: str) -> None:
    parser = _Balance()
    parser.feed(page)
    parser.close()
    assert parser.errors == [] and parser.stack == []
    assert page.startswith("<!DOCTYPE html>")
    assert {"html", "head", "body", "table", "svg", "polyline", "h1", "h2"} <= set(parser.seen)
    assert "script" not in parser.seen and "http" not in page and "src=" not in page


def test_header_and_rejects_by_reason_most_first(page: str) -> None:
    for text in ("20240320T080000000000Z", "refresh-corpus", "0.1.0+g3db217b", "d9435be5" * 8):
        assert text in page
    assert "<h3>workorder</h3>" in page and "<h3>alarm_log</h3>" in page  # the funnel
    # all-stage reasons, most rejected first
    assert '<td>state_change</td><td class="n">16</td>' in page
    assert '<td>phone_only</td><td class="n">10</td>' in page
    assert page.index("<td>state_change</td>") < page.index("<td>bad_timestamp</td>")


def test_plan_table_and_gpu_matrix(page: str) -> None:
    assert "<td>sft-expert</td><td>tier_A</td><td>qwen2.5-0.5b</td>" in page
    assert "<th>rtx-4090</th><th>h200-141g</th>" in page


def test_hostile_names_are_escaped(page: str) -> None:
    assert "<script>" not in page
    assert "workorders/&lt;script&gt;x&lt;/script&gt;.csv" in page
    assert "workorders/维修工单_2024.csv" in page
    assert "<dt>chunks</dt><dd>7</dd>" in page


def test_run_that_kept_nothing_still_renders() -> None:
    empty = pl.DataFrame(schema={"tier": pl.String, "n_tokens": pl.Int32})
    page = render_report(manifest(), Plan(headroom=0.15, stages=[]), empty, None)
    parser = _Balance()
    parser.feed(page)
    assert parser.errors == [] and parser.stack == []
    assert "no token counts" in page and 'class="cdf"' not in page
    for key in ("trend", "top", "timeline", "kb_coverage", "examples"):
        assert f'<section id="{key}">' in page
    assert "no coverage figures in this manifest" in page


def _coverage() -> KbCoverage:
    def family(name: str, kb: int, missing: list[tuple[str, int, int]], never: list[str]):
        return FamilyCoverage(
            family=name, kb_codes=kb, seen=kb - len(never) + len(missing),
            covered=kb - len(never), missing=len(missing), never_seen=len(never),
            incidents=sum(i for _, i, _ in missing), incidents_without_entry=1,
            top_missing=[MissingCode(code=c, incidents=i, workorders=w, seen=i + w)
                         for c, i, w in missing],
            never_seen_codes=never,
        )  # fmt: skip

    return KbCoverage(
        top_n=20,
        families=[
            family("FANUC", 8, [("FANUC:OT0500", 1, 1), ("FANUC:SV0411", 0, 3)], ["FANUC:EX1005"]),
            family("HAAS", 0, [("HAAS:<b>108</b>", 0, 6)], []),
        ],
    )


def test_coverage_section_lists_families_and_the_codes_seen_most_without_an_entry() -> None:
    sft, pretrain = tokens()
    m = manifest().model_copy(update={"kb_coverage": _coverage()})
    page = render_report(m, plan(sft, pretrain), sft, pretrain)
    start = page.index('<section id="kb_coverage">')
    section = page[start : page.index("</section>", start)]
    # FANUC: 8 KB codes, 9 seen, 7 covered, 2 missing, 1 never seen, 1 incident, 1 without
    assert "<td>FANUC</td>" + "".join(f'<td class="n">{n}</td>' for n in (8, 9, 7, 2, 1)) in (
        section
    )
    top = [section.index(c) for c in ("HAAS:&lt;b&gt;108", "FANUC:SV0411", "FANUC:OT0500")]
    assert top == sorted(top)  # most seen first, over the families
    assert "<b>108" not in section
    assert "<dt>FANUC (1)</dt><dd>FANUC:EX1005</dd>" in section
