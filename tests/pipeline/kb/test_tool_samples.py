"""Tool-use samples: knowledge-base lookups rendered with Qwen2.5's own chat template."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import polars as pl
import pyarrow.parquet as pq

from pipeline.kb.tool_samples import TOOLS, TOOLS_JSON, tool_use_samples
from pipeline.stages.messages import render_messages
from pipeline.stages.tokens import load_tokenizer
from schemas.arrow import SFT_TOOLS
from schemas.tokens import TokenizerConfig
from schemas.trainer import ToolSamplesConfig

TEMPLATE = Path(__file__).parents[1] / "fixtures" / "qwen2.5_chat_template.jinja"
IM_START, IM_END, TOOL_CALL, TOOL_CALL_END = 151644, 151645, 151657, 151658

# Work orders as technicians type them, codes as the controllers show them.
ROWS = [
    {
        "record_id": "wo-1", "source_kind": "workorder", "source_file": "workorders/维修工单.csv",
        "source_row": 12, "tier": "A", "language": "zh", "machine_model": "VMC850（FANUC 0i-MF）",
        "alarm_codes": ["FANUC:SV0436"],
        "symptom": "Y轴快移时报警SV0436，复位后重复出现，电机外壳发烫。",
        "diagnosis": "Y轴导轨润滑不足，丝杠负载电流长期超过额定值。",
        "action": "疏通Y轴润滑油路，更换堵塞的计量件，负载电流降至额定值60%。",
        "prevention": "每周检查润滑泵油位和打油周期。",
    },
    {
        "record_id": "wo-2", "source_kind": "workorder", "source_file": "workorders/orders_en.csv",
        "source_row": 7, "tier": "B", "language": "en",
        "machine_model": "DMG MORI CMX 1100 V (SINUMERIK 840D sl)",
        "alarm_codes": ["SINUMERIK:25000", "SINUMERIK:700123"],
        "symptom": "X axis stops during roughing, alarm 25000 and PLC alarm 700123 on screen",
        "diagnosis": "Encoder cable chafed through in the cable chain",
        "action": "Replaced encoder cable 6FX8002-2CA31, checked shield clamp",
        "prevention": None,
    },
    {
        "record_id": "wo-3", "source_kind": "workorder", "source_file": "workorders/orders_en.csv",
        "source_row": 8, "tier": "B", "language": "en", "machine_model": "Haas VF-2 (NGC)",
        "alarm_codes": [], "symptom": "Turret does not index",
        "diagnosis": "Clamp switch gap too large", "action": "Set gap to 1 mm", "prevention": None,
    },
    {
        "record_id": "wo-4", "source_kind": "workorder", "source_file": "workorders/orders_en.csv",
        "source_row": 9, "tier": "C", "language": "en", "machine_model": "Haas VF-2 (NGC)",
        "alarm_codes": ["HAAS:161"], "symptom": "Alarm 161 X axis drive fault",
        "diagnosis": "Amplifier fault", "action": "Replaced amplifier", "prevention": None,
    },
    {
        "record_id": "wo-5", "source_kind": "workorder", "source_file": "workorders/维修工单.csv",
        "source_row": 30, "tier": "C", "language": "zh", "machine_model": "VMC850（FANUC 0i-MF）",
        "alarm_codes": ["FANUC:SV0436"], "symptom": "报警SV0436",
        "diagnosis": None, "action": None, "prevention": None,
    },
]  # fmt: skip

KB = pl.DataFrame(
    [
        {
            "record_id": "kb-sv0436-en", "code": "FANUC:SV0436", "language": "en",
            "message": "SOFT THERMAL (OVC)",
            "causes": ["Motor current above rating for a long time"],
            "remedies": ["Reduce cutting load", "Check lubrication and brake"],
            "prevention": None, "source": "manuals/fanuc_0i-F_maintenance.md > Servo alarms",
        },
        {
            "record_id": "kb-sv0436-zh", "code": "FANUC:SV0436", "language": "zh",
            "message": "软过热继电器(OVC)",
            "causes": ["电机电流长时间超过额定值：切削负载过大、导轨润滑不良、制动器拖滞"],
            "remedies": ["降低切削负载或进给速度", "检查导轨润滑和丝杠"],
            "prevention": None, "source": "manuals/fanuc_0i-F_维修说明书.md > 伺服报警",
        },
        {
            "record_id": "kb-25000", "code": "SINUMERIK:25000", "language": "en",
            "message": "Axis %1 hardware fault of active encoder",
            "causes": ["Encoder cable damaged, connector loose or encoder contaminated"],
            "remedies": ["Check encoder cable and connectors", "Check the shield connection"],
            "prevention": "Inspect encoder cables in the cable chain every 6 months",
            "source": "manuals/sinumerik_840d_sl_diagnostics.md > NCK alarms",
        },
    ]
)  # fmt: skip


def _sft() -> pl.DataFrame:
    frame = pl.DataFrame(ROWS, schema_overrides={"alarm_codes": pl.List(pl.String)})
    return render_messages(frame)


def _qwen_template() -> jinja2.Template:
    """Jinja as `transformers` sets it up for chat templates."""
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x: json.dumps(x, ensure_ascii=False)
    return env.from_string(TEMPLATE.read_text(encoding="utf-8"))


def _published(tmp_path: Path) -> list[dict]:
    result = tool_use_samples(_sft(), KB, TokenizerConfig())
    path = tmp_path / "part-00000.parquet"
    pq.write_table(result.kept.to_arrow().cast(SFT_TOOLS), path)
    return pq.read_table(path).to_pylist()


def test_counters_and_reasons() -> None:
    result = tool_use_samples(_sft(), KB, TokenizerConfig())
    assert result.counters["read"] == 5
    assert result.kept["record_id"].to_list() == ["wo-1", "wo-2"]
    reasons = dict(zip(result.rejected["record_id"], result.rejected["reason"], strict=True))
    assert reasons == {
        "wo-3": "no_alarm_code",
        "wo-4": "no_fault_code_entry",
        "wo-5": "no_answer",
    }
    assert result.kept["kb_ids"].to_list() == [["kb-sv0436-zh"], ["kb-25000"]]


def test_conversation_calls_the_tool_then_answers(tmp_path: Path) -> None:
    zh, en = _published(tmp_path)
    assert [m["role"] for m in zh["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    call = zh["messages"][2]["tool_calls"]
    assert call == [
        {"type": "function",
         "function": {"name": "lookup_fault_code", "arguments": {"code": "FANUC:SV0436"}}}
    ]  # fmt: skip
    answer = json.loads(zh["messages"][3]["content"])
    assert answer["found"] is True and answer["message"] == "软过热继电器(OVC)"  # zh entry wins
    assert "润滑" in zh["messages"][4]["content"]
    # Two codes: two calls, two tool turns in order; the code not in the base says so.
    assert [m["role"] for m in en["messages"]][2:5] == ["assistant", "tool", "tool"]
    results = [json.loads(m["content"]) for m in en["messages"][3:5]]
    assert results[0]["code"] == "SINUMERIK:25000" and results[0]["found"] is True
    assert results[1] == {"code": "SINUMERIK:700123", "found": False}
    assert en["tools"] == TOOLS


def test_llamafactory_sharegpt_turns(tmp_path: Path) -> None:
    """function_call / observation turns alternate as LLaMA-Factory's sharegpt converter wants."""
    for row in _published(tmp_path):
        roles = [t["role"] for t in row["conversations"]]
        assert roles == ["system", "user", "function_call", "observation", "assistant"]
        calls = json.loads(row["conversations"][2]["content"])
        assert [c["arguments"]["code"] for c in calls] == row["alarm_codes"]
        observed = row["conversations"][3]["content"].split("\n</tool_response>\n<tool_response>\n")
        assert observed == [m["content"] for m in row["messages"] if m["role"] == "tool"]
        assert json.loads(row["tools_json"]) == TOOLS


