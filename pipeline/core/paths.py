"""Where a run reads and writes: checked before anything starts.

The input must exist and be readable; the output must be a folder (or creatable) that is
neither inside the input (a later run would read its own snapshots) nor holding it.
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.core.errors import UsageError


def check_input(flag: str, value: str | Path) -> Path:
    """An existing, readable file or folder."""
    path = Path(value)
    if not path.exists():
        raise UsageError(f"{flag} {value}: no such file or folder")
    mode = os.R_OK | (os.X_OK if path.is_dir() else 0)
    if not os.access(path, mode):
        raise UsageError(f"{flag} {value}: not readable (permission denied)")
    return path


def check_output(out: str | Path, inputs: list[Path]) -> Path:
    """A folder that exists or can be created, outside every input and not holding one."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {out}: is a file, not a folder")
    existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise UsageError(f"--out {out}: cannot create it, {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: cannot write to {existing} (permission denied)")
    resolved = path.resolve()
    for given in inputs:
        source = given.resolve()
        if resolved == source or resolved.is_relative_to(source):
            raise UsageError(
                f"--out {out} is inside the input {given}: a later run would read its own "
                "snapshots; choose an output folder outside the input"
            )
        if source.is_relative_to(resolved):
            raise UsageError(
                f"the input {given} is inside --out {out}: snapshots and state are never "
                "read as input"
            )
    return path
