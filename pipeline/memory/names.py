"""Names a user types for a model or a card: Hugging Face ids, spellings, "did you mean".

A model is a preset (`qwen2.5-7b`), its Hugging Face id in any case (`Qwen/Qwen2.5-7B-Instruct`,
`meta-llama/Meta-Llama-3.1-8B`: the organisation, a leading `Meta-` and the `-Instruct`, `-Chat`,
`-Base`, `-hf`, `-it` and version tails are dropped, as the tuned checkpoints share the base's
structure), an id listed in `HF_VARIANTS` (a release whose config differs from the preset), or a
config.json / model folder on disk. Anything else is refused in one line naming the closest
catalog names (difflib).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from schemas.memory import ModelSpec

from .models import PRESETS, load_config_json

# Segments of a Hugging Face repository name that do not change the model's structure: the
# tuning (-Instruct, -Chat, -Base, -hf, -it) anywhere, then a version tail (-v0.3, -v1.0).
_TUNING = re.compile(r"-(instruct|chat|base|hf|it)(?=-|$)")
_VERSION = re.compile(r"-v\d+(\.\d+)*$")

# Releases whose config.json differs from their preset's: (preset, the fields that differ).
HF_VARIANTS: dict[str, tuple[str, dict[str, object]]] = {
    # https://huggingface.co/mistralai/Mistral-7B-v0.3/blob/main/config.json: "vocab_size":
    # 32768 (v0.1/v0.2: 32000); hidden 4096, 32 layers, 32/8 heads, 14336 MLP as the preset.
    "mistral-7b-v0.3": ("mistral-7b", {"vocab_size": 32768}),
}


def closest(name: str, choices: list[str], n: int = 3) -> list[str]:
    """The catalog names nearest to `name` (difflib ratio >= 0.5), best first."""
    return difflib.get_close_matches(name.lower(), choices, n=n, cutoff=0.5)


def unknown(kind: str, name: str, choices: list[str], hint: str, key: str = "") -> ValueError:
    """One line: what was not found, the closest names to `key` (default `name`), and where
    the rest are listed."""
    near = closest(key or name, choices)
    if near:
        return ValueError(f"unknown {kind} {name!r}; did you mean {', '.join(near)}? ({hint})")
    return ValueError(f"unknown {kind} {name!r}; {hint}")


def _keys(name: str) -> tuple[str, str, str]:
    """`name` lower-cased; without organisation, `Meta-` and tuning; then without version."""
    tuned = name.strip().lower().rsplit("/", 1)[-1].replace("_", "-").removeprefix("meta-")
    untuned = _TUNING.sub("", tuned)
    return name.strip().lower(), untuned, _VERSION.sub("", untuned)


def model_key(name: str) -> str | None:
    """The preset or variant `name` (a preset or a Hugging Face id) stands for, else None."""
    return next((k for k in _keys(name) if k in PRESETS or k in HF_VARIANTS), None)


def resolve_model(name: str) -> tuple[ModelSpec, str | None]:
    """The model `name` names (a preset, a config.json or model folder on disk, a Hugging Face
    id), and a note saying which preset an id was read as (None for a preset or a path)."""
    key = model_key(name)
    if key == name.strip().lower() and key in PRESETS:
        return PRESETS[key], None
    if Path(name).exists():  # a local folder named like a repository is read, not guessed
        return load_config_json(name), None
    if key in HF_VARIANTS:
        base, fields = HF_VARIANTS[key]
        note = f"--model {name} read as {key}: preset {base} with {fields} (its config.json)"
        return PRESETS[base].model_copy(update={"name": key, **fields}), note
    if key is not None:
        return PRESETS[key], f"--model {name} read as preset {key} (the same structure)"
    choices = sorted([*PRESETS, *HF_VARIANTS])
    hint = "presets: cnc-corpus estimate --help, or a config.json path"
    raise unknown("model", name, choices, hint, key=_keys(name)[2])