def test_tokens_counted_on_qwen25_template(tmp_path: Path) -> None:
    template = _qwen_template()
    tok = load_tokenizer(TokenizerConfig())
    for row in _published(tmp_path):
        text = template.render(messages=row["messages"], tools=row["tools"])
        ids = tok.encode(text)
        assert row["n_tokens"] == len(ids)
        # system, user, assistant (calls), user (tool responses), assistant: five turns
        assert ids.count(IM_START) == 5 and ids.count(IM_END) == 5
        # one <tool_call> pair per code, plus the two the tools prompt shows
        n_calls = len(row["alarm_codes"])
        assert ids.count(TOOL_CALL) == n_calls + 2 and ids.count(TOOL_CALL_END) == n_calls + 2
        first_call = ids.index(TOOL_CALL, ids.index(IM_START, 10))
        assert ids[first_call - 2 : first_call] == tok.encode("assistant\n")
        assert ids[:3] == [IM_START, *tok.encode("system\n")]
        assert ids[-2:] == [IM_END, *tok.encode("\n")]
        assert "lookup_fault_code" in text and TOOLS_JSON[1:-1] in text


def test_no_knowledge_base_rejects_every_row() -> None:
    result = tool_use_samples(_sft(), None, TokenizerConfig())
    assert result.kept.height == 0
    assert result.counters["rejected_no_fault_code_entry"] == 4
    assert result.counters["rejected_no_alarm_code"] == 1


def test_disabled_gives_no_samples_and_reads_nothing() -> None:
    result = tool_use_samples(_sft(), KB, TokenizerConfig(), ToolSamplesConfig(enabled=False))
    assert result.kept.height == 0
    assert result.counters["read"] == result.counters["rejected"] == 0
