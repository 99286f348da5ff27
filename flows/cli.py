"""`cnc-corpus`: run a flow locally, or answer the GPU-memory question.

Everything a run needs is checked before Prefect starts: the paths, the configuration and
the options. A known error (`PipelineError`) is one line on stderr and exit status 2; anything
else is a bug: its traceback is kept, with a line saying how to report it.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from pipeline.core.errors import PipelineError, UsageError
from pipeline.core.paths import check_input, check_output

# flow name -> "module:function"; imported lazily so `estimate` does not pay for Prefect.
FLOWS: dict[str, str] = {
    "clean-workorders": "flows.clean_workorders:clean_workorders",
    "clean-fault-logs": "flows.clean_fault_logs:clean_fault_logs",
    "clean-manuals": "flows.clean_manuals:clean_manuals",
    "refresh-corpus": "flows.refresh_corpus:refresh_corpus",
}
BUG_REPORT = (
    "cnc-corpus: unexpected error (a bug, not your input): please report it to the "
    "cnc-corpus maintainers with the traceback above, the command line and the cnc-corpus "
    "version (git rev-parse HEAD)"
)
EXIT_KNOWN, EXIT_BUG = 2, 70


class _Parser(argparse.ArgumentParser):
    """argparse with a "did you mean" for unknown options and choices."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_KNOWN, f"{self.prog}: error: {message}{_suggestion(self, message)}\n")


def _suggestion(parser: argparse.ArgumentParser, message: str) -> str:
    words: list[str] = []
    if m := re.search(r"invalid choice: '([^']*)'", message):
        wrong = m.group(1)
        words = [c for a in parser._actions if a.choices for c in a.choices]  # noqa: SLF001
    elif m := re.search(r"unrecognized arguments: (\S+)", message):
        wrong = m.group(1).split("=")[0]
        words = [o for a in _all_actions(parser) for o in a.option_strings]
    else:
        return ""
    close = difflib.get_close_matches(wrong, words, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _all_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    actions = list(parser._actions)  # noqa: SLF001
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                actions += _all_actions(sub)
    return actions


def _load_flow(name: str) -> Callable[..., object]:
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


def _start_prefect(out: Path) -> None:
    """Apply `prefect_environment` (before Prefect is imported) and create its home."""
    env = prefect_environment(out)
    os.environ.update(env)
    Path(env["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="cnc-corpus", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run a flow locally (the same flow Prefect deploys)")
    run.add_argument("flow", choices=sorted(FLOWS))
    run.add_argument("--input", required=True, help="input folder or file")
    run.add_argument("--out", required=True, help="output root (snapshots/, LATEST, state/)")
    run.add_argument("--config", help="TOML or YAML configuration file")
    run.add_argument(
        "--manuals",
        help="clean-fault-logs: manuals whose fault-code tables explain the incidents",
    )
    run.add_argument(
        "--strict",
        action="store_true",
        help="fail the run when an input file must be quarantined (default: record it, go on)",
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
    pilot = sub.add_parser(
        "pilot", help="a small stratified slice of the latest snapshot and a small-model plan"
    )
    pilot.add_argument("--corpus", required=True, help="output root of refresh-corpus (LATEST)")
    pilot.add_argument("--out", required=True, help="folder the slice, plan and configs go to")
    pilot.add_argument("--rows", type=int, default=2000, help="SFT rows in the slice")
    pilot.add_argument("--model", default="qwen2.5-0.5b", help="model preset to plan for")
    pilot.add_argument("--config", help="TOML or YAML configuration file")
    return parser


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
    _start_prefect(Path(args.out))
    state = _load_flow(args.flow)(**kwargs, return_state=True)
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
    _start_prefect(Path(args.out))
    from flows.deployments import serve_all

    cron = None if args.cron.lower() == "none" else args.cron
    serve_all(Path(args.input), Path(args.out), Path(args.config) if args.config else None, cron)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "estimate":
        from pipeline.memory import cli as memory_cli

        return memory_cli.run(args)
    try:
        if args.command == "pilot":
            return _pilot(args)
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
