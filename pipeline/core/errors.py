"""The pipeline's known errors: problems a user can fix, reported as one line.

`str(error)` names the file and line (or the configuration field) and says what is wrong; the
CLI prints it without a traceback and exits non-zero. Anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations


class PipelineError(Exception):
    """A known failure; its message is one line naming the file and line or field."""

    def __str__(self) -> str:
        return " ".join(super().__str__().split())


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
