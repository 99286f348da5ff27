"""Repository groups of calibration rows, and the frozen set of published sources."""

from __future__ import annotations

import polars as pl
import pytest

from tools.calibration import (
    DEFAULT_CSV,
    PROJECT_CSV,
    fit_constants,
    held_out_plan,
    leave_one_repository_out,
    load_cases,
    plan_margins,
    run,
)
from tools.calibration_sources import (
    check_frozen,
    check_own_rows,
    frozen_list,
    repositories,
    repository_groups,
    source_list,
)

# source column values as written in the two CSVs
TORCHTUNE_README = (
    "pytorch/torchtune README.md 'Memory and training speed' table (added commit 30b8519e8 "
    "2024-09-24; unchanged at HEAD bd2a0fc7c)"
)
TORCHTUNE_DOCS = "pytorch/torchtune docs/source/tutorials/llama3.rst"
TORCHTITAN = "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md"
QWEN25_SWIFT = "QwenLM/Qwen2.5 docs/source/training/ms_swift.md (30-minute self-cognition)"
QWEN25_LLAMAFACTORY = "QwenLM/Qwen2.5 examples/llama-factory/finetune-zh.md (+ qwen2-7b-*-sft.yaml)"
SWIFT = "modelscope/ms-swift docs/source_en/LLM/Benchmark.md (commit 4692215)"
QWEN1 = "QwenLM/Qwen README.md 'Profiling of Memory and Speed' table (HEAD 2df8e8a)"
LITGPT_OLD = "Lightning-AI/lit-gpt tutorials/resource-tables.md (10/20/2023, commit 8641822)"
LITGPT = "Lightning-AI/litgpt config_hub/finetune/README.md (commit 03ffc55)"
PEFT_DS = "huggingface/peft docs/source/accelerate/deepspeed.md (commit 93288af)"
PEFT_FSDP = "huggingface/peft docs/source/accelerate/fsdp.md (commit e0cfce6)"
REAL = [TORCHTUNE_README, TORCHTUNE_DOCS, TORCHTITAN, QWEN25_SWIFT, QWEN25_LLAMAFACTORY, SWIFT,
        QWEN1, LITGPT_OLD, LITGPT, PEFT_DS, PEFT_FSDP]  # fmt: skip


def test_the_source_strings_are_the_csvs_own() -> None:
    assert set(REAL) <= {s[3] for s in frozen_list()}


def test_repositories_of_a_source() -> None:
    assert repositories(TORCHTUNE_DOCS) == {"pytorch/torchtune"}
    # the harness named in the document's path joins the document's repository
    assert repositories(QWEN25_SWIFT) == {"qwenlm/qwen2.5", "modelscope/ms-swift"}
    assert repositories(QWEN25_LLAMAFACTORY) == {"qwenlm/qwen2.5", "hiyouga/llama-factory"}
    assert repositories(LITGPT_OLD) == repositories(LITGPT) == {"lightning-ai/litgpt"}
    # "fsdp" alone is a feature, not Answer.AI's fsdp_qlora
    assert repositories(PEFT_FSDP) == {"huggingface/peft"}
    assert repositories("arXiv 2305.14314 QLoRA paper, Table 3 (code: artidoro/qlora)") == {
        "arxiv",
        "artidoro/qlora",
    }


def test_repository_groups_of_the_real_sources() -> None:
    g = repository_groups(REAL)
    assert g[TORCHTUNE_README] == g[TORCHTUNE_DOCS] == "pytorch/torchtune"
    assert g[TORCHTITAN] == "pytorch/torchtitan"  # same owner, another repository and harness
    # Qwen2.5's docs measured with ms-swift and LLaMA-Factory: one group with ms-swift's own
    assert g[QWEN25_SWIFT] == g[QWEN25_LLAMAFACTORY] == g[SWIFT]
    assert g[SWIFT] == "modelscope/ms-swift + qwenlm/qwen2.5"
    assert g[QWEN1] == "qwenlm/qwen"  # Qwen1's own finetune.py, another repository
    assert g[LITGPT_OLD] == g[LITGPT] == "lightning-ai/litgpt"
    assert g[PEFT_DS] == g[PEFT_FSDP] == "huggingface/peft"
    assert len(set(g.values())) == 6


def test_a_paper_joins_its_code_repository() -> None:
    paper = "arXiv 2305.14314 QLoRA paper, Table 3 (code: artidoro/qlora)"
    code = "artidoro/qlora README.md"
    g = repository_groups([paper, code, TORCHTUNE_DOCS])
    assert g[paper] == g[code] == "artidoro/qlora + arxiv"
    assert g[TORCHTUNE_DOCS] == "pytorch/torchtune"


@pytest.fixture(scope="module")
def frozen() -> dict[str, pl.DataFrame]:
    if not DEFAULT_CSV.exists():
        pytest.skip(f"../shared not present: {DEFAULT_CSV}")
    read = lambda p: pl.read_csv(p, infer_schema_length=None)  # noqa: E731
    return {"shared": read(DEFAULT_CSV), "project": read(PROJECT_CSV)}


def test_calibration_sources_match_the_committed_list(frozen) -> None:  # type: ignore[no-untyped-def]
    have = source_list(frozen["shared"], "shared") + source_list(frozen["project"], "project")
    assert sorted(have) == sorted(frozen_list())
    assert sum(s[1] for s in frozen_list()) == 274  # 137 shared + 137 project rows
    for file, df in frozen.items():
        check_frozen(df, file)


def test_a_changed_frozen_set_is_refused(frozen) -> None:  # type: ignore[no-untyped-def]
    df = frozen["project"]
    added = pl.concat([df, df.head(1)])  # one more row of a known source
    edited = df.with_columns(pl.when(pl.int_range(pl.len()) == 3).then(99.0)
                             .otherwise(pl.col("peak_mem_gb")).alias("peak_mem_gb"))  # fmt: skip
    new_source = pl.concat([df, df.head(1).with_columns(source=pl.lit("someone/else README.md"))])
    for bad in (added, edited, new_source):
        with pytest.raises(ValueError, match="frozen"):
            check_frozen(bad, "project")
    with pytest.raises(ValueError, match="frozen"):
        check_frozen(frozen["shared"], "project")  # another file's sources


def test_own_measurements_need_their_command_and_environment(frozen, tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = frozen["shared"].filter(pl.col("source").str.starts_with("QwenLM/Qwen README.md 'Pro"))
    row = base.head(1).with_columns(
        source=pl.lit("bench/gpu_memory_check.py (torch.cuda.max_memory_allocated)"),
        command=pl.lit("python bench/gpu_memory_check.py --models qwen-7b"),
        environment=pl.lit("python 3.12; torch 2.5.1; CUDA 12.4; GPU NVIDIA H200"),
    )
    check_own_rows(row)
    with pytest.raises(ValueError, match="environment"):
        check_own_rows(row.with_columns(environment=pl.lit("")))
    with pytest.raises(ValueError, match="only bench/gpu_memory_check.py"):
        check_own_rows(base.head(1).with_columns(command=pl.lit("x"), environment=pl.lit("y")))
    path = tmp_path / "own.csv"
    row.write_csv(path)
    cases, skipped = load_cases(path)
    assert [c.file for c in cases] == ["own"] and not skipped
    row.drop("command").write_csv(path)
    with pytest.raises(ValueError, match="command"):
        load_cases(path)


@pytest.fixture(scope="module")
def report():  # type: ignore[no-untyped-def]
    if not DEFAULT_CSV.exists():
        pytest.skip(f"../shared not present: {DEFAULT_CSV}")
    return run([DEFAULT_CSV, PROJECT_CSV])


def test_a_group_is_held_out_whole(report) -> None:  # type: ignore[no-untyped-def]
    cases = report["cases"]
    group = "modelscope/ms-swift + qwenlm/qwen2.5"
    held = [c for c in cases if c.group == group]
    assert {c.document.split(" ")[0] for c in held} == {"QwenLM/Qwen2.5", "modelscope/ms-swift"}
    assert len(held) == 42  # 39 ms-swift + 3 used Qwen2.5 rows
    rest = [c for c in cases if not c.document.startswith(("QwenLM/Qwen2.5", "modelscope/"))]
    assert report["loro_constants"][group] == fit_constants(rest)


def test_plan_margins_are_fitted_without_the_held_out_group(report) -> None:  # type: ignore[no-untyped-def]
    cases, plan = report["cases"], report["plan"]
    group = "lightning-ai/litgpt"
    inner, _ = leave_one_repository_out([c for c in cases if c.group != group])
    by_reg, overall = plan_margins(inner)
    rows = plan.filter(pl.col("group") == group)
    assert rows.height == 20
    for r in rows.iter_rows(named=True):
        want = r["expected_gib"] * (1 + by_reg.get(r["regime"], overall))
        assert r["plan_gib"] == pytest.approx(want, rel=1e-12)
        assert r["plan_below"] == (want < r["measured_gib"])
    # the shipped margins (fitted with every group) differ from the held-out ones somewhere
    assert plan_margins(report["loro"]) != (by_reg, overall)
    assert held_out_plan(cases, report["loro"]).height == report["loro"].height
