"""The configuration reference, docs/configuration.md, and the README's configuration example,
both generated from the typed configuration (`schemas.config.PipelineConfig`).

    python -m tools.config_reference --out docs/configuration.md

writes the reference (one section per configuration section, a table per model: key, type,
default, description; long defaults below each table as TOML) and rewrites the example
between the README's `<!-- config-example:start -->` and `<!-- config-example:end -->`
markers from the default values (`--readme` names another file). Run it after changing a
field, its default or its description; tests/tools/test_config_reference.py fails until then.
"""

from __future__ import annotations

import argparse
import re
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo

from schemas.config import PipelineConfig
from schemas.ingest import WorkOrderField
from schemas.samples import Localized
from tools.toml_render import assignment, toml_table, toml_value

REPO = Path(__file__).resolve().parents[1]
COMMAND = "python -m tools.config_reference --out docs/configuration.md"
START, END = "<!-- config-example:start -->", "<!-- config-example:end -->"
INLINE_DEFAULT = 80  # characters of a default shown in the table; longer ones go below it
SHARED = {Localized: "{zh, en}"}  # small models used in many places: one table, referred to
NAMED: dict[Any, str] = {WorkOrderField: "work-order field"}  # long literals, listed once

# The README's example: (section, key, comment); every value is the default.
EXAMPLE: tuple[tuple[str, str, str], ...] = (
    ("", "strict", "true: a file that must be quarantined fails the run"),
    ("sources", "workorders", "per-kind sub-folders of refresh-corpus's --input"),
    ("sources", "alarm_logs", ""),
    ("sources", "manuals", ""),
    ("ingest", "exclude", "globs never read, whatever their content"),
    ("alarm_logs.incidents", "burst_gap_s", "raises of a code closer than this (s): one incident"),
    ("alarm_logs.incidents", "cascade_window_s", "a cascade: raises this close (s) on one machine"),
    ("alarm_logs.incidents", "merge_by", 'or "machine"'),
    ("manuals.chunks", "max_chars", "per pretraining chunk"),
    ("normalize", "customer_names", "redacted as [CUSTOMER] wherever they occur"),
    ("filters", "min_chars", ""),
    ("dedup", "shingle_size", ""),
    ("dedup", "num_perm", ""),
    ("dedup", "bands", ""),
    ("dedup", "rows", ""),
    ("dedup", "threshold", ""),
    ("structure", "free_text_columns", "segmented for parts besides the mapped columns"),
    ("tiers", "min_part_units", ""),
    ("messages", "label_separator", ""),
    ("tokens", "tokenizer", "or a path to a local tokenizer.json"),
    ("tokens", "chat_template", 'or "chatml", "llama3", or a template table'),
    ("plan", "headroom", "share of each card left free"),
    ("publish", "max_rows_per_shard", ""),
    ("publish", "keep_snapshots", "retention"),
    ("publish", "lock_wait_s", "a second run on the same corpus is refused at once"),
    ("trainer", "output_root", "checkpoints, one folder per stage"),
    ("execution", "shard_rows", "not in the configuration hash"),
    ("execution", "workers", "0: in this process; N: a local Dask cluster"),
)
COMMENT_COLUMN = 33

INTRO = f"""\
# Configuration reference

Generated from the typed configuration (`schemas/config.py` and the models it uses) by
`{COMMAND}`; do not edit by hand.

One file, TOML or YAML (`--config FILE`); every section and every key is optional, and a key
left out keeps the default shown here, so an empty file is the default configuration. Types
are strict (`true` is not an integer, `"5"` is not a number); an unknown key is an error that
names the closest known key. A default shown as "unset" means the key is left out (TOML has
no null; descriptions call it None). An *array of tables* such as `[[ingest.sources]]` holds
one entry per `[[...]]` header, in order; the keys below such a header belong to that entry.
The `execution` section is left out of the configuration hash: it decides where the work
runs, not what it gives.
"""


