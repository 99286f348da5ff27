"""Task cache keys: a task's key hashes its inputs' content, the configuration and the code.

Keys are built by the flow and passed to each task as `key`; Prefect persists the task's result
(a few Parquet paths) under that key, so a re-run after a crash finds finished tasks `Cached`
and recomputes only the rest.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any

PACKAGES = ("pipeline", "schemas", "flows")
REPO = Path(__file__).resolve().parent.parent


@cache
def code_fingerprint() -> str:
    """sha256 over the project's Python sources: any code change invalidates cached tasks."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            digest.update(path.relative_to(REPO).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def task_key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]


def by_key(_context: Any, parameters: dict[str, Any]) -> str:
    """cache_key_fn: the `key` parameter the flow computed."""
    return parameters["key"]
