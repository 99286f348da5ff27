"""The pipeline configuration: one typed model, loaded from TOML or YAML, validated at the edge."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from schemas.alarm_logs import AlarmLogsConfig
from schemas.dedup import DedupConfig
from schemas.execution import ExecutionConfig
from schemas.filters import FilterConfig
from schemas.ingest import IngestConfig
from schemas.manuals import ManualsConfig
from schemas.normalize import NormalizeConfig
from schemas.plan import PlanConfig
from schemas.publish import PublishConfig
from schemas.samples import MessagesConfig, StructureConfig, TierConfig
from schemas.tokens import TokenizerConfig


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the file and the field."""


class SourceFolders(BaseModel):
    """Sub-folders of refresh-corpus's input, one per source kind."""

    model_config = ConfigDict(extra="forbid")

    workorders: str = "workorders"
    alarm_logs: str = "alarm_logs"
    manuals: str = "manuals"


class PipelineConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sources: SourceFolders = SourceFolders()
    ingest: IngestConfig = IngestConfig()
    alarm_logs: AlarmLogsConfig = AlarmLogsConfig()
    manuals: ManualsConfig = ManualsConfig()
    normalize: NormalizeConfig = NormalizeConfig()
    filters: FilterConfig = FilterConfig()
    dedup: DedupConfig = DedupConfig()
    structure: StructureConfig = StructureConfig()
    tiers: TierConfig = TierConfig()
    messages: MessagesConfig = MessagesConfig()
    tokens: TokenizerConfig = TokenizerConfig()
    plan: PlanConfig = PlanConfig()
    publish: PublishConfig = PublishConfig()
    execution: ExecutionConfig = ExecutionConfig()

    def config_hash(self) -> str:
        """Stable hash of the effective configuration (defaults included); `execution` is
        left out: it decides where the work runs, not what it gives."""
        data = self.model_dump(mode="json", exclude={"execution"})
        text = json.dumps(data, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()


def load_config(path: str | Path | None) -> PipelineConfig:
    """Load a TOML or YAML file; `None` gives the embedded defaults."""
    if path is None:
        return PipelineConfig()
    path = Path(path)
    try:
        raw_text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc.strerror}") from exc
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
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"field '{'.'.join(str(p) for p in err['loc'])}': {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{path}: invalid configuration: {problems}") from None
