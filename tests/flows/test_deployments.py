"""A real Prefect server on 127.0.0.1, the serve process, and `prefect deployment run`."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.deployments import build_deployments

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, then SIGKILL what is left."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_for(check, what: str, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what}: process exited with {proc.returncode}")
        if check():
            return
        time.sleep(1)
    raise AssertionError(f"{what}: not ready after {timeout:.0f} s")


@pytest.fixture()
def server(tmp_path) -> Iterator[dict[str, str]]:
    port = free_port()
    env = os.environ | {
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
    }
    (tmp_path / "prefect-home").mkdir()
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            str(BIN / "prefect"),
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--analytics-off",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for(healthy, "prefect server", 180, proc)
        yield env
    finally:
        stop(proc)
        log.close()


def test_deployment_run_by_hand_through_the_cli(server, tmp_path, sample_data, repo):
    inputs = tmp_path / "inputs"
    shutil.copytree(sample_data / "workorders", inputs / "workorders")
    out = tmp_path / "out"
    serve_log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed below
    serving = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flows.cli",
            "serve",
            "--input",
            str(inputs),
            "--out",
            str(out),
            "--cron",
            "none",
        ],
        cwd=repo,
        env=server,
        stdout=serve_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:

        def registered() -> bool:
            probe = subprocess.run(
                [
                    str(BIN / "prefect"),
                    "deployment",
                    "inspect",
                    "clean-workorders/clean-workorders",
                ],
                env=server,
                capture_output=True,
                text=True,
                timeout=60,
            )
            return probe.returncode == 0

        wait_for(registered, "serve registering the deployments", 180, serving)
        run = subprocess.run(
            [
                str(BIN / "prefect"),
                "deployment",
                "run",
                "clean-workorders/clean-workorders",
                "--watch",
                "--watch-timeout",
                "300",
            ],
            env=server,
            capture_output=True,
            text=True,
            timeout=420,
        )
        assert run.returncode == 0, run.stdout + run.stderr + (tmp_path / "serve.log").read_text()
        assert "Completed" in run.stdout
    finally:
        stop(serving)
        serve_log.close()
    latest = (out / "workorders" / "LATEST").read_text().strip()
    snapshot = out / "workorders" / "snapshots" / latest
    assert (snapshot / "manifest.json").exists()
    assert list(snapshot.glob("sft/tier=A/part-*.parquet"))


def test_deployments_are_named_after_their_flows(tmp_path):
    deployments = build_deployments(tmp_path / "in", tmp_path / "out", None)
    names = {(d.flow_name, d.name) for d in deployments}
    assert names == {
        ("refresh-corpus", "refresh-corpus"),
        ("clean-workorders", "clean-workorders"),
        ("clean-fault-logs", "clean-fault-logs"),
        ("clean-manuals", "clean-manuals"),
    }
    nightly = next(d for d in deployments if d.name == "refresh-corpus")
    assert [s.schedule.cron for s in nightly.schedules] == ["0 2 * * *"]
    cleaning = next(d for d in deployments if d.name == "clean-workorders")
    assert cleaning.parameters["input"] == str((tmp_path / "in" / "workorders").resolve())


def _readme_schedule_commands(repo: Path) -> list[list[str]]:
    """The README's `prefect deployment schedule` commands, as written there."""
    commands = []
    for line in (repo / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith(".venv/bin/prefect deployment schedule"):
            words = line.split("#")[0].split()
            commands.append([str(BIN / "prefect"), *words[1:]])
    return commands


def test_readme_pause_and_resume_commands_work_against_the_server(server, tmp_path, repo):
    """Every schedule command the README gives runs with the pinned Prefect and does what the
    README says: pause --all deactivates the nightly schedule, resume --all reactivates it,
    and one schedule is paused by deployment name and schedule id."""
    (tmp_path / "inputs").mkdir()
    orders = tmp_path / "inputs" / "orders.csv"
    orders.write_text("工单号,故障现象,处理措施\nWO-1,异响,更换轴承\n", encoding="utf-8")
    serve_log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed below
    serving = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "serve", "--input", str(tmp_path / "inputs"),
         "--out", str(tmp_path / "out"), "--cron", "0 2 * * *"],
        cwd=repo, env=server, stdout=serve_log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip

    def prefect(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, env=server, capture_output=True, text=True, timeout=120)

    def schedules() -> list[dict]:
        listed = prefect(str(BIN / "prefect"), "deployment", "schedule", "ls",
                         "refresh-corpus/refresh-corpus", "--output", "json")  # fmt: skip
        assert listed.returncode == 0, listed.stdout + listed.stderr
        return json.loads(listed.stdout)

    try:

        def registered() -> bool:
            inspect = ("deployment", "inspect", "refresh-corpus/refresh-corpus")
            return prefect(str(BIN / "prefect"), *inspect).returncode == 0

        wait_for(registered, "serve registering the deployments", 180, serving)
        commands = _readme_schedule_commands(repo)
        assert len(commands) == 4, commands
        (schedule,) = schedules()
        assert schedule["active"] and schedule["schedule"] == "cron: 0 2 * * *"
        expected_active = {"pause": False, "resume": True}
        for command in commands:
            command = [schedule["id"] if w == "<SCHEDULE_ID>" else w for w in command]
            done = prefect(*command)
            assert done.returncode == 0, (command, done.stdout + done.stderr)
            if command[3] in expected_active:
                assert schedules()[0]["active"] is expected_active[command[3]], command
    finally:
        stop(serving)
        serve_log.close()
