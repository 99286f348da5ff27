from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.stages.messages import render_messages
from schemas.arrow import SFT
from schemas.records import PARTS
from schemas.samples import MESSAGES_DTYPE, ROLES, MessagesConfig

ZH = {
    "language": "zh",
    "machine_model": "VMC850(FANUC 0i-MF)",
    "alarm_codes": ["FANUC:SV0401"],
    "symptom": "开机X轴报警SV0401,V就绪信号关闭。",
    "diagnosis": "X轴伺服放大器电源模块电容鼓包。",
    "action": "更换X轴伺服放大器A06B-6117-H105。",
    "prevention": "电柜加装空调,每季度清理散热风扇。",
}
EN = {
    "language": "en",
    "machine_model": "Haas VF-2 (NGC)",
    "alarm_codes": [],
    "symptom": "Turret does not index, stops between stations.",
    "diagnosis": None,
    "action": "Replaced the turret clamp proximity switch and set the gap to 1 mm.",
    "prevention": None,
}
EN_ASSISTANT = "Action: Replaced the turret clamp proximity switch and set the gap to 1 mm."
SCHEMA = {
    "record_id": pl.String,
    "language": pl.String,
    "machine_model": pl.String,
    "alarm_codes": pl.List(pl.String),
    **{p: pl.String for p in PARTS},
}


def frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame([{"record_id": f"r{i}"} | r for i, r in enumerate(rows)], schema=SCHEMA)


def test_messages_are_system_user_assistant_in_the_record_language():
    out = render_messages(frame([ZH, EN]))
    assert out.schema["messages"] == MESSAGES_DTYPE
    zh, en = out["messages"].to_list()
    assert [m["role"] for m in zh] == list(ROLES) == [m["role"] for m in en]
    cfg = MessagesConfig()
    assert zh[0]["content"] == cfg.system_prompt.zh
    assert en[0]["content"] == cfg.system_prompt.en
    assert zh[1]["content"] == (
        "机床型号：VMC850(FANUC 0i-MF)\n"
        "报警代码：FANUC:SV0401\n"
        "故障现象：开机X轴报警SV0401,V就绪信号关闭。"
    )
    assert zh[2]["content"] == (
        "诊断：X轴伺服放大器电源模块电容鼓包。\n"
        "处理：更换X轴伺服放大器A06B-6117-H105。\n"
        "预防：电柜加装空调,每季度清理散热风扇。"
    )
    # Absent parts and an empty code list are left out, not rendered empty.
    assert en[1]["content"] == (
        "Machine: Haas VF-2 (NGC)\nSymptom: Turret does not index, stops between stations."
    )
    assert en[2]["content"] == EN_ASSISTANT
    # Every other column is kept as it was.
    assert out.drop("messages").equals(frame([ZH, EN]))


def test_optional_columns_may_be_missing_and_language_is_detected():
    df = frame([ZH, EN]).drop("machine_model", "alarm_codes", "language")
    zh, en = render_messages(df)["messages"].to_list()
    assert zh[1]["content"] == "故障现象：开机X轴报警SV0401,V就绪信号关闭。"
    assert en[0]["content"].startswith("You are")
    assert en[2]["content"].startswith("Action: ")


def test_texts_come_from_configuration():
    cfg = MessagesConfig.model_validate(
        {"system_prompt": {"zh": "你是维修助手。", "en": "You are a maintenance assistant."}}
    )
    zh = render_messages(frame([ZH]), cfg)["messages"][0].to_list()
    assert zh[0]["content"] == "你是维修助手。"


def test_messages_round_trip_through_parquet_as_trainers_read_them(tmp_path):
    out = render_messages(frame([ZH, EN]))
    path = tmp_path / "part-0.parquet"
    out.write_parquet(path)

    table = pq.read_table(path)
    messages_type = table.schema.field("messages").type
    assert pa.types.is_list(messages_type) or pa.types.is_large_list(messages_type)
    element = messages_type.value_type
    assert [element.field(i).name for i in range(element.num_fields)] == ["role", "content"]
    assert all(pa.types.is_string(f.type) or pa.types.is_large_string(f.type) for f in element)

    # The snapshot's contract type: list<struct<role: string, content: string>>.
    contract = SFT.field("messages").type
    cast = table.select(["messages"]).cast(pa.schema([("messages", contract)]))
    pq.write_table(cast, tmp_path / "contract.parquet")
    back = pq.read_table(tmp_path / "contract.parquet")
    assert back.schema.field("messages").type == contract
    assert str(contract) == "list<item: struct<role: string, content: string>>"

    # What TRL / `datasets` hand to the chat template: a list of {"role", "content"} dicts.
    rows = back.column("messages").to_pylist()
    assert rows[0][0] == {"role": "system", "content": MessagesConfig().system_prompt.zh}
    assert rows[1][2] == {"role": "assistant", "content": EN_ASSISTANT}
    assert pl.read_parquet(tmp_path / "contract.parquet")["messages"].to_list() == rows
