"""Alarm histories: reader configuration, incident settings, and the columns of events/incidents."""

from __future__ import annotations

import re
from typing import Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.records import LINEAGE_SCHEMA

AlarmLogFormat = Literal[
    "auto", "fanuc", "sinumerik", "mtconnect", "mitsubishi", "haas", "fanuc_robot"
]

# Family used in canonical `FAMILY:CODE` strings when a source does not set one.
DEFAULT_FAMILY: dict[str, str] = {
    "fanuc": "FANUC",
    "sinumerik": "SINUMERIK",
    "mtconnect": "MTCONNECT",
    "mitsubishi": "MITSUBISHI",
    "haas": "HAAS",
    "fanuc_robot": "FANUC_ROBOT",
}


class AlarmLogSource(BaseModel):
    """How the alarm-log files matching `pattern` are read."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="glob matched against the path relative to the input root")
    format: AlarmLogFormat = Field(
        "auto",
        description="log layout (fanuc, sinumerik, mtconnect SHDR, mitsubishi, haas, "
        "fanuc_robot ERRALL.LS); 'auto': the layout found in the content",
    )
    encoding: str = Field("auto", description="'auto' detects; else a Python codec name")
    family: str | None = Field(
        None,
        description="code family in FAMILY:CODE (e.g. 'MTCONNECT/MAZAK'); default from format",
    )
    machine: str | None = Field(None, description="machine/asset id for every file of the source")
    machine_pattern: str | None = Field(
        None,
        description="regex with a `machine` group, searched in the file name when `machine` "
        "is not set; None: the machine named in the file's content, else the file name's first "
        "part that is not a date, a controller or a word like 'alarm_history'",
    )

    @field_validator("machine_pattern")
    @classmethod
    def _has_machine_group(cls, value: str | None) -> str | None:
        if value is not None and "machine" not in re.compile(value).groupindex:
            raise ValueError("machine_pattern needs a named group (?P<machine>...)")
        return value

    def code_family(self, layout: str) -> str:
        """The family of canonical codes: configured, else the layout's."""
        return self.family or DEFAULT_FAMILY[layout]


class IncidentConfig(BaseModel):
    """How alarm events merge into incidents and link to work orders."""

    model_config = ConfigDict(extra="forbid")

    burst_gap_s: float = Field(
        600.0,
        gt=0,
        description="seconds: raises closer than this to the previous one belong to one "
        "incident; a longer gap starts a new one",
    )
    cascade_window_s: float = Field(
        5.0,
        ge=0,
        description="seconds: a raise this close to the previous raise on the same machine, "
        "whatever its code, belongs to its incident (a cascade: a drive fault and the axis "
        "alarms it causes, an emergency stop and the alarms behind it). The controller raises "
        "them within a cycle or a deceleration (well under 2 s); logs stamp whole seconds and "
        "MTConnect adapters poll about once a second, so a cascade shows at most a few seconds "
        "apart; unrelated alarms seconds apart on one machine are rare. 0: same instant only",
    )
    merge_by: Literal["code", "machine"] = Field(
        "code",
        description="'code': one incident per alarm code and machine; 'machine': every alarm "
        "of a machine within the gap is one episode",
    )
    link_window_s: float = Field(
        86400.0,
        ge=0,
        description="a work order reported this close (seconds) to an incident's span, on the "
        "same machine and citing one of its codes, is linked to it",
    )


class AlarmLogsConfig(BaseModel):
    """Controller alarm histories: which files hold which layout, and incident settings."""

    model_config = ConfigDict(extra="forbid")

    sources: list[AlarmLogSource] = Field(
        default_factory=lambda: [
            AlarmLogSource(pattern="**/*fanuc*.txt", format="fanuc"),
            AlarmLogSource(pattern="**/*sinumerik*.log", format="sinumerik"),
            AlarmLogSource(pattern="**/*.shdr", format="mtconnect"),
        ],
        description="per-file reading of alarm logs, matched by `pattern` (first match wins); "
        "applied only when set in the configuration: then a matching file is read with the "
        "entry's layout, encoding, family and machine whatever its content says; by default "
        "the content decides and the entries shown here are not applied",
    )
    incidents: IncidentConfig = Field(
        IncidentConfig(), description="how alarm events merge into incidents"
    )


# One alarm event (a line of a log) as the readers return it.
ALARM_EVENT_SCHEMA: dict[str, pl.DataType] = {
    **LINEAGE_SCHEMA,
    "machine": pl.String(),
    "family": pl.String(),
    "native_code": pl.String(),  # as the controller wrote it; null on an MTConnect "clear all"
    "alarm_code": pl.String(),  # canonical FAMILY:CODE; null on an MTConnect "clear all"
    "event": pl.String(),  # "raised", "cleared", "acknowledged"
    "level": pl.String(),  # MTConnect Warning/Fault/Normal; SINUMERIK NCK/PLC/...; else null
    "channel": pl.String(),  # MTConnect data item (logic_cond, Ytravel); else null
    "message": pl.String(),
    "occurred_at": pl.Datetime("us"),  # the source's clock, naive (MTConnect: UTC)
}

# One incident: a cascade of raises on one machine with the bursts of each of its alarms (or,
# merge_by="machine", every raise of a machine within the burst gap), see pipeline.alarms.
# Lineage: record_id is the incident's own stable id (hash of the first raise's record_id and
# the merge key); source_file/source_row point at the first raise.
INCIDENT_SCHEMA: dict[str, pl.DataType] = {
    **LINEAGE_SCHEMA,
    "machine": pl.String(),
    "family": pl.String(),
    "alarm_codes": pl.List(pl.String()),  # canonical, in order of first raise
    "messages": pl.List(pl.String()),  # distinct, in order of first raise
    "first_at": pl.Datetime("us"),
    "last_at": pl.Datetime("us"),
    "count": pl.UInt32(),  # raises merged
    "cleared_at": pl.Datetime("us"),  # first clear after last_at and before the next incident
    "acknowledged_at": pl.Datetime("us"),
    "source_files": pl.List(pl.String()),
    "event_ids": pl.List(pl.String()),  # record_id of every raise merged (lineage)
    "workorder_ids": pl.List(pl.String()),  # record_id of linked work orders
}
