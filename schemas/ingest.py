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
        "工单号", "工单编号", "维修单号", "报修单号", "单号", "单据号", "单据编号", "派工单号",
        "维修编号", "报修编号", "记录编号", "编号", "流水号", "工单", "order no", "order id",
        "order number", "work order", "work order no", "work order number", "wo", "wo no",
        "wo number", "wo id", "ticket", "ticket id", "ticket no", "job no", "job number",
        "request id", "request no", "service order", "notification", "record id", "ref", "id",
    ],
    "asset": [
        "设备编号", "设备号", "资产编号", "设备名称", "设备", "机床编号", "机床号", "机台号",
        "机台", "机台编号", "机床名称", "机床", "设备代码", "资产号", "固定资产编号", "设备位号",
        "工位", "asset", "asset id", "asset no", "asset number", "asset tag", "equipment",
        "equipment id", "equipment no", "machine id", "machine no", "machine number", "machine",
        "machine name", "machine tool", "functional location", "tag",
    ],
    "machine_model": [
        "机床型号", "设备型号", "型号", "系统型号", "数控系统", "控制系统", "系统", "系统类型",
        "控制器", "规格型号", "machine model", "model", "controller", "control", "cnc model",
        "cnc", "cnc control", "control type", "controller model", "model no",
    ],
    "reported_at": [
        "报修时间", "报修日期", "故障时间", "发生时间", "故障日期", "发生日期", "报障时间",
        "停机时间", "开始时间", "申请时间", "创建时间", "日期", "时间", "reported at", "reported",
        "date", "reported date", "report date", "date reported", "created", "created at",
        "created date", "open date", "opened", "start date", "failure date", "breakdown date",
        "date time", "timestamp",
    ],
    "symptom": [
        "故障现象", "故障描述", "问题描述", "现象", "故障内容", "故障情况", "故障表现", "异常描述",
        "异常现象", "报修内容", "故障", "问题", "现象描述", "problem description", "problem",
        "description", "symptom", "symptoms", "fault description", "fault", "issue",
        "complaint", "failure description", "failure", "defect", "reported problem",
        "problem reported", "malfunction", "breakdown description", "short text",
    ],
    "cause": [
        "原因分析", "故障原因", "原因", "诊断", "故障分析", "原因及分析", "根本原因", "根因",
        "失效原因", "诊断结果", "检查结果", "cause", "root cause", "diagnosis", "failure cause",
        "cause of failure", "probable cause", "cause analysis", "findings", "finding",
    ],
    "action": [
        "处理措施", "维修措施", "处理方法", "处理过程", "处理经过", "处理结果", "处理情况",
        "维修内容", "维修过程", "维修经过", "维修记录", "维修情况", "解决方法", "解决措施",
        "纠正措施", "排除方法", "排除过程", "修理内容", "检修内容", "维修方法", "处理",
        "措施", "corrective action", "action", "action taken", "actions taken", "repair",
        "repair action", "repair description", "resolution", "fix", "work performed",
        "work done", "remedy", "solution", "repair performed", "service performed",
    ],
    "prevention": [
        "预防措施", "预防建议", "改善建议", "建议", "预防对策", "整改建议", "整改措施",
        "改进措施", "改善措施", "防范措施", "预防", "预防性措施", "后续建议", "preventive action",
        "prevention", "recommendation", "recommendations", "recommended action",
        "preventive maintenance", "preventive measures", "follow up", "follow-up",
        "lessons learned",
    ],
    "technician": [
        "维修人员", "维修人", "维修工程师", "处理人", "技术员", "维修员", "维修工", "执行人",
        "负责人", "检修人", "维修者", "处理人员", "工程师", "technician", "engineer",
        "performed by", "assigned to", "repaired by", "serviced by", "mechanic", "tech",
    ],
    "status": ["状态", "工单状态", "处理状态", "维修状态", "status", "state", "work order status"],
    "remarks": [
        "备注", "说明", "附注", "其他", "remarks", "remark", "notes", "note", "comments",
        "comment", "additional info",
    ],
}  # fmt: skip

# Headers of a customer column: not a record field; its values are customer names that
# normalization redacts as [CUSTOMER] wherever they occur in the record's text.
CUSTOMER_HEADERS: list[str] = [
    "客户", "客户名称", "客户单位", "客户名", "用户单位", "使用单位", "委托单位", "customer",
    "customer name", "client", "client name", "company", "account", "end user",
]  # fmt: skip
CUSTOMER_COLUMN = "_customer"  # underscore: never in a reject payload or a published table

# Headers a person recognizes as none of the record fields: never mapped, not even by content.
IGNORED_HEADERS: list[str] = [
    "完成时间", "结束时间", "关闭时间", "修复时间", "完工时间", "完成日期", "验收时间",
    "停机时长", "故障时长", "维修时长", "工时", "用时", "费用", "维修费用", "成本", "备件",
    "更换备件", "备件名称", "备件数量", "数量", "部门", "车间", "班次", "班组", "优先级",
    "紧急程度", "故障类型", "故障类别", "类别", "类型", "序号", "报修人", "申请人", "验收人",
    "操作工", "completed", "completed at", "completed date", "closed", "closed at",
    "close date", "finish date", "end date", "downtime", "duration", "labor hours", "hours",
    "cost", "parts", "parts used", "spare parts", "quantity", "department", "shift",
    "priority", "type", "category", "no", "reported by", "requester", "operator",
]  # fmt: skip


class SourceMapping(BaseModel):
    """How the files matching `pattern` are read and mapped onto record fields."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="glob matched against the path relative to the input root")
    format: Literal["auto", "csv", "xlsx", "json", "jsonl"] = Field(
        "auto",
        description="file format; 'auto': by suffix (.xlsx/.xlsm/.xls: xlsx, .json, .jsonl, "
        "anything else: CSV)",
    )
    encoding: str = Field("auto", description="'auto' detects; else a Python codec name")
    delimiter: str = Field(",", description="field separator of a CSV file")
    sheet: str | Annotated[int, Field(ge=0)] | None = Field(
        None,
        description="XLSX sheet (name or 0-based index); None: the data sheet, chosen by "
        "its headers over code lists and summaries",
    )
    header_row: int | None = Field(
        None,
        ge=1,
        description="line (CSV) or sheet row (XLSX) of the header; None: found below "
        "report titles and blank rows",
    )
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
    join_with: str = Field(
        "; ",
        description="separator between the non-empty values of a field mapped to several "
        "headers in `columns`",
    )


class IngestConfig(BaseModel):
    """Work-order exports: which files are skipped, and how configured ones are mapped."""

    model_config = ConfigDict(extra="forbid")

    include: list[str] = Field(
        ["**/*.csv", "**/*.xlsx", "**/*.json", "**/*.jsonl"],
        description="globs (relative to the input root) of work-order exports; the flows do "
        "not read it: they take every file whose content is a work-order table",
    )
    exclude: list[str] = Field(
        [],
        description="globs (relative to the input root) of files never read, whatever their "
        "content; each is listed in the manifest as skipped ('excluded by ingest.exclude')",
    )
    sources: list[SourceMapping] = Field(
        default_factory=list,
        description="per-file mappings of work-order exports, matched by `pattern`: the first "
        "matching entry wins, and a matching file is read as a work-order table whatever its "
        "content says; unmatched files use the defaults (built-in header aliases, format by "
        "suffix, encoding detected)",
    )
    header_aliases: dict[WorkOrderField, list[str]] = Field(
        default_factory=dict,
        description="extra header names per record field, tried before the built-in alias "
        "table (compared after NFKC, lower case, without spaces, underscores and punctuation)",
    )
