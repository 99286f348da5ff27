"""Human-readable funnel of a run, from the manifest counts."""

from __future__ import annotations

from schemas.manifest import Counts


def funnel_markdown(counts: Counts, extra_sections: dict[str, dict[str, int]] | None = None) -> str:
    """Markdown: totals, then read/kept/rejected and reasons per stage."""
    lines = [
        "## Funnel",
        "",
        f"Rows read **{counts.read}**, kept **{counts.kept}**, rejected **{counts.rejected}** "
        f"({_share(counts.kept, counts.read)} kept).",
        "",
        "| stage | read | kept | rejected | reasons |",
        "|---|---:|---:|---:|---|",
    ]
    for name, stage in counts.stages.items():
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(stage.by_reason.items())) or "-"
        lines.append(f"| {name} | {stage.read} | {stage.kept} | {stage.rejected} | {reasons} |")
    lines += ["", "Rejected by reason (all stages):", ""]
    lines += [f"- {r}: {n}" for r, n in sorted(counts.by_reason.items())] or ["- none"]
    for title, table in (extra_sections or {}).items():
        lines += ["", f"{title}:", ""]
        lines += [f"- {k}: {v}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "n/a"
