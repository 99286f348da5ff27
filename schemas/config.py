"""The pipeline configuration: one typed model, loaded from TOML or YAML, validated at the edge."""

from __future__ import annotations

import difflib
import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas.alarm_logs import AlarmLogsConfig
from schemas.dedup import DedupConfig
from schemas.errors import ConfigError
from schemas.execution import ExecutionConfig
from schemas.filters import FilterConfig
from schemas.ingest import IngestConfig
from schemas.manuals import ManualsConfig
from schemas.normalize import NormalizeConfig
from schemas.plan import PlanConfig
from schemas.publish import PublishConfig
from schemas.samples import MessagesConfig, StructureConfig, TierConfig
from schemas.tokens import TokenizerConfig
from schemas.trainer import ToolSamplesConfig, TrainerConfig


class SourceFolders(BaseModel):
    """Sub-folders of refresh-corpus's input, one per source kind."""

    model_config = ConfigDict(extra="forbid")

    workorders: str = Field(
        "workorders",
        description="sub-folder (relative to the input root) of the work-order exports: a file "
        "there is expected to be a work-order table, and `serve`'s clean-workorders deployment "
        "reads this folder",
    )
    alarm_logs: str = Field(
        "alarm_logs",
        description="sub-folder of the controller alarm histories: a file there is expected to "
        "be an alarm log, and the clean-fault-logs deployment reads this folder",
    )
    manuals: str = Field(
        "manuals",
        description="sub-folder of the manuals: a file there is expected to be a manual, and "
        "the clean-manuals deployment (and clean-fault-logs' fault-code tables) read this folder",
    )


class PipelineConfig(BaseModel):
    """The whole configuration; every section is optional and defaults to the values below."""

    model_config = ConfigDict(extra="forbid")

    strict: bool = Field(
        False,
        description="fail the run when an input file has to be quarantined (unreadable, "
        "undecodable, outside the input) instead of recording it and going on; `--strict` "
        "sets it too",
    )
    sources: SourceFolders = Field(
        SourceFolders(), description="per-kind sub-folders of refresh-corpus's input"
    )
    ingest: IngestConfig = Field(
        IngestConfig(), description="work-order exports: which files, columns and encodings"
    )
    alarm_logs: AlarmLogsConfig = Field(
        AlarmLogsConfig(),
        description="controller alarm histories: layouts, machines, and how events merge "
        "into incidents",
    )
    manuals: ManualsConfig = Field(
        ManualsConfig(),
        description="manuals and vendor fault-code tables: formats, pretraining chunks",
    )
    normalize: NormalizeConfig = Field(
        NormalizeConfig(),
        description="normalization: mojibake repair, line breaks, alarm codes, redaction",
    )
    filters: FilterConfig = Field(
        FilterConfig(), description="rule filters: test rows, placeholders, complaints, too short"
    )
    dedup: DedupConfig = Field(
        DedupConfig(), description="exact and MinHash-LSH near-duplicate removal"
    )
    structure: StructureConfig = Field(
        StructureConfig(),
        description="how a record's symptom, diagnosis, action and prevention are found",
    )
    tiers: TierConfig = Field(TierConfig(), description="rules of the quality tiers A, B and C")
    messages: MessagesConfig = Field(
        MessagesConfig(), description="texts of the rendered chat sample (system prompt, labels)"
    )
    tokens: TokenizerConfig = Field(
        TokenizerConfig(), description="token counting: tokenizer, chat template, batching"
    )
    plan: PlanConfig = Field(
        PlanConfig(),
        description="training stages planned in each snapshot's plan.json (sequence length, "
        "micro-batch and GPU fit)",
    )
    publish: PublishConfig = Field(
        PublishConfig(), description="how snapshots are written: shards, compression, retention"
    )
    tool_samples: ToolSamplesConfig = Field(
        ToolSamplesConfig(), description="tool-use samples (fault-code lookups) of a snapshot"
    )
    trainer: TrainerConfig = Field(
        TrainerConfig(), description="trainer configs written into each snapshot's `trainer/`"
    )
    execution: ExecutionConfig = Field(
        ExecutionConfig(),
        description="shard size and task runner; not part of the configuration hash",
    )

    def config_hash(self) -> str:
        """Stable hash of the effective configuration (defaults included); `execution` is
        left out: it decides where the work runs, not what it gives."""
        data = self.model_dump(mode="json", exclude={"execution"})
        text = json.dumps(data, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()


def load_config(path: str | Path | None) -> PipelineConfig:
    """Load a TOML or YAML file; `None` gives the embedded defaults.

    Types are strict (`true` is not an integer, `"5"` is not a number); an unknown key is
    refused with the closest known key as a suggestion.
    """
    if path is None:
        return PipelineConfig()
    path = Path(path)
    try:
        raw_text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not a text configuration file (byte {exc.start} is not UTF-8)"
        ) from None
    if "\x00" in raw_text:
        raise ConfigError(f"{path}: not a text configuration file (NUL byte)")
    try:
        if path.suffix.lower() in {".yaml", ".yml"}:
            data = yaml.safe_load(raw_text) or {}
        else:
            data = tomllib.loads(raw_text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not valid {path.suffix.lstrip('.').upper()}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a table of sections")
    try:
        text = json.dumps(data, default=str, ensure_ascii=False)
        return PipelineConfig.model_validate_json(text, strict=True)
    except ValidationError as exc:
        problems = "; ".join(_problem(err) for err in exc.errors())
        raise ConfigError(f"{path}: invalid configuration: {problems}") from None


def with_execution(
    cfg: PipelineConfig, workers: int | None, dask_address: str | None
) -> PipelineConfig:
    """`cfg` with the task runner a flow's parameters (CLI flags, a deployment) ask for."""
    if workers is None and dask_address is None:
        return cfg
    settings = cfg.execution.model_dump()
    settings.update(workers=workers or 0, dask_address=dask_address)
    try:
        execution = ExecutionConfig.model_validate(settings)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"--workers/--dask-address: {problems}") from None
    return cfg.model_copy(update={"execution": execution})


def _problem(err: Any) -> str:
    loc = [str(p) for p in err["loc"]]
    where = ".".join(loc)
    if err["type"] == "extra_forbidden":
        known = _known_keys(PipelineConfig, err["loc"][:-1])
        close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"unknown key '{where}'{hint}"
    return f"field '{where}': {err['msg']}"


def _known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names of the model at `loc` (list indices and union branches skipped)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if isinstance(current, type) else None
        if field is None:
            return []
        current = _model_in(field.annotation)
        if current is None:
            return []
    return list(current.model_fields) if isinstance(current, type) else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (directly, in a list, or in a union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
