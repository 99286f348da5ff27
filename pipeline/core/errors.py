"""The pipeline's known errors: problems a user can fix, reported as one line.

`str(error)` names the file and line (or the configuration field) and says what is wrong; the
CLI prints it without a traceback and exits non-zero. Anything else is a bug and keeps its
traceback. The base class and the configuration error live in `schemas.errors` (the
configuration raises them, and schemas import nothing from the pipeline); they are re-exported
here so that `except PipelineError` catches every known error.
"""

from __future__ import annotations

from schemas.errors import ConfigError, PipelineError

__all__ = [
    "ConfigError",
    "InputFileError",
    "PipelineError",
    "QuarantineError",
    "StateError",
    "UsageError",
]


class UsageError(PipelineError):
    """A command line or a call that cannot run (bad paths, options that do not go together)."""


class InputFileError(PipelineError):
    """One input file cannot be read at all; a refresh quarantines it and goes on (or fails,
    when strict). `reason` is the reject reason code."""

    reason = "unreadable_file"


class QuarantineError(PipelineError):
    """A strict run met input files it had to quarantine."""


class StateError(PipelineError):
    """The corpus's own state (ledger, carried tables of the last snapshot) cannot be read."""
