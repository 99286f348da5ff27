"""`cnc-corpus`: run a flow locally, or answer the GPU-memory question.

Everything a run needs is checked before Prefect starts: the paths, the configuration and
the options. A known error (`PipelineError`) is one line on stderr and exit status 2; anything
else is a bug: its traceback is kept, with a line saying how to report it.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from flows.arguments import EXIT_KNOWN, build_parser
from flows.launch import load_flow, start_prefect
from pipeline.core.errors import PipelineError, UsageError
from pipeline.core.paths import check_input, check_output

BUG_REPORT = (
    "cnc-corpus: unexpected error (a bug, not your input): please report it to the "
    "cnc-corpus maintainers with the traceback above, the command line and the cnc-corpus "
    "version (git rev-parse HEAD)"
)
EXIT_BUG = 70


def check_run(args: argparse.Namespace) -> dict[str, object]:
    """Everything `run` needs, checked without Prefect; the flow's keyword arguments."""
    from schemas.config import load_config, with_execution

    if args.manuals and args.flow != "clean-fault-logs":
        raise UsageError(f"--manuals is an option of clean-fault-logs, not of {args.flow}")
    cfg = load_config(args.config)  # the file, field and line of a bad setting, in one line
    with_execution(cfg, args.workers, args.dask_address)  # a bad flag, in one line
    inputs = [check_input("--input", args.input)]
    if inputs[0].is_dir() and not any(p.is_file() for p in inputs[0].rglob("*")):
        raise UsageError(f"--input {args.input}: the folder holds no files; nothing to read")
    if args.manuals:
        inputs.append(check_input("--manuals", args.manuals))
    check_output(args.out, inputs)
    kwargs = {"input": args.input, "out": args.out, "config": args.config, "strict": args.strict}
    if args.workers is not None or args.dask_address:
        kwargs |= {"workers": args.workers, "dask_address": args.dask_address}
    return kwargs | ({"manuals": args.manuals} if args.manuals else {})


def _run(args: argparse.Namespace) -> int:
    kwargs = check_run(args)
    start_prefect(Path(args.out))
    state = load_flow(args.flow)(**kwargs, return_state=True)
    if state.is_completed():
        return 0
    state.result()  # raises the run's error: a PipelineError is one line, anything else a bug
    raise UsageError(f"{args.flow}: the run ended {state.name}: {state.message}")


def _pilot(args: argparse.Namespace) -> int:
    from pipeline.training.pilot import pilot
    from schemas.config import ConfigError, load_config

    cfg = load_config(args.config)
    try:
        result = pilot(Path(args.corpus), Path(args.out), args.rows, args.model, cfg)
    except ValueError as exc:  # an unknown model
        raise ConfigError(str(exc)) from None
    kept = int(result.strata["slice"].sum())
    print(f"pilot: {kept} SFT rows in {result.strata.height} strata from snapshot "
          f"{result.snapshot.name} -> {result.out}")  # fmt: skip
    return 0


def _serve(args: argparse.Namespace) -> int:
    from schemas.config import load_config

    load_config(args.config)
    check_input("--input", args.input)
    check_output(args.out, [Path(args.input)])
    start_prefect(Path(args.out))
    from flows.deployments import serve_all

    cron = None if args.cron.lower() == "none" else args.cron
    serve_all(Path(args.input), Path(args.out), Path(args.config) if args.config else None, cron)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser(__doc__).parse_args(argv)
    if args.command == "estimate":
        from pipeline.memory import cli as memory_cli

        return memory_cli.run(args)
    try:
        if args.command == "pilot":
            return _pilot(args)
        if args.command == "probe":
            from pipeline.training import probe

            return probe.run(args)
        return _run(args) if args.command == "run" else _serve(args)
    except PipelineError as exc:
        print(f"cnc-corpus: error: {exc}", file=sys.stderr)
        return EXIT_KNOWN
    except KeyboardInterrupt:
        print("cnc-corpus: interrupted; nothing half-written was published", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        print(BUG_REPORT, file=sys.stderr)
        return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
