from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.publish.locking import CorpusBusyError, corpus_lock

REPO = Path(__file__).resolve().parents[3]
HOLD = """
import sys, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from pipeline.publish.locking import corpus_lock
with corpus_lock(Path({out!r})):
    print("locked", flush=True)
    time.sleep({seconds})
"""


def hold(out: Path, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(repo=str(REPO), out=str(out), seconds=seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_writer_refused_with_holder_named(tmp_path):
    proc = hold(tmp_path, 30)
    try:
        busy = rf"another refresh .* \(pid {proc.pid} since"
        with pytest.raises(CorpusBusyError, match=busy), corpus_lock(tmp_path):
            pass
    finally:
        proc.kill()
        proc.wait()


def test_second_writer_waits_for_the_first(tmp_path):
    proc = hold(tmp_path, 1.0)
    start = time.monotonic()
    with corpus_lock(tmp_path, wait_s=60, poll_s=0.1):
        waited = time.monotonic() - start
    proc.wait()
    assert waited > 0.2  # it had to wait for the holder to finish


def test_lock_of_a_killed_holder_is_free(tmp_path):
    proc = hold(tmp_path, 60)
    proc.kill()
    proc.wait()
    with corpus_lock(tmp_path):  # the kernel dropped the flock with the process
        pass
