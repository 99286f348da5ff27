"""Where a refresh's memory goes: clean-workorders over a corpus in this process (the funnel
without Prefect), its RSS sampled every 0.1 s; each new peak (100 MiB above the last one
printed) is printed with the time and the main thread's innermost project frames.

Not a test. Usage (a corpus kept by bench_scale --corpora, for instance):
    .venv/bin/python -m bench.profile_memory /var/tmp/corpora/corpus-1000000 /tmp/profile-out
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import threading
import time
import traceback
from pathlib import Path

import psutil

from pipeline.funnels.refresh import Sources, refresh
from schemas.config import PipelineConfig

REPO = Path(__file__).resolve().parent.parent
STEP = 100 * 2**20


def project_frames(thread: int, depth: int = 5) -> str:
    """The innermost `depth` frames of `thread` in this project's code, innermost first."""
    frame = sys._current_frames().get(thread)
    stack = traceback.extract_stack(frame) if frame is not None else []
    mine = [
        f"{Path(f.filename).stem}.{f.name}:{f.lineno}"
        for f in stack
        if f.filename.startswith(str(REPO)) and ".venv" not in f.filename
    ]
    return " < ".join(reversed(mine[-depth:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()

    proc, main_thread = psutil.Process(), threading.main_thread().ident
    start, done = time.monotonic(), threading.Event()

    def sample() -> None:
        peak = 0
        while not done.wait(0.1):
            rss = proc.memory_info().rss
            if rss > peak + STEP:
                peak = rss
                where = project_frames(main_thread)
                print(f"{time.monotonic() - start:8.1f} s {rss / 2**30:6.2f} GiB  {where}")

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    sources = Sources(args.corpus, workorders=args.corpus)
    published = refresh("clean-workorders", sources, args.out, PipelineConfig())
    done.set()
    sampler.join()
    summary = {
        "wall_s": round(time.monotonic() - start, 1),
        "kept": published.manifest.counts.kept,
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
