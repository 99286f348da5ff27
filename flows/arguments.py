"""The `cnc-corpus` argument parser: its commands and options, with a "did you mean" for a
mistyped option or choice."""

from __future__ import annotations

import argparse
import difflib
import re

from flows.launch import FLOWS

EXIT_KNOWN = 2  # exit status of a known error: a bad command line, a PipelineError


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


def build_parser(description: str | None) -> argparse.ArgumentParser:
    """The whole command line: `run`, `serve`, `estimate`, `pilot` and `probe`."""
    parser = _Parser(prog="cnc-corpus", description=description)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(sub.add_parser("run", help="run a flow locally (the same flow Prefect deploys)"))
    _add_serve(
        sub.add_parser(
            "serve", help="serve the four flows as Prefect deployments (refresh-corpus nightly)"
        )
    )
    estimate = sub.add_parser(
        "estimate", help="peak GPU memory of one training or inference configuration"
    )
    from pipeline.memory import cli as memory_cli

    memory_cli.add_arguments(estimate)
    _add_pilot(
        sub.add_parser(
            "pilot", help="a small stratified slice of the latest snapshot and a small-model plan"
        )
    )
    _add_probe(
        sub.add_parser(
            "probe",
            help="measure a planned stage's peak on this machine's GPU, beside the estimate",
        )
    )
    return parser


def _add_run(run: argparse.ArgumentParser) -> None:
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


def _add_serve(served: argparse.ArgumentParser) -> None:
    served.add_argument("--input", default="sample_data", help="root with one folder per source")
    served.add_argument("--out", default="out", help="corpora are written under this folder")
    served.add_argument("--config", help="TOML or YAML configuration file")
    served.add_argument(
        "--cron", default="0 2 * * *", help="schedule of refresh-corpus; 'none' for on-demand only"
    )


def _add_pilot(pilot: argparse.ArgumentParser) -> None:
    pilot.add_argument("--corpus", required=True, help="output root of refresh-corpus (LATEST)")
    pilot.add_argument("--out", required=True, help="folder the slice, plan and configs go to")
    pilot.add_argument("--rows", type=int, default=2000, help="SFT rows in the slice")
    pilot.add_argument("--model", default="qwen2.5-0.5b", help="model preset to plan for")
    pilot.add_argument("--config", help="TOML or YAML configuration file")


def _add_probe(probe: argparse.ArgumentParser) -> None:
    probe.add_argument("--plan", required=True, help="a snapshot's plan.json")
    probe.add_argument("--stage", required=True, help="the stage of plan.json to probe")
    probe.add_argument("--steps", type=int, default=3, help="optimizer steps measured")
    probe.add_argument(
        "--calibration-file",
        help="your CSV the measured row is appended to (default "
        "~/.cache/cnc-corpus/own_measurements.csv); never the frozen calibration set",
    )
    probe.add_argument(
        "--gpu", help="the plan's target to run (default: the largest fitting one this card holds)"
    )
    probe.add_argument(
        "--config",
        help="TOML or YAML configuration the plan was made with: precision, optimizer, attention, "
        "loss and LoRA settings, which plan.json does not record (default: the built-in stages)",
    )
