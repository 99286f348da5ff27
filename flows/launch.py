"""Starting a flow from the command line: which flows there are, and Prefect's settings for a
local run (set before Prefect is imported)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path

# flow name -> "module:function"; imported lazily so `estimate` does not pay for Prefect.
FLOWS: dict[str, str] = {
    "clean-workorders": "flows.clean_workorders:clean_workorders",
    "clean-fault-logs": "flows.clean_fault_logs:clean_fault_logs",
    "clean-manuals": "flows.clean_manuals:clean_manuals",
    "refresh-corpus": "flows.refresh_corpus:refresh_corpus",
}


def load_flow(name: str) -> Callable[..., object]:
    """The flow function named `name` in `FLOWS`, imported now."""
    module, func = FLOWS[name].split(":")
    return getattr(importlib.import_module(module), func)


def prefect_environment(out: Path) -> dict[str, str]:
    """Prefect settings for a run from any folder: offline, loopback only, and (without a
    server in PREFECT_API_URL) a temporary server whose database lives beside the corpus,
    `<out>/.prefect`, unless PREFECT_HOME names one; never `~/.prefect` by accident."""
    env = {
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": os.environ.get(
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90"
        ),
    }
    home = Path(os.environ.get("PREFECT_HOME") or out.absolute() / ".prefect").absolute()
    env |= {
        "PREFECT_HOME": str(home),
        "PREFECT_PROFILES_PATH": str(home / "profiles.toml"),
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(home / "storage"),
    }
    return env


def start_prefect(out: Path) -> None:
    """Apply `prefect_environment` (before Prefect is imported) and create its home."""
    env = prefect_environment(out)
    os.environ.update(env)
    Path(env["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
