"""Who a calibration row comes from: its repository group, and the frozen list of sources.

**Repository groups.** The headline is leave-one-repository-out: every row of one group is held
out together. A row's repositories are read from its `source` column only:

1. the repository the document lives in, the first word of `source` (owner/name, lower case;
   Lightning-AI/lit-gpt and Lightning-AI/litgpt are one repository, renamed);
2. the harness that produced the figures, where the document names a training framework's
   repository in its path or title (HARNESSES: `QwenLM/Qwen2.5 docs/.../ms_swift.md` was
   measured with ms-swift, `QwenLM/Qwen2.5 examples/llama-factory/...` with LLaMA-Factory);
   libraries under nearly every row (transformers' Trainer, TRL, PEFT, DeepSpeed, accelerate)
   are not harnesses;
3. a paper's code repository, where the row says so with `code: owner/name`.

Rows that share any repository are one group (transitively), named by its documents'
repositories joined with " + ".

**The frozen set.** The shared reference and data/measured_memory_peaks.csv hold the published
measurements the estimator is judged on; data/calibration_sources.csv lists each source with
its row count and a digest of its rows. `check_frozen` refuses any other source, row count or
content. New rows come only from the project's own GPU measurements
(bench/gpu_memory_check.py), in OWN_CSV, each with the command that measured it and its
environment (`check_own_rows`).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parents[1]
FROZEN_LIST = REPO / "data" / "calibration_sources.csv"
OWN_CSV = REPO / "data" / "measured_memory_own.csv"
OWN_SOURCE = "bench/gpu_memory_check.py"
OWN_REQUIRED = ("command", "environment")

# Training frameworks a document can name as the harness of its figures, and their repository
# (matched in `source` lower-cased with "_" as "-", as a whole word).
HARNESSES: dict[str, str] = {
    "ms-swift": "modelscope/ms-swift",
    "llama-factory": "hiyouga/llama-factory",
    "lit-gpt": "lightning-ai/litgpt",
    "litgpt": "lightning-ai/litgpt",
    "torchtune": "pytorch/torchtune",
    "torchtitan": "pytorch/torchtitan",
    "fms-hf-tuning": "foundation-model-stack/fms-hf-tuning",
    "fsdp-qlora": "answerdotai/fsdp_qlora",
}


def source_key(source: str) -> str:
    """The repository a row's document lives in, with lit-gpt and litgpt as one."""
    return source.split(" ")[0].lower().replace("lit-gpt", "litgpt")


def repositories(source: str) -> set[str]:
    """The document's repository, the harness it names, and a code repository it cites."""
    text = source.lower().replace("_", "-")
    repos = {source_key(source)}
    repos |= {r for name, r in HARNESSES.items() if re.search(rf"(?<![\w-]){name}(?![\w-])", text)}
    repos |= {m.lower() for m in re.findall(r"\bcode: ([\w.-]+/[\w.-]+)", source)}
    return repos


def repository_groups(sources: Iterable[str]) -> dict[str, str]:
    """Each source's group: the sources that share a repository, transitively."""
    unique = sorted(set(sources))
    groups: list[set[str]] = []
    for s in unique:
        repos = repositories(s)
        for g in [g for g in groups if g & repos]:
            groups.remove(g)
            repos |= g
        groups.append(repos)
    out: dict[str, str] = {}
    for s in unique:
        g = next(g for g in groups if source_key(s) in g)
        out[s] = " + ".join(sorted({source_key(t) for t in unique if source_key(t) in g}))
    return out


def _digest(rows: list[dict[str, object]]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()[:16]


def source_list(df: pl.DataFrame, file: str) -> list[tuple[str, int, str, str]]:
    """(file, rows, digest, source) for each source of one frozen CSV."""
    out = []
    for g in sorted(df.partition_by("source"), key=lambda g: str(g["source"][0])):
        out.append((file, g.height, _digest(g.rows(named=True)), str(g["source"][0])))
    return out


def frozen_list() -> list[tuple[str, int, str, str]]:
    """The committed list, as `source_list` gives it."""
    with FROZEN_LIST.open(encoding="utf-8", newline="") as fh:
        return [(r["file"], int(r["rows"]), r["digest"], r["source"]) for r in csv.DictReader(fh)]


def check_frozen(df: pl.DataFrame, file: str) -> None:
    """Raise unless this frozen CSV holds exactly the committed sources, counts and rows."""
    want = {s[3]: s for s in frozen_list() if s[0] == file}
    have = {s[3]: s for s in source_list(df, file)}
    bad = sorted(set(want) ^ set(have)) + [k for k in want if k in have and want[k] != have[k]]
    if bad:
        raise ValueError(
            f"the calibration set is frozen ({FROZEN_LIST.name}); {file} differs at: "
            + "; ".join(bad)
            + f". Add own measurements to {OWN_CSV.name} with {OWN_SOURCE} instead."
        )


def check_own_rows(df: pl.DataFrame) -> None:
    """Raise unless every row is an own measurement with its command and environment."""
    for i, r in enumerate(df.iter_rows(named=True)):
        if not str(r.get("source") or "").startswith(OWN_SOURCE):
            raise ValueError(f"row {i}: only {OWN_SOURCE} measurements may be added")
        missing = [c for c in OWN_REQUIRED if not str(r.get(c) or "").strip()]
        if missing:
            raise ValueError(f"row {i}: own measurement without {', '.join(missing)}")
