"""Shared fixtures: the repository paths, the external data folder, a Prefect test server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Before anything imports Prefect: offline, no telemetry, generous start timeout on 2 cores.
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")

REPO = Path(__file__).resolve().parent.parent
SAMPLE_DATA = REPO / "sample_data"
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def sample_data() -> Path:
    return SAMPLE_DATA


@pytest.fixture(scope="session")
def external() -> Path:
    """../shared/external, or skip: a user's clone has no shared/ folder beside it."""
    path = SHARED / "external"
    if not path.is_dir():
        pytest.skip(f"{path} not present (a clone without ../shared): external data tests skipped")
    return path


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One temporary Prefect API (SQLite in a temp dir) for the whole session."""
    os.environ["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect-home"))
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
