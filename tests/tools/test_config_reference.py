"""docs/configuration.md and the README's configuration example match the schema."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from schemas.config import PipelineConfig, load_config
from tools.config_reference import COMMAND, END, START, main

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "configuration.md"
README = REPO / "README.md"
STALE = f"is stale: regenerate it with `{COMMAND}` (it rewrites the README's example too)"


def _toml_blocks(text: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", text, flags=re.S)


def _readme_example_block() -> str:
    readme = README.read_text(encoding="utf-8")
    start, end = readme.index(START), readme.index(END)
    return readme[start + len(START) : end].strip()


def _models(model: type[BaseModel], seen: list[type[BaseModel]]) -> list[type[BaseModel]]:
    """`model` and every model its fields hold (in lists, tables and unions too)."""
    if model not in seen:
        seen.append(model)
        for field in model.model_fields.values():
            stack: list[Any] = [field.annotation]
            while stack:
                annotation = stack.pop()
                if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                    _models(annotation, seen)
                else:
                    stack += get_args(annotation)
    return seen


def test_every_configuration_field_is_described() -> None:
    undescribed = [
        f"{model.__name__}.{name}"
        for model in _models(PipelineConfig, [])
        for name, field in model.model_fields.items()
        if not (field.description or "").strip()
    ]
    assert not undescribed, f"fields without Field(description=...): {undescribed}"


def test_committed_reference_and_readme_example_are_current(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README.read_text(encoding="utf-8"), encoding="utf-8")
    main(["--out", str(tmp_path / "configuration.md"), "--readme", str(readme)])
    generated = (tmp_path / "configuration.md").read_text(encoding="utf-8")
    assert DOCS.read_text(encoding="utf-8") == generated, f"docs/configuration.md {STALE}"
    assert README.read_text(encoding="utf-8") == readme.read_text(encoding="utf-8"), (
        f"the README's configuration example {STALE}"
    )


def test_readme_example_covers_the_sections() -> None:
    (example,) = _toml_blocks(_readme_example_block())
    headers = set(re.findall(r"^\[([a-z_]+)", example, flags=re.M))
    sections = {n for n, f in PipelineConfig.model_fields.items() if f.annotation is not bool}
    assert len(headers) >= len(sections) - 1  # tool_samples has nothing short to show
    assert re.search(r"^strict = ", example, flags=re.M)


def _load(tmp_path: Path, toml: str, name: str = "example.toml") -> PipelineConfig:
    path = tmp_path / name
    path.write_text(toml, encoding="utf-8")
    return load_config(path)


def test_readme_example_is_the_defaults(tmp_path: Path) -> None:
    (example,) = _toml_blocks(_readme_example_block())
    cfg = _load(tmp_path, example)
    assert cfg == PipelineConfig()
    assert cfg.config_hash() == PipelineConfig().config_hash()


def test_readme_mapping_example_validates(tmp_path: Path) -> None:
    """The foreign-export mapping is an example, not a default: it must still load."""
    (mapping,) = [
        b for b in _toml_blocks(README.read_text(encoding="utf-8")) if "[[ingest.sources]]" in b
    ]
    cfg = _load(tmp_path, mapping)
    (source,) = cfg.ingest.sources
    assert source.pattern == "fmea_*.csv" and not source.use_builtin_headers
    assert source.fill_down == ["asset", "symptom"]
    assert source.columns["cause"] == "Potential Cause(s) of Failure"
    assert cfg.model_copy(update={"ingest": PipelineConfig().ingest}) == PipelineConfig()


@pytest.mark.parametrize("block", _toml_blocks(DOCS.read_text(encoding="utf-8")))
def test_reference_defaults_load_as_the_defaults(block: str, tmp_path: Path) -> None:
    """Each long default the reference prints below a table is valid TOML giving the default."""
    assert _load(tmp_path, block) == PipelineConfig()
