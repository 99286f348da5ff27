"""Step keys and the code version a manifest records.

Step keys: a step's key hashes its inputs' content, the configuration and the code.

The refresh computes each step's key before running it; a runner that caches (the Prefect
flows) finds finished steps by key after a crash and recomputes only the rest.
"""

from __future__ import annotations

import hashlib
import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

PACKAGES = ("pipeline", "schemas", "flows")
REPO = Path(__file__).resolve().parents[2]


@cache
def code_fingerprint() -> str:
    """sha256 over the project's Python sources: any code change gives new keys."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            digest.update(path.relative_to(REPO).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def step_key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]


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
