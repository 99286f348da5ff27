"""The known errors: problems a user can fix, reported as one line.

`str(error)` names the file and line (or the configuration field) and says what is wrong; the
CLI prints it without a traceback and exits non-zero. Anything else is a bug and keeps its
traceback. `pipeline.core.errors` re-exports these and adds the pipeline's own.
"""

from __future__ import annotations


class PipelineError(Exception):
    """A known failure; its message is one line naming the file and line or field."""

    def __str__(self) -> str:
        return " ".join(super().__str__().split())


class ConfigError(PipelineError, ValueError):
    """A configuration file that cannot be used; the message names the file and the field."""
