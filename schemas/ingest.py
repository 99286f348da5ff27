"""Configuration of the work-order readers: which files, which columns, which encoding."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.records import WORKORDER_FIELDS

WorkOrderField = Literal[
    "order_id",
    "asset",
    "machine_model",
    "reported_at",
    "symptom",
    "cause",
    "action",
    "prevention",
    "technician",
    "status",
    "remarks",
]
assert set(WorkOrderField.__args__) == set(WORKORDER_FIELDS)  # type: ignore[attr-defined]

# Headers that a typical export uses, per field. Compared after NFKC, lower case and with
# spaces, underscores and punctuation removed, so "Corrective Action" matches "corrective_action".
BUILTIN_HEADER_ALIASES: dict[str, list[str]] = {
    "order_id": [
        "工单号",
        "工单编号",
        "维修单号",
        "单号",
        "编号",
        "order no",
        "order id",
        "work order",
        "wo",
        "wo number",
        "ticket",
        "ticket id",
        "id",
    ],
    "asset": [
        "设备编号",
        "设备号",
        "资产编号",
        "设备名称",
        "设备",
        "asset",
        "asset id",
        "equipment",
        "equipment id",
        "machine id",
        "machine",
    ],
    "machine_model": [
        "机床型号",
        "设备型号",
        "型号",
        "系统型号",
        "数控系统",
        "machine model",
        "model",
        "controller",
        "cnc model",
    ],
    "reported_at": [
        "报修时间",
        "报修日期",
        "故障时间",
        "发生时间",
        "日期",
        "reported at",
        "reported",
        "date",
        "reported date",
        "created",
        "created at",
        "open date",
    ],
    "symptom": [
        "故障现象",
        "故障描述",
        "问题描述",
        "现象",
        "故障内容",
        "problem description",
        "problem",
        "description",
        "symptom",
        "fault description",
        "issue",
        "complaint",
    ],
    "cause": [
        "原因分析",
        "故障原因",
        "原因",
        "诊断",
        "cause",
        "root cause",
        "diagnosis",
        "failure cause",
    ],
    "action": [
        "处理措施",
        "维修措施",
        "处理方法",
        "处理过程",
        "维修内容",
        "解决方法",
        "corrective action",
        "action",
        "action taken",
        "repair",
        "resolution",
        "fix",
        "work performed",
    ],
    "prevention": [
        "预防措施",
        "预防建议",
        "改善建议",
        "建议",
        "preventive action",
        "prevention",
        "recommendation",
        "recommended action",
        "preventive maintenance",
    ],
    "technician": [
        "维修人员",
        "维修人",
        "维修工程师",
        "处理人",
        "技术员",
        "technician",
        "engineer",
        "performed by",
        "assigned to",
    ],
    "status": ["状态", "工单状态", "status", "state"],
    "remarks": ["备注", "说明", "remarks", "remark", "notes", "note", "comments", "comment"],
}


class SourceMapping(BaseModel):
    """How the files matching `pattern` are read and mapped onto record fields."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="glob matched against the path relative to the input root")
    format: Literal["auto", "csv", "xlsx", "json", "jsonl"] = "auto"
    encoding: str = Field("auto", description="'auto' detects; else a Python codec name")
    delimiter: str = ","
    sheet: str | Annotated[int, Field(ge=0)] = 0
    columns: dict[WorkOrderField, str | list[str]] = Field(
        default_factory=dict,
        description="field -> source header (or headers, joined with `join_with`)",
    )
    use_builtin_headers: bool = Field(
        True, description="also map headers the built-in alias table recognizes"
    )
    fill_down: list[WorkOrderField] = Field(
        default_factory=list,
        description="fields whose blank cells mean 'same as above' (merged-cell exports)",
    )
    join_with: str = "; "


class IngestConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include: list[str] = ["**/*.csv", "**/*.xlsx", "**/*.json", "**/*.jsonl"]
    exclude: list[str] = []
    sources: list[SourceMapping] = Field(
        default_factory=list, description="first matching entry wins; unmatched files use defaults"
    )
    header_aliases: dict[WorkOrderField, list[str]] = Field(
        default_factory=dict, description="extra header names per field, added to the built-in"
    )
