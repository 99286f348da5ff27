"""Signature stripping after a `维修人：` cue removes the signed name, never the serial or part
number a technician typed after it in the same field (issue 12)."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.stages.structure import structure
from pipeline.text.pii import redact_pii
from schemas.records import INGESTED_SCHEMA, NORMALIZED_EXTRA

# Action fields as technicians close them in a CMMS: the name is redacted before structuring.
SIGNED = [
    ("更换主轴编码器后回零正常。维修人：张伟A860-2109-T302", "A860-2109-T302"),
    ("更换X轴伺服放大器，试机正常 维修人：李强SN:V15K0487", "V15K0487"),
    ("更换前轴承 维修人：王芳7014C", "7014C"),
    ("重新紧固电缆插头 维修人: 赵磊 A06B-6114-H106", "A06B-6114-H106"),
]


def _action(text: str) -> str:
    schema = {**INGESTED_SCHEMA, **NORMALIZED_EXTRA}
    row = {c: None for c in schema} | {
        "record_id": "r0",
        "source_kind": "workorder",
        "source_file": "工单.csv",
        "source_row": 2,
        "alarm_codes": [],
        "repairs": [],
        "pii_redactions": 0,
        "language": "zh",
        "symptom": "X轴回零报警",
        "action": text,
    }
    records = pl.DataFrame([row], schema=schema)
    records = records.with_columns(redact_pii(pl.col("action")).alias("action"))
    return structure(records).kept["action"][0]


@pytest.mark.parametrize(("text", "number"), SIGNED)
def test_signature_cue_keeps_the_number_after_it(text: str, number: str) -> None:
    action = _action(text)
    assert number in action
    assert "张伟" not in action and "李强" not in action and "王芳" not in action


def test_a_plain_signature_is_still_stripped() -> None:
    action = _action("更换冷却泵叶轮并清理滤网。维修人：周明")
    assert action.startswith("更换冷却泵叶轮并清理滤网") and "维修人" not in action
