"""Contracts of the four-part samples: structure, tier and messages configuration, and the
column types these stages add.

Word lists hold plain words (matched case-insensitively, English words on word boundaries);
fields named `*_patterns` hold regular expressions in Rust `regex` syntax (what polars runs).
"""

from __future__ import annotations

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.records import PARTS

# Columns added by the structure stage (the four parts replace symptom/cause/action/prevention).
PART_ORIGIN_DTYPE = pl.Struct({p: pl.String() for p in PARTS})
STRUCTURED_EXTRA: dict[str, pl.DataType] = {
    **{p: pl.String() for p in PARTS},
    "part_origin": PART_ORIGIN_DTYPE,  # "column:<name>", "cue:<word>" or "unlabelled"
}

# Columns added by the tier stage.
TIERS: tuple[str, ...] = ("A", "B", "C")
TIERED_EXTRA: dict[str, pl.DataType] = {
    "tier": pl.String(),
    "tier_reasons": pl.List(pl.String()),
}

# The chat column trainers read (TRL SFTTrainer, LLaMA-Factory sharegpt with role/content tags);
# its Parquet type is schemas.arrow.SFT's `messages`.
ROLES: tuple[str, ...] = ("system", "user", "assistant")
MESSAGES_DTYPE = pl.List(pl.Struct({"role": pl.String(), "content": pl.String()}))


def _check_parts(mapping: dict[str, object], what: str) -> None:
    unknown = set(mapping) - set(PARTS)
    if unknown:
        raise ValueError(f"{what}: unknown part(s) {sorted(unknown)}; parts are {list(PARTS)}")


