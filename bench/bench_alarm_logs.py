"""Parse speed of the alarm-log reader on the real NIST Mazak MTConnect log (23,181 lines).

Usage: .venv/bin/python bench/bench_alarm_logs.py [--repeat N] [--copies K]
`--copies K` also times a file of K concatenated copies (same content, K x the lines) to show
that the cost is linear in lines (the copies repeat the same timestamps, so they merge into the
same 72 incidents). Prints lines/s for reading+parsing and for incident building.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.alarms.incidents import build_incidents
from pipeline.ingest.alarm_logs.reader import read_alarm_log
from schemas.alarm_logs import AlarmLogSource

NIST = (
    Path(__file__).resolve().parents[1].parent
    / "shared/external/nist-smstestbed-mtconnect/Mazak01-20180220-20180221.txt"
)
SOURCE = AlarmLogSource(
    pattern="*", format="mtconnect", family="MTCONNECT/MAZAK", machine="Mazak01"
)


def _time(path: Path, repeat: int) -> tuple[float, float, dict[str, int], int]:
    parse, merge = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = read_alarm_log(path, SOURCE)
        t1 = time.perf_counter()
        incidents = build_incidents(result.kept)
        merge.append(time.perf_counter() - t1)
        parse.append(t1 - t0)
    return (
        statistics.median(parse),
        statistics.median(merge),
        result.counters,
        incidents.kept.height,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--copies", type=int, default=10)
    args = parser.parse_args()
    if not NIST.exists():
        raise SystemExit(f"{NIST} not found (../shared/external is needed)")
    runs = [("NIST Mazak01 log", NIST)]
    with tempfile.TemporaryDirectory() as tmp:
        if args.copies > 1:
            big = Path(tmp) / "Mazak01-x.txt"
            big.write_bytes(NIST.read_bytes() * args.copies)
            runs.append((f"{args.copies} copies", big))
        print(
            f"{'input':<18}{'lines':>9}{'alarm ev':>10}{'parse s':>9}{'lines/s':>12}"
            f"{'incidents':>11}{'merge s':>9}"
        )
        for name, path in runs:
            parse, merge, counters, n_incidents = _time(path, args.repeat)
            lines = counters["lines_total"]
            print(
                f"{name:<18}{lines:>9}{counters['kept']:>10}{parse:>9.3f}"
                f"{lines / parse:>12,.0f}{n_incidents:>11}{merge:>9.3f}"
            )


if __name__ == "__main__":
    main()
