"""Settings of the normalization stage: mojibake repair, width and whitespace, alarm codes, PII."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class NormalizeConfig(BaseModel):
    """Normalization of every text: mojibake, line breaks, alarm codes, language, redaction."""

    model_config = ConfigDict(extra="forbid")

    fix_latin_mojibake: bool = Field(
        True, description="run ftfy on strings whose pre-check finds Latin mojibake (Ã©, â€™, Â)"
    )
    fix_gbk_mojibake: bool = Field(
        True, description="repair UTF-8 bytes that were decoded as GBK (鍐峰嵈娉 -> 冷却)"
    )
    keep_newlines: bool = Field(
        True, description="keep line breaks (collapsed to one) instead of turning them into spaces"
    )
    max_alarm_codes: int = Field(
        12, ge=1, description="a record keeps at most this many distinct alarm codes"
    )
    asset_controllers: dict[str, str] = Field(
        default_factory=dict,
        description="asset pattern (glob, case-insensitive) -> controller family or model, for "
        "the alarm codes of work orders without a machine model and of MTConnect logs (whose "
        "codes are the controller's: MAZAK:379, not MTCONNECT:379), e.g. {'VMC-*' = 'FANUC'}",
    )
    min_han_share: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="a record's `language` (which picks its chat sample's system prompt and "
        "labels) is 'zh' when Han characters make up at least this share (0 to 1) of its Han "
        "characters and Latin letters, else 'en'",
    )
    customer_names: list[str] = Field(
        default_factory=list,
        description="customer and company names replaced by [CUSTOMER] wherever they occur "
        "(work-order text, manuals, fault tables, reject payloads; ASCII letters in any case), "
        "e.g. ['宁波精工机械有限公司', 'Acme Tooling GmbH']",
    )
    min_name_length: int = Field(
        2,
        ge=1,
        description="characters: technician names shorter than this are not searched for "
        "(and redacted as [NAME]) in the record's text",
    )
    name_stopwords: list[str] = Field(
        [
            "同上",
            "同前",
            "无",
            "暂无",
            "不详",
            "未知",
            "待定",
            "班组",
            "维修",
            "维修组",
            "机修",
            "电工",
            "班长",
            "夜班",
            "白班",
            "维修部",
            "设备部",
            "外协",
            "厂家",
            "n/a",
            "na",
            "none",
            "null",
            "tbd",
            "unknown",
            "test",
            "测试",
            "maintenance",
            "vendor",
        ],
        description="technician values (compared in lower case) that are not person names, "
        "so not redacted as [NAME] where they occur in the text",
    )