class StructureConfig(BaseModel):
    """How the structure stage finds the four parts of a record."""

    model_config = ConfigDict(extra="forbid")

    part_columns: dict[str, str] = Field(
        default_factory=lambda: {
            "symptom": "symptom",
            "diagnosis": "cause",
            "action": "action",
            "prevention": "prevention",
        },
        description=(
            "part -> input column holding it when the export maps one (a work-order field after "
            "ingest); that column's text is the part's first choice, and its first clause defaults"
            " to that part"
        ),
    )
    free_text_columns: list[str] = Field(
        default_factory=lambda: ["remarks"],
        description=(
            "further free-text columns that are cut into clauses and searched for parts; they hold"
            " no part by themselves"
        ),
    )
    label_cues: dict[str, list[str]] = Field(
        default_factory=lambda: {
            "symptom": [
                "故障现象", "故障描述", "故障表现", "现象", "症状", "问题描述", "问题",
                "Symptom", "Symptoms", "Problem", "Complaint", "Issue", "Fault", "Observed",
            ],
            "diagnosis": [
                "故障原因", "原因", "诊断", "分析", "检查发现", "检查结果", "检查",
                "Root cause", "Cause", "Diagnosis", "Found", "Findings", "Finding", "Analysis",
            ],
            "action": [
                "处理措施", "处理方法", "处理", "措施", "维修", "更换", "调整", "解决方法",
                "Action", "Actions taken", "Action taken", "Fix", "Repair", "Replaced",
                "Corrective action", "Resolution", "Work done",
            ],
            "prevention": [
                "预防措施", "预防", "建议", "保养", "定期", "改进措施",
                "Prevention", "Recommendation", "Recommendations", "Preventive action", "PM",
            ],
        },
        description=(
            "per part, section labels: a word followed by a separator (':', '：', ' - ', "
            "'【...】'); the label is removed and the text up to the next label is that part"
        ),
    )  # fmt: skip
    label_suffixes: list[str] = Field(
        default_factory=lambda: [
            "分析", "描述", "说明", "情况", "过程", "方法", "记录", "结果", "措施",
            "analysis", "description", "details",
        ],
        description=(
            "optional words between a label and its separator ('原因分析：', 'Root cause "
            "analysis:')"
        ),
    )  # fmt: skip
    inline_cues: dict[str, list[str]] = Field(
        default_factory=lambda: {
            "symptom": ["故障现象", "现象为", "症状为", "表现为", "Symptom", "Complaint"],
            "diagnosis": [
                "检查发现", "经检查", "检查确认", "发现", "查明", "确认为", "判断为", "原因是",
                "原因为", "诊断为", "Found", "Root cause", "Cause was", "Caused by",
                "Diagnosed", "Traced to", "Determined",
            ],
            "action": [
                "更换", "换上", "换了", "换新", "调整", "维修", "处理", "清洗", "清理", "紧固",
                "重新", "修复", "焊接", "校正", "校准", "补偿", "修改", "拆检", "加注", "恢复",
                "补充", "导入", "拆洗", "标定", "安装", "更新",
                "Replaced", "Replace", "Adjusted", "Adjust", "Cleaned", "Clean", "Tightened",
                "Repaired", "Reset", "Recalibrated", "Calibrated", "Realigned", "Reseated",
                "Swapped", "Installed", "Fixed by", "Lubricated", "Flushed", "Restored",
                "Reloaded", "Rebuilt", "Reinstalled", "Refilled", "Topped up", "Changed",
                "Taught", "Retaught", "Readjusted", "Rewired", "Regreased", "Greased",
            ],
            "prevention": [
                "预防", "建议", "保养", "定期", "今后", "以后", "每月", "每周", "每天", "每班",
                "Prevention", "Recommend", "Recommended", "Suggest", "PM", "In future",
                "Going forward", "Regularly", "To prevent",
            ],
        },
        description=(
            "per part, words that open a clause of that part ('检查发现...', '更换...', 'Replaced "
            "...'); kept in the text"
        ),
    )  # fmt: skip
    inline_cue_prefixes: list[str] = Field(
        default_factory=lambda: [
            "已经", "已", "随后", "然后", "并且", "并", "再", "又", "经", "后",
            "and", "then", "so", "we", "tech", "re-",
        ],
        description=(
            "words before an inline cue that do not stop it opening the clause ('已更换', 'then "
            "replaced')"
        ),
    )  # fmt: skip
    unlabelled_hints: dict[str, list[str]] = Field(
        default_factory=lambda: {
            "diagnosis": [
                "由于", "因为", "导致", "造成", "引起", "磨损", "损坏", "松动", "老化", "断裂",
                "堵塞", "短路", "断线", "烧坏", "烧毁", "漏油", "卡死", "失效", "接触不良",
                "caused by", "due to", "because", "worn", "damaged", "loose", "broken",
                "failed", "faulty", "shorted", "clogged", "blocked", "leaking", "seized",
            ],
            "action": [
                "更换", "换了", "换上", "调整", "清洗", "清理", "紧固", "修复", "焊接", "校正",
                "校准", "重新设定", "恢复正常", "replaced", "replacing", "adjusted",
                "cleaned", "tightened", "repaired", "reset", "recalibrated", "swapped",
                "installed", "restored", "rebuilt", "reinstalled", "refilled", "reloaded",
            ],
            "prevention": [
                "建议", "今后", "以后应", "定期", "避免", "防止", "recommend", "should",
                "in future", "regularly", "to prevent", "avoid",
            ],
        },
        description=(
            "per part, words that give an unlabelled clause (not the first of its column) that "
            "part; checked in the order prevention, action, diagnosis"
        ),
    )  # fmt: skip
    work_request_verbs: list[str] = Field(
        default_factory=lambda: [
            "inspect", "check", "replace", "remove", "repair", "service", "install", "fit",
            "change", "clean", "flush", "disable", "sample", "run", "test", "investigate",
            "organise", "organize", "supply", "fabricate", "weld", "adjust", "lubricate",
            "grease", "top up", "rectify", "swap", "order", "modify", "reset", "refit",
            "检查", "更换", "拆除", "安装", "清洗", "维修", "调整", "排查",
        ],
        description=(
            "a one-clause record opening with one of these verbs is a work request ('inspect and "
            "replace rollers as required'): not split at its conjunctions into symptom and action"
        ),
    )  # fmt: skip
    null_values: list[str] = Field(
        default_factory=lambda: [
            "无", "暂无", "没有", "空", "/", "-", "--", "—", "n/a", "na", "none", "nil", "null",
        ],
        description=(
            "a clause equal to one of these (ignoring case and punctuation) means 'nothing' and "
            "gives no part"
        ),
    )  # fmt: skip
    complaint_patterns: list[str] = Field(
        default_factory=lambda: [
            r"(?:客户|用户|厂方|车间|操作工|生产部|老板)[^,，。;；]{0,10}"
            r"(?:生气|不满|投诉|抱怨|发火|发脾气|骂|着急|很急|催)",
            r"投诉",
            r"请尽快|尽快(?:处理|维修|修好|解决|安排|来)|速来|马上来|立即(?:处理|来人)",
            r"再不(?:修|来|处理)",
            r"要求[^,，。;；]{0,6}(?:今天|今日|当天|马上|立即|立刻|尽快)",
            r"(?i)\bcustomer\b[^,.;]{0,20}\b(?:angry|upset|furious|unhappy|not happy"
            r"|frustrated|complain\w*|mad|annoyed)\b",
            r"(?i)\bcomplain(?:ed|ing|s)?\s+(?:about|that|again)\b",
            r"(?i)\b(?:third|3rd|second|2nd|fourth|4th)\s+time\s+(?:this|we|they|in)\b",
            r"(?i)\bplease\s+(?:fix|repair|send|come|hurry|expedite)\b",
            r"(?i)\bneeds?\s+(?:this|it)\s+(?:fixed|back|running)\b",
            r"(?i)\bescalat\w*",
        ],
        description=(
            "regexes (Rust regex syntax); a clause matching one (customer complaints, requests to "
            "hurry) is dropped whole"
        ),
    )
    urgency_patterns: list[str] = Field(
        default_factory=lambda: [
            r"[【\[](?i:紧急|加急|特急|urgent|asap)[】\]]",
            r"(?:急{2,}|急\s*[!！]|特急|加急|十万火急|非常急|很急|紧急[!！])[!！]*",
            r"(?:客户|用户|车间|生产部)?(?:已经|一直)?催了?[一二三四五六七八九十两几\d]+[天次遍回]了?",
            r"(?:客户|用户|车间)?一直在?催",
            r"(?i)\basap\b!*|\burgent(?:ly)?\b!*|\bhigh priority\b",
            r"[!！]{2,}",
        ],
        description=(
            "regexes (Rust regex syntax) of urgency notes ('急！', '[URGENT]'), removed where they "
            "stand"
        ),
    )
    signature_patterns: list[str] = Field(
        default_factory=lambda: [
            r"(?:——?|--|–)\s*[^\s,，。.;；!！?？:：]{1,16}(?:\s+[^\s,，。.;；!！?？:：]{1,16}){0,2}"
            r"\s*$",
            r"(?is)\b(?:best |kind |warm )?regards\b.*$",
            r"(?is)\bsent from my \w+.*$",
            r"(?i)\b(?:thanks|thank you|cheers)\b[,!.]?\s*(?:\[NAME\]|(?-i:[A-Z][a-z]+))?\.?\s*$",
            r"\n\s*\[NAME\]\S{0,3}\s*$",
            # the signed name only: a serial or part number glued to it keeps the cue in place
            r"(?:维修人|维修员|维修工|签名|签字|记录人|填写人|经办人|处理人)\s*[:：]\s*[^\s\d]{1,12}\s*$",
            r"(?:此致\s*)?敬礼[!！。]?\s*$|谢谢[!！。]?\s*$",
        ],
        description=(
            "regexes (Rust regex syntax) of signatures and mail footers, removed at the end of a "
            "text"
        ),
    )

    @model_validator(mode="after")
    def _parts_known(self) -> StructureConfig:
        for name in ("part_columns", "label_cues", "inline_cues", "unlabelled_hints"):
            _check_parts(getattr(self, name), name)
        return self


class TierConfig(BaseModel):
    """Rules of the A/B/C tiers."""

    model_config = ConfigDict(extra="forbid")

    placeholder_parts: list[str] = Field(
        default_factory=lambda: [
            "No current controls", "No controls", "None", "N/A", "NA", "nil", "TBD", "TBC",
            "-", "无", "暂无", "没有", "无措施", "不详", "同上", "see above",
        ],
        description=(
            "a part equal to one of these (ignoring case, spaces and punctuation) counts as "
            "missing; tiers need a symptom and an action (else below_tier_c), B also a diagnosis "
            "or a prevention, A all four"
        ),
    )  # fmt: skip
    min_part_units: int = Field(
        2,
        ge=1,
        description=(
            "a part with fewer Han characters plus words than this ('broken', '油') counts as "
            "missing"
        ),
    )
    vague_part_phrases: list[str] = Field(
        default_factory=lambda: [
            "未查明", "原因不明", "原因未明", "不明原因", "原因待查", "重启后正常", "重启正常",
            "重新启动后正常", "断电重启", "复位后正常", "复位正常", "继续观察", "观察使用",
            "待观察", "观察", "暂时正常", "恢复正常", "正常", "已处理", "处理好了", "已修好",
            "no fault found", "nff", "could not duplicate", "cannot duplicate", "cnd",
            "unknown cause", "cause unknown", "monitor", "monitoring", "observe", "as required",
            "as needed", "as req", "checked", "ok", "okay", "fixed", "done", "completed",
            "working now", "running ok", "reset", "restarted", "rebooted", "power cycled",
            "cycled power", "machine", "and", "then", "continue to", "will",
        ],
        description=(
            "a diagnosis or action that is only these phrases says nothing: such a diagnosis does "
            "not count for tier B and gives vague_diagnosis (not A); such an action caps the row "
            "at tier C (vague_action_phrase)"
        ),
    )  # fmt: skip
    max_damaged_share: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description=(
            "share (0 to 1) of a part's characters lost to encoding damage (锟斤拷, U+FFFD) above "
            "which the row is capped at tier C (encoding_damage)"
        ),
    )
    lossy_repairs: list[str] = Field(
        default_factory=lambda: ["gbk_lossy"],
        description=(
            "`repairs` tags of a lossy repair (characters dropped); a row with one is capped at "
            "tier C (lossy_repair)"
        ),
    )
    min_diagnosis_chars_zh: int = Field(
        4,
        ge=0,
        description=(
            "characters: a Chinese record's diagnosis shorter than this is not specific "
            "(short_diagnosis; not tier A)"
        ),
    )
    min_diagnosis_chars_en: int = Field(
        12,
        ge=0,
        description=(
            "characters: an English record's diagnosis shorter than this is not specific "
            "(short_diagnosis; not tier A)"
        ),
    )
    vague_diagnosis_terms: list[str] = Field(
        default_factory=lambda: [
            "不明", "不详", "不清楚", "未知", "待查", "待确认", "待定", "未找到", "原因未",
            "未查明", "查不出", "不确定", "可能是",
            "unknown", "unclear", "not sure", "tbd", "to be determined", "no fault found",
            "could not find", "not found", "n/a",
        ],
        description=(
            "a diagnosis containing one of these (case-insensitive) is not specific "
            "(vague_diagnosis; not tier A)"
        ),
    )  # fmt: skip
    diagnosis_terms: list[str] = Field(
        default_factory=lambda: [
            "轴承", "编码器", "电机", "主轴", "丝杠", "导轨", "皮带", "同步带", "联轴器",
            "伺服", "驱动器", "放大器", "电缆", "线缆", "接头", "插头", "开关", "传感器",
            "继电器", "接触器", "保险", "电源", "电池", "风扇", "油泵", "冷却泵", "液压",
            "气缸", "电磁阀", "阀", "密封", "油管", "过滤器", "滤网", "刀库", "刀塔", "机械手",
            "卡盘", "拉刀", "碟簧", "润滑", "冷却液", "参数", "光栅尺", "限位", "减速开关",
            "磨损", "损坏", "松动", "老化", "断裂", "堵塞", "短路", "断线", "烧坏", "漏油",
            "卡死", "过热", "过载", "接触不良", "间隙", "变形", "不足", "过大", "过小", "过高",
            "过低", "偏高", "偏低", "泄漏", "漏气", "卡滞", "卡住", "打滑", "偏移", "误改",
            "丢失", "粘连", "氧化", "抖动", "铁屑", "防护罩", "蓄能器", "氮气", "浮球", "电磁",
            "bearing", "encoder", "motor", "spindle", "ball screw", "ballscrew", "way",
            "belt", "coupling", "servo", "drive", "amplifier", "cable", "connector", "switch",
            "sensor", "relay", "contactor", "fuse", "power supply", "battery", "fan", "pump",
            "hydraulic", "cylinder", "solenoid", "valve", "seal", "hose", "filter", "magazine",
            "turret", "tool changer", "chuck", "drawbar", "lubrication", "coolant", "parameter",
            "scale", "limit switch", "worn", "damaged", "loose", "broken", "cracked",
            "clogged", "shorted", "burnt", "leak", "seized", "overheat", "overload", "backlash",
            "chip", "chips", "cover", "stuck", "jammed", "slipped", "drifted", "lost",
            "contaminated", "corroded", "oxidized", "chafed", "starved", "too low", "too high",
            "gain", "pressure", "insufficient",
        ],
        description=(
            "a specific diagnosis names one of these components or failure causes "
            "(case-insensitive) or cites an alarm code (`alarm_code_pattern`); else "
            "generic_diagnosis (not tier A)"
        ),
    )  # fmt: skip
    alarm_code_pattern: str = Field(
        r"\b[A-Z]{1,4}[-: ]?\d{3,6}\b|\d{3,6}\s*号?报警"
        r"|(?i:\balarm|\balm|报警|\berror)\s*(?i:no\.?|号)?\s*[:：#]?\s*\d{3,6}",
        description=(
            "regex (Rust regex syntax) of an alarm code cited in a diagnosis, which makes it "
            "specific like a `diagnosis_terms` word"
        ),
    )
    action_verbs: list[str] = Field(
        default_factory=lambda: [
            "更换", "换上", "换了", "调整", "清洗", "清理", "紧固", "修复", "焊接", "校正",
            "校准", "补偿", "修改", "设定", "重装", "拆检", "加注", "润滑", "疏通", "修磨",
            "换", "补充", "导入", "恢复", "拆洗", "释放", "标定", "压接", "安装", "吹扫", "更新",
            "replaced", "replace", "adjusted", "adjust", "cleaned", "clean", "tightened",
            "tighten", "repaired", "repair", "recalibrated", "calibrated", "realigned",
            "reseated", "swapped", "installed", "lubricated", "flushed", "changed", "set",
            "rewired", "resoldered", "refilled", "rebuilt", "reinstalled", "re-terminated",
            "terminated", "crimped", "dried", "taught", "re-taught", "readjusted", "restored",
            "reloaded", "reprogrammed", "retuned", "tuned", "greased", "topped up", "cleared",
        ],
        description=(
            "a concrete action (needed for tier A, else vague_action) has one of these verbs "
            "followed by an object, or in passive form after its subject, or a part number"
        ),
    )  # fmt: skip
    action_object_fillers: list[str] = Field(
        default_factory=lambda: [
            "了", "掉", "新的", "新", "一个", "一根", "the", "a", "an", "new", "both", "all",
        ],
        description=(
            "words that may stand between an action verb and its object ('了', 'the', 'new')"
        ),
    )  # fmt: skip
    action_object_stopwords: list[str] = Field(
        default_factory=lambda: [
            "后", "完", "好", "过", "一下", "正常", "it", "them", "this", "that", "ok", "done",
            "normal", "and", "then", "so", "was", "were", "been", "also", "not", "we", "they",
            "he", "she", "tech", "technician", "operator", "alarm", "alarms",
        ],
        description=(
            "words that are no object of an action verb (nor, in passive form, its subject): "
            "'replaced it', '更换后' are not concrete"
        ),
    )  # fmt: skip
    passive_markers: list[str] = Field(
        default_factory=lambda: ["was", "were", "has been", "have been", "is", "are", "got"],
        description=(
            "auxiliaries of the passive form that count as a concrete action ('pump was replaced',"
            " 'cartridge rebuilt')"
        ),
    )
    part_number_pattern: str = Field(
        r"\b[A-Z0-9]*[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+\b|\b\d+(?:-[A-Z0-9]+)*-[A-Z0-9]*[A-Z][A-Z0-9]*\b"
        r"|(?i:P/N|part\s*no\.?|料号|物料号|订货号)\s*[:：]?\s*[A-Za-z0-9-]{4,}",
        description=(
            "regex (Rust regex syntax) of a part number ('A06B-6240-H105', 'P/N 12345'); an action"
            " citing one is concrete"
        ),
    )
    fault_log_source_kinds: list[str] = Field(
        default_factory=lambda: ["alarm_log"],
        description=(
            "source kinds of fault-log style rows: tier C unless all four parts are present "
            "(fault_log)"
        ),
    )


