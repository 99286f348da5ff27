"""Thresholds and word lists of the coarse rule filters."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class FilterConfig(BaseModel):
    """The coarse rule filters; the first rule that applies gives the reject reason."""

    model_config = ConfigDict(extra="forbid")

    min_chars: int = Field(
        6,
        ge=0,
        description="characters: a record with fewer letters and digits (spaces, punctuation "
        "and symbols not counted) in symptom, cause, action and prevention together is "
        "rejected as too_short",
    )

    test_markers: list[str] = Field(
        [
            r"测试工单",
            r"测试数据",
            r"测试记录",
            r"请忽略",
            r"(?i)\btest (entry|record|ticket|row|order)\b",
            r"(?i)please ignore",
            r"(?i)\bdummy\b",
            r"(?i)^\s*(test|testing|测试|asdf\w*|qwer\w*)[\s\d!.！。]*$",
        ],
        description=(
            "regexes; a match in order_id, symptom, action or remarks rejects the record as "
            "test_entry (the first rule checked)"
        ),
    )

    placeholders: list[str] = Field(
        [
            "同上",
            "同前",
            "无",
            "暂无",
            "不详",
            "待定",
            "1111",
            "0000",
            "n/a",
            "na",
            "none",
            "null",
            "tbd",
            "xxx",
            "-",
            "--",
            "/",
            ".",
            "?",
            "see above",
            "same as above",
        ],
        description=(
            "whole-field values that carry nothing (compared in lower case, trimmed); a record "
            "whose every non-empty part is one of them is rejected as placeholder"
        ),
    )

    complaint_markers: list[str] = Field(
        [
            r"投诉",
            r"催",
            r"怎么又",
            r"太慢",
            r"不满意",
            r"什么时候",
            r"到底",
            r"！！",
            r"!!",
            r"(?i)unacceptable",
            r"(?i)complain",
            r"(?i)third time",
            r"(?i)\basap\b",
            r"(?i)still waiting",
            r"(?i)ridiculous",
            r"(?i)not happy",
        ],
        description=(
            "regexes of customer complaints; a record matching one in its parts and with no "
            "technical content is rejected as complaint_only (instead of no_technical_content)"
        ),
    )
    technical_terms: list[str] = Field(
        [
            "主轴",
            "伺服",
            "报警",
            "告警",
            "刀库",
            "刀具",
            "刀塔",
            "编码器",
            "润滑",
            "冷却",
            "液压",
            "气压",
            "导轨",
            "丝杠",
            "轴承",
            "电机",
            "驱动",
            "放大器",
            "换刀",
            "机械手",
            "卡盘",
            "尾座",
            "回零",
            "参考点",
            "限位",
            "急停",
            "PLC",
            "程序",
            "参数",
            "电池",
            "风扇",
            "过热",
            "过载",
            "漏油",
            "漏水",
            "异响",
            "振动",
            "精度",
            "间隙",
            "皮带",
            "联轴器",
            "传感器",
            "开关",
            "继电器",
            "接触器",
            "熔断",
            "电源",
            "电缆",
            "泵",
            "阀",
            "滤",
            "油",
            "轴",
            "更换",
            "调整",
            "清洗",
            "紧固",
            "校准",
            "spindle",
            "servo",
            "alarm",
            "encoder",
            "lube",
            "lubric",
            "coolant",
            "hydraulic",
            "pneumatic",
            "way",
            "ballscrew",
            "ball screw",
            "bearing",
            "motor",
            "drive",
            "amplifier",
            "tool",
            "atc",
            "turret",
            "chuck",
            "tailstock",
            "axis",
            "home",
            "limit",
            "e-stop",
            "estop",
            "plc",
            "parameter",
            "battery",
            "fan",
            "overheat",
            "overload",
            "leak",
            "noise",
            "vibrat",
            "backlash",
            "belt",
            "coupling",
            "sensor",
            "switch",
            "relay",
            "contactor",
            "fuse",
            "cable",
            "pump",
            "valve",
            "filter",
            "replace",
            "adjust",
            "clean",
            "tighten",
            "calibrat",
            "fault",
            "error",
            "fail",
            "broken",
            "worn",
            "crack",
            "seal",
            "hose",
            "oil",
            "wear",
        ],
        description=(
            "substrings (case-insensitive) that make a record technical; an alarm code counts "
            "too; a record with none is rejected as no_technical_content (or complaint_only), and "
            "one with unrecoverable encoding damage as unrecoverable_encoding"
        ),
    )
