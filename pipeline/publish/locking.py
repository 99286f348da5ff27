"""One writer per corpus: an exclusive advisory lock on `<out>/.lock`.

The lock is an flock, so the kernel releases it when the holder dies (kill -9 included); a
stale lock file never blocks a later run.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pipeline.core.errors import PipelineError


class CorpusBusyError(PipelineError, RuntimeError):
    """Another run holds the corpus; the message says which process and since when."""


@contextmanager
def corpus_lock(out: Path, wait_s: float = 0.0, poll_s: float = 0.5) -> Iterator[None]:
    """Hold the corpus lock for the block; wait up to `wait_s` seconds, then refuse."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / ".lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = path.read_text(encoding="utf-8").strip() or "unknown process"
                    raise CorpusBusyError(
                        f"{out}: another refresh of this corpus is running ({holder}); "
                        f"waited {wait_s:.0f} s. Try again when it has finished."
                    ) from None
                time.sleep(poll_s)
        os.ftruncate(fd, 0)
        os.pwrite(
            fd, f"pid {os.getpid()} since {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}\n".encode(), 0
        )
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock
