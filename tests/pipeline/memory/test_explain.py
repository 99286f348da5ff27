"""estimate --explain: the explained terms add up to the peak, and each formula, evaluated with
its inputs, gives its bytes."""

from __future__ import annotations

import ast
import json
import operator

import pytest

from pipeline.memory.cli import main
from pipeline.memory.estimate import estimate
from pipeline.memory.models import get_model
from schemas.memory import Term, TrainingSetup

_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def evaluate(formula: str, inputs: dict[str, float | int | str]) -> float:
    """A formula of + - * /, numbers and input names; anything else is refused."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name) and not isinstance(inputs[node.id], str):
            return float(inputs[node.id])
        raise ValueError(f"not allowed in a formula: {ast.dump(node)}")

    return ev(ast.parse(formula, mode="eval").body)


SETUPS = {
    "full": dict(method="full"),
    "lora": dict(method="lora"),
    "qlora": dict(method="qlora"),
    "zero3_paged_embeddings": dict(
        method="lora", zero=3, dp=4, optimizer="paged_adamw", train_embeddings=True
    ),
    "liger_offload": dict(method="full", liger=True, zero=3, dp=8, offload="all"),
    "chunked_in_backward": dict(method="full", loss="chunked", optimizer_in_backward=True),
    "variable_recompute": dict(method="qlora", recompute="full", variable_length=True),
}


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_terms_sum_to_the_peak_and_formulas_give_their_bytes(name: str) -> None:
    s = TrainingSetup(seq_len=2048, micro_batch=4, **SETUPS[name])
    b = estimate(get_model("qwen2.5-7b"), s)
    assert {t.name for t in b.explain} <= set(b.terms())
    assert sum(t.bytes for t in b.explain) == pytest.approx(b.total_bytes, abs=4)
    for t in b.explain:  # every term the breakdown reports, its own figure
        assert int(t.bytes) == pytest.approx(b.terms()[t.name], abs=2), t.name
        assert evaluate(t.formula, t.inputs) == pytest.approx(t.bytes, rel=1e-9, abs=1), t.name


def test_weights_and_adapters_by_hand() -> None:
    """Qwen2.5-7B (7,615,616,512 params) in bf16: 2 B each. LoRA r 8 on all seven linears:
    per layer 8 x (q, o: 2 x (3584+3584) + k, v: 2 x (3584+512) + gate, up, down:
    3 x (3584+18944)) = 8 x 90,112 = 720,896; x 28 layers x 16 B (fp32 weight, gradient, m, v)
    = 322,961,408 B."""
    b = estimate(get_model("qwen2.5-7b"), TrainingSetup(method="lora", lora_rank=8))
    terms = {t.name: t for t in b.explain}
    w = terms["weights"]
    assert w.inputs["n_params"] == 7_615_616_512 and w.inputs["bytes_per_param"] == 2.0
    assert evaluate(w.formula, w.inputs) == 7_615_616_512 * 2
    a = terms["adapters"]
    assert a.inputs["lora_params_per_layer"] == 720_896
    assert evaluate(a.formula, a.inputs) == 322_961_408 == b.adapters


def test_evaluator_refuses_calls() -> None:
    with pytest.raises(ValueError):
        evaluate("__import__('os')", {})


def test_cli_prints_the_section_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--model", "qwen2.5-7b", "--method", "lora", "--seq-len", "2048", "--micro-batch", "4"]
    assert main([*args, "--explain"]) == 0
    text = capsys.readouterr().out
    assert "weights = n_params * bytes_per_param / weight_shards = 14.19 GiB" in text
    assert "where n_params 7615616512, bytes_per_param 2, weight_shards 1" in text
    assert main([*args, "--explain", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sum(t["bytes"] for t in out["explain"]) == pytest.approx(out["total_bytes"], abs=12)
    assert main([*args, "--json"]) == 0
    assert "explain" not in json.loads(capsys.readouterr().out)


def test_a_term_adds_a_piece() -> None:
    t = Term("x", "a * b", {"a": 2, "b": 3}, 6.0).plus("c", 4.0, c=4)
    assert (t.formula, t.bytes) == ("a * b + c", 10.0)
