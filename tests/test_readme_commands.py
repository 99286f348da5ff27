"""Every `cnc-corpus` command in README.md runs as documented, on the sample data.

Commands are read from the README's bash blocks (continuation lines joined, `[optional]` parts
and comments dropped) and run from the repository root with `--out` moved into a temp folder.
`serve` and `prefect deployment …` lines need a Prefect server: tests/flows/test_deployments.py
runs them against a real one. `make test` is this suite; `make demo` runs here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SERVER_VERBS = {"serve"}  # run against a real server in tests/flows/test_deployments.py


def readme_commands() -> list[list[str]]:
    """Each command line of the README's bash blocks, as argv."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0]).strip().rstrip("&").strip()
            if line:
                commands.append(shlex.split(line))
    return commands


def cli_commands() -> list[list[str]]:
    return [c for c in readme_commands() if Path(c[0]).name == "cnc-corpus"]


def test_the_readme_documents_the_commands_this_file_runs():
    verbs = [c[1] for c in cli_commands()]
    assert {"run", "estimate"} <= set(verbs)
    flows = {c[2] for c in cli_commands() if c[1] == "run"}
    assert flows == {"refresh-corpus", "clean-workorders", "clean-fault-logs", "clean-manuals"}
    assert ["make", "demo"] in readme_commands() and ["make", "test"] in readme_commands()


def _with_out(argv: list[str], tmp: Path) -> list[str]:
    """The command with `--out X` moved under `tmp`."""
    out = list(argv)
    if "--out" in out:
        i = out.index("--out") + 1
        out[i] = str(tmp / out[i])
    return out


@pytest.mark.parametrize(
    "argv",
    [c for c in cli_commands() if c[1] not in SERVER_VERBS],
    ids=lambda argv: " ".join(argv[1:4]),
)
def test_readme_command_runs(argv, tmp_path):
    command = [str(BIN / "cnc-corpus"), *_with_out(argv[1:], tmp_path)]
    env = os.environ | {"PREFECT_HOME": str(tmp_path / "prefect-home")}
    (tmp_path / "prefect-home").mkdir()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    if argv[1] == "run":
        out = Path(command[command.index("--out") + 1])
        snapshot = out / "snapshots" / (out / "LATEST").read_text().strip()
        manifest = json.loads((snapshot / "manifest.json").read_text())
        counts = manifest["counts"]
        assert counts["read"] == counts["kept"] + counts["rejected"]
        assert manifest["inputs"], "a published snapshot lists its inputs"
        assert f"snapshot published: {snapshot}" in done.stdout + done.stderr


def test_make_demo_publishes_the_demo_snapshot(tmp_path):
    env = os.environ | {"PREFECT_HOME": str(tmp_path / "prefect-home")}
    done = subprocess.run(
        ["make", "demo", f"DEMO_OUT={tmp_path / 'demo'}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    latest = (tmp_path / "demo" / "LATEST").read_text().strip()
    assert (tmp_path / "demo" / "snapshots" / latest / "report.html").exists()
    assert "Samples per tier" in done.stdout + done.stderr