class Localized(BaseModel):
    """One text per record language."""

    model_config = ConfigDict(extra="forbid")

    zh: str = Field(description="text for records whose language is Chinese")
    en: str = Field(
        description="text for records whose language is English (every language but Chinese)"
    )


class MessagesConfig(BaseModel):
    """Texts of the rendered chat sample."""

    model_config = ConfigDict(extra="forbid")

    system_prompt: Localized = Field(
        Localized(
            zh=(
                "你是一名经验丰富的数控机床维修工程师。根据用户给出的机床型号、报警代码和故障现象，"
                "给出故障诊断、处理措施和预防建议。"
            ),
            en=(
                "You are an experienced CNC machine-tool maintenance engineer. From the machine "
                "model, alarm codes and symptom the user gives, state the diagnosis, the "
                "corrective action and how to prevent the fault."
            ),
        ),
        description="system turn of every chat sample, in the record's language",
    )
    machine_label: Localized = Field(
        Localized(zh="机床型号", en="Machine"),
        description=(
            "label of the user turn's machine-model line (left out when the record has no machine "
            "model)"
        ),
    )
    alarms_label: Localized = Field(
        Localized(zh="报警代码", en="Alarm codes"),
        description=(
            "label of the user turn's alarm-codes line (left out when the record cites none)"
        ),
    )
    symptom_label: Localized = Field(
        Localized(zh="故障现象", en="Symptom"),
        description="label of the user turn's symptom line",
    )
    diagnosis_label: Localized = Field(
        Localized(zh="诊断", en="Diagnosis"),
        description=(
            "label of the assistant turn's diagnosis line (left out when the sample has no "
            "diagnosis)"
        ),
    )
    action_label: Localized = Field(
        Localized(zh="处理", en="Action"), description="label of the assistant turn's action line"
    )
    prevention_label: Localized = Field(
        Localized(zh="预防", en="Prevention"),
        description=(
            "label of the assistant turn's prevention line (left out when the sample has no "
            "prevention)"
        ),
    )
    label_separator: Localized = Field(
        Localized(zh="：", en=": "), description="between a label and its text"
    )
