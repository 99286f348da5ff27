"""The one margin policy: what the estimate says, what to plan with, what must fit.

- expected: the estimate itself (the `--measure` figure: allocated, reserved or device).
- PEAK (the headline): expected lifted by the calibrated safety bias (HEADLINE_BIAS, 12 %), the
  smallest lift that keeps leave-one-source-out under-estimates beyond 10 % rare.
- plan with: the device total (nvidia-smi's figure, at least any `--measure` figure) lifted by
  one margin, the larger of its regime's leave-one-source-out margin (margins.py, generated
  by tools/calibration.py) and the safety bias. So it is never below PEAK, whatever the
  measure, the regime or the headroom: the bias and the regime margin do not stack, the larger
  one applies once.
- headroom: the share of the card kept free for what no estimate of this process covers (other
  processes, a display, evaluation); not an error margin. A setup fits a card when its plan
  with figure is at most (1 - headroom) of the card's memory.
"""

from __future__ import annotations

from schemas.memory import HEADLINE_BIAS

from .margins import DEFAULT_PLAN_MARGIN, PLAN_MARGINS


def plan_margin(regime: str) -> float:
    """The margin of the plan-with figure of `regime`: its own, never below the safety bias."""
    return max(PLAN_MARGINS.get(regime, DEFAULT_PLAN_MARGIN), HEADLINE_BIAS)


def budget_bytes(memory_bytes: int, headroom: float) -> float:
    """What a plan-with figure may reach on a card of `memory_bytes`, `headroom` kept free."""
    return memory_bytes * (1.0 - headroom)
