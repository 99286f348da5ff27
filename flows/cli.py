"""`cnc-corpus`: run a flow locally, or answer the GPU-memory question."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

# flow name -> "module:function"; imported lazily so `estimate` does not pay for Prefect.
FLOWS: dict[str, str] = {
    "clean-workorders": "flows.clean_workorders:clean_workorders",
    "clean-fault-logs": "flows.clean_fault_logs:clean_fault_logs",
    "clean-manuals": "flows.clean_manuals:clean_manuals",
    "refresh-corpus": "flows.refresh_corpus:refresh_corpus",
}


def _load_flow(name: str) -> Callable[..., str]:
    module, func = FLOWS[name].split(":")
    return getattr(importlib.import_module(module), func)


def _ensure_prefect_home() -> None:
    """Prefect creates its home without parents; a fresh clone has no .state/ yet."""
    from prefect.settings import get_current_settings

    get_current_settings().home.mkdir(parents=True, exist_ok=True)


def _check_paths(args: argparse.Namespace) -> None:
    """The input paths exist and `--manuals` goes with the flow that reads it."""
    if args.manuals and args.flow != "clean-fault-logs":
        raise UsageError(f"--manuals is an option of clean-fault-logs, not of {args.flow}")
    for flag, value in (("--input", args.input), ("--manuals", args.manuals)):
        if value and not Path(value).exists():
            raise FileNotFoundError(f"{flag} {value}: no such file or folder")


class UsageError(ValueError):
    """A command line that cannot run."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cnc-corpus", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a flow locally (the same flow Prefect deploys)")
    run.add_argument("flow", choices=sorted(FLOWS))
    run.add_argument("--input", required=True, help="input folder or file")
    run.add_argument("--out", required=True, help="output root (snapshots/, LATEST, state/)")
    run.add_argument("--config", help="TOML or YAML configuration file")
    run.add_argument(
        "--manuals",
        help="clean-fault-logs: manuals whose fault-code tables explain the incidents",
    )
    where = run.add_mutually_exclusive_group()
    where.add_argument(
        "--workers",
        type=int,
        help="run the steps on a local Dask cluster of N worker processes (default: in-process)",
    )
    where.add_argument(
        "--dask-address", help="run the steps on an existing Dask cluster, e.g. tcp://host:8786"
    )
    served = sub.add_parser(
        "serve", help="serve the four flows as Prefect deployments (refresh-corpus nightly)"
    )
    served.add_argument("--input", default="sample_data", help="root with one folder per source")
    served.add_argument("--out", default="out", help="corpora are written under this folder")
    served.add_argument("--config", help="TOML or YAML configuration file")
    served.add_argument(
        "--cron", default="0 2 * * *", help="schedule of refresh-corpus; 'none' for on-demand only"
    )
    estimate = sub.add_parser(
        "estimate", help="peak GPU memory of one training or inference configuration"
    )
    from pipeline.memory import cli as memory_cli

    memory_cli.add_arguments(estimate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pipeline.ingest.encoding import EncodingError
    from pipeline.ingest.workorders import IngestError
    from schemas.config import ConfigError, load_config

    if args.command == "estimate":
        from pipeline.memory import cli as memory_cli

        return memory_cli.run(args)
    try:
        if args.command == "run":
            from flows.tasks import with_execution

            # fail here, in one line, before Prefect starts
            with_execution(load_config(args.config), args.workers, args.dask_address)
            _check_paths(args)
            _ensure_prefect_home()
            flow = _load_flow(args.flow)
            extra = {"manuals": args.manuals} if args.manuals else {}
            if args.workers is not None or args.dask_address:
                extra |= {"workers": args.workers, "dask_address": args.dask_address}
            flow(input=args.input, out=args.out, config=args.config, **extra)
        elif args.command == "serve":
            load_config(args.config)
            _ensure_prefect_home()
            from flows.deployments import serve_all

            cron = None if args.cron.lower() == "none" else args.cron
            serve_all(
                Path(args.input), Path(args.out), Path(args.config) if args.config else None, cron
            )
    except (ConfigError, IngestError, EncodingError, FileNotFoundError, UsageError) as exc:
        print(f"cnc-corpus: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
