"""The code version a manifest records: package version, git commit and source fingerprint."""

from __future__ import annotations

import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version

from flows.caching import REPO, code_fingerprint


@cache
def code_version() -> str:
    """e.g. `0.1.0+g1a2b3c4d5e6f src:9f8e7d6c5b4a` (the fingerprint differs in a dirty tree)."""
    try:
        base = version("cnc-corpus")
    except PackageNotFoundError:
        base = "0+unknown"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    label = f"{base}+g{commit}" if commit else base
    return f"{label} src:{code_fingerprint()[:12]}"