@dataclass(frozen=True)
class Table:
    """One model documented at one place of the configuration."""

    path: str  # dotted TOML path ("" for the top level)
    model: type[BaseModel]
    array: bool  # an entry of an array of tables
    under_array: bool  # inside an array entry: its defaults are not the whole configuration

    @property
    def header(self) -> str:
        if not self.path:
            return "Top level"
        return f"`[[{self.path}]]`" if self.array else f"`[{self.path}]`"


def reference() -> str:
    """The whole of docs/configuration.md."""
    parts = [INTRO]
    for table in tables(PipelineConfig, "", array=False, under_array=False):
        parts.append(section(table))
    parts.append(shared_types())
    return "\n".join(parts).rstrip() + "\n"


def tables(model: type[BaseModel], path: str, array: bool, under_array: bool) -> Iterator[Table]:
    """`model`'s table, then every model below it, depth first, in field order."""
    yield Table(path, model, array, under_array)
    for name, field in model.model_fields.items():
        for child, child_array, key in nested_models(field.annotation):
            child_path = _join(path, name) + (f".<{key}>" if key else "")
            yield from tables(child, child_path, child_array, under_array or array or child_array)


def nested_models(annotation: Any) -> list[tuple[type[BaseModel], bool, str]]:
    """Models documented in their own section: (model, in an array, key placeholder)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [] if annotation in SHARED else [(annotation, False, "")]
    if origin in (list, tuple):
        return [(m, True, k) for m, _, k in nested_models(args[0])]
    if origin is dict:
        return [(m, a, _key_names(args[0])) for m, a, _ in nested_models(args[1])]
    if origin in (Union, types.UnionType, Annotated):
        return [found for arg in args for found in nested_models(arg)]
    return []


def _key_names(key: Any) -> str:
    return "|".join(get_args(key)) if get_origin(key) is Literal else "key"


def section(table: Table) -> str:
    """A heading, the model's docstring, its table of keys, and its long defaults as TOML."""
    depth = 2 + (table.path.count(".") if table.path else 0)
    lines = [f"{'#' * min(depth, 4)} {table.header}", ""]
    doc = _docstring(table.model)
    if table.array:
        lines += [
            f"An array of tables: each `[[{table.path}]]` header adds one entry. {doc}".strip(),
            "",
        ]
    elif doc:
        lines += [doc, ""]
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    below: list[str] = []
    for name, field in table.model.model_fields.items():
        default, block = default_text(table, name, field)
        row = [f"`{name}`", type_text(field.annotation, field), default, field.description or ""]
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
        below += block
    return "\n".join([*lines, "", *below])


def _docstring(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or "").split())


def default_text(table: Table, name: str, field: FieldInfo) -> tuple[str, list[str]]:
    """The table's default cell, and the TOML block below the table for a long default."""
    if field.is_required():
        return "required", []
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset", []
    dumped = TypeAdapter(field.annotation).dump_python(value, mode="json")
    if nested_models(field.annotation) and isinstance(dumped, dict):
        return f"see `[{_join(table.path, name)}]`", []
    short = not isinstance(dumped, dict | list) or _is_plain(dumped)
    text = toml_value(dumped)
    if table.under_array or (short and len(text) <= INLINE_DEFAULT):
        return f"`{text}`", []
    entries = f"{len(dumped)} entries" if isinstance(dumped, list | dict) else "long"
    block = toml_table(table.path, {name: _without_defaults(field, dumped)})
    block = block[1:] if block and not block[0] else block
    summary = f"default of <code>{_join(table.path, name)}</code>"
    return f"{entries} (below)", [
        f"<details><summary>{summary}</summary>",
        "",
        "```toml",
        *block,
        "```",
        "",
        "</details>",
        "",
    ]


def _is_plain(value: list[Any] | dict[str, Any]) -> bool:
    """An array or table of plain values (nothing nested), shown inline when short."""
    items = value.values() if isinstance(value, dict) else value
    return not any(isinstance(v, dict | list) for v in items)


def _without_defaults(field: FieldInfo, dumped: Any) -> Any:
    """An array of tables' default entries with only the keys that differ from the entry
    model's own defaults (and the required ones)."""
    models = nested_models(field.annotation)
    if not (models and isinstance(dumped, list)):
        return dumped
    model = models[0][0]
    return [model.model_validate(e).model_dump(mode="json", exclude_defaults=True) for e in dumped]


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def type_text(annotation: Any, field: FieldInfo | None = None) -> str:
    """A reader's name for a type, with the field's bounds."""
    text = _type_name(annotation)
    bounds = [] if field is None else _bounds(field)
    return f"{text} ({', '.join(bounds)})" if bounds else text


