"""The steps a runner can execute, by name: every step the funnels declare (and the dedup
stage's own steps), built from the declarations, never written out by hand."""

from __future__ import annotations

from pipeline.dedup import declared as dedup
from pipeline.execution.step import Funnel, Step
from pipeline.funnels import alarm_logs, manuals, workorders

FUNNELS: tuple[Funnel, ...] = (workorders.FUNNEL, manuals.FUNNEL, alarm_logs.FUNNEL)

STEPS: dict[str, Step] = {
    step.name: step
    for step in (*(s for f in FUNNELS for s in f.steps), *dedup.STEPS)
    if step.scope != "driver"
}

_KINDS = {step.name: f.kind for f in FUNNELS for step in f.steps}


def kind_of(step: str) -> str:
    """The source kind whose funnel declares `step`."""
    return _KINDS[step]