def _type_name(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation in SHARED:
        return f"table `{SHARED[annotation]}`"
    if annotation in NAMED:
        return NAMED[annotation]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    if origin is Literal:
        return _one_of(args)
    if origin in (list, tuple):
        inner = args[0]
        if isinstance(inner, type) and issubclass(inner, BaseModel) and inner not in SHARED:
            return "array of tables"
        return f"array of {_type_name(inner)}"
    if origin is dict:
        return f"table of {_type_name(args[0])} → {_type_name(args[1])}"
    if origin is Annotated:
        return _type_name(args[0])
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None))
    return getattr(annotation, "__name__", str(annotation))


def _one_of(values: tuple[Any, ...]) -> str:
    return "one of " + ", ".join(f'`"{v}"`' if isinstance(v, str) else f"`{v}`" for v in values)


def _bounds(field: FieldInfo) -> list[str]:
    signs = {Ge: ("≥", "ge"), Gt: (">", "gt"), Le: ("≤", "le"), Lt: ("<", "lt")}
    found = []
    for item in field.metadata:
        for kind, (sign, attr) in signs.items():
            if isinstance(item, kind):
                found.append(f"{sign} {getattr(item, attr)}")
        if getattr(item, "pattern", None):
            found.append(f"matching `{item.pattern}`")
    return found


def _cell(text: str) -> str:
    """Markdown table cell: `<` (HTML) and `*` (emphasis) escaped outside code spans, and `|`
    (which would end the cell) everywhere."""
    pieces = re.split(r"(`[^`]*`)", text)
    out = [p if p.startswith("`") else p.replace("<", "&lt;").replace("*", r"\*") for p in pieces]
    return "".join(out).replace("|", r"\|")


def shared_types() -> str:
    """The values of each named type, and one table for each small model used in many places."""
    lines = ["## Shared types", ""]
    for annotation, name in NAMED.items():
        lines += [f"### {name}", "", "Values: " + _cell(_one_of(get_args(annotation))), ""]
    for model, name in SHARED.items():
        lines += [f"### `{name}`", "", _docstring(model), ""]
        lines += ["| key | type | description |", "|---|---|---|"]
        for key, field in model.model_fields.items():
            row = [f"`{key}`", type_text(field.annotation, field), field.description or ""]
            lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
        lines.append("")
    return "\n".join(lines)


def readme_example() -> str:
    """The README's TOML example: the `EXAMPLE` keys with their default values."""
    defaults = PipelineConfig().model_dump(mode="json")
    lines: list[str] = []
    current = None
    for section_path, key, comment in EXAMPLE:
        if section_path != current:
            lines += ["", f"[{section_path}]"] if section_path else []
            current = section_path
        value = _lookup(defaults, section_path)[key]
        text = "\n".join(assignment(key, value))
        lines.append(f"{text:<{COMMENT_COLUMN - 1}} # {comment}" if comment else text)
    return "\n".join(["```toml", *lines, "```"])


def _lookup(data: dict[str, Any], path: str) -> dict[str, Any]:
    for part in path.split(".") if path else []:
        data = data[part]
    return data


def with_example(readme: str) -> str:
    """`readme` with the text between the example markers replaced by `readme_example()`."""
    pattern = re.compile(re.escape(START) + r"\n.*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        raise SystemExit(f"the README has no {START} ... {END} markers")
    return pattern.sub(lambda _: f"{START}\n{readme_example()}\n{END}", readme, count=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the reference's Markdown file")
    parser.add_argument(
        "--readme", type=Path, default=REPO / "README.md", help="README whose example is rewritten"
    )
    args = parser.parse_args(argv)
    args.out.write_text(reference(), encoding="utf-8")
    args.readme.write_text(with_example(args.readme.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {args.out} and the example in {args.readme}")


if __name__ == "__main__":
    main()
