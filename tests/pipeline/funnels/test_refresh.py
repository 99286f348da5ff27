"""The four flows' funnels, run without Prefect on the sample data (pipeline.funnels.refresh)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.stage import Stage, StageInputError
from pipeline.funnels.refresh import Sources, refresh
from pipeline.publish.counts import no_samples_reason
from schemas.config import PipelineConfig

CFG = PipelineConfig()


def sources(sample_data: Path, flow: str) -> Sources:
    folders = {k: sample_data / k for k in ("workorders", "alarm_logs", "manuals")}
    return {
        "refresh-corpus": Sources(sample_data, **folders),
        "clean-workorders": Sources(folders["workorders"], workorders=folders["workorders"]),
        "clean-fault-logs": Sources(folders["alarm_logs"], alarm_logs=folders["alarm_logs"]),
        "clean-manuals": Sources(folders["manuals"], manuals=folders["manuals"]),
    }[flow]


@pytest.mark.parametrize(
    "flow", ["refresh-corpus", "clean-workorders", "clean-fault-logs", "clean-manuals"]
)
def test_funnel_publishes_a_snapshot_whose_counts_add_up(flow, sample_data, tmp_path):
    published = refresh(flow, sources(sample_data, flow), tmp_path, CFG)
    manifest = json.loads((published.path / "manifest.json").read_text())
    counts = manifest["counts"]
    assert counts["read"] == counts["kept"] + counts["rejected"]
    for name, stage in counts["stages"].items():
        assert stage["read"] == stage["kept"] + stage["rejected"], name
    shards = sorted(published.path.glob("sft/tier=*/part-*.parquet"))
    assert sum(pl.read_parquet(p).height for p in shards) == counts["kept"]
    rejects = pl.read_parquet(published.path / "rejects")
    # The headline counts each kind from its unit stage on (work-order rows from ingest,
    # alarm logs from their incidents: lines and events are counted per stage).
    headline = (pl.col("source_kind") == "workorder") | (
        (pl.col("source_kind") == "alarm_log")
        & ~pl.col("stage").str.starts_with("ingest")
        & (pl.col("stage") != "incidents")
    )
    assert rejects.filter(headline).height == counts["rejected"]
    files = {p.relative_to(sample_data).as_posix() for p in sample_data.rglob("*") if p.is_file()}
    for entry in manifest["inputs"]:
        assert any(f.endswith(entry["path"]) for f in files), entry["path"]
    assert (tmp_path / "LATEST").read_text().strip() == published.path.name


def test_manuals_only_publish_pretraining_text_and_say_why_there_are_no_samples(
    sample_data, tmp_path
):
    published = refresh("clean-manuals", sources(sample_data, "clean-manuals"), tmp_path, CFG)
    assert published.manifest.counts.kept == 0
    assert pl.read_parquet(published.path / "pretrain").height > 0
    assert pl.read_parquet(published.path / "fault_codes").height > 0
    assert "no work orders or alarm logs" in no_samples_reason(published.manifest)


def test_alarm_logs_without_a_fault_code_table_publish_and_name_the_reason(sample_data, tmp_path):
    published = refresh("clean-fault-logs", sources(sample_data, "clean-fault-logs"), tmp_path, CFG)
    counts = published.manifest.counts
    assert counts.kept == 0 and counts.stages["alarm_log/incidents"].kept > 0
    assert "no_fault_code_entry" in no_samples_reason(published.manifest)


def test_alarm_logs_with_manuals_outside_the_input_root(sample_data, tmp_path):
    """clean-fault-logs --manuals: manuals in another folder explain the incidents."""
    logs = sample_data / "alarm_logs"
    run = Sources(logs, alarm_logs=logs, manuals=sample_data / "manuals")
    published = refresh("clean-fault-logs", run, tmp_path, CFG)
    assert published.manifest.counts.kept > 0
    paths = {i.path for i in published.manifest.inputs}
    assert any(p.startswith("manuals/") for p in paths), paths


def test_refresh_corpus_equals_its_parts(sample_data, tmp_path):
    """The whole-corpus funnel keeps every work order the work-order funnel keeps."""
    whole = refresh("r", sources(sample_data, "refresh-corpus"), tmp_path / "all", CFG)
    orders = refresh("w", sources(sample_data, "clean-workorders"), tmp_path / "wo", CFG)
    kinds = whole.manifest.counts.stages
    assert kinds["workorder/tiers"] == orders.manifest.counts.stages["workorder/tiers"]


def test_a_stage_names_the_column_it_misses():
    stage = Stage("tiers", needs=("symptom", "action"), adds=("tier",), fn=lambda df, cfg: None)
    with pytest.raises(StageInputError, match="stage tiers: input lacks column\\(s\\) action"):
        stage.run(pl.DataFrame({"symptom": ["x"]}), CFG)


def test_customer_column_values_are_redacted_and_never_published(tmp_path):
    """A customer column is not a record field: its names become [CUSTOMER] in the text."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "工单.csv").write_text(
        "工单号,设备编号,客户名称,故障现象,处理措施\n"
        "WO-1,VMC-3,宁波精工机械有限公司,宁波精工机械有限公司反映主轴异响，报警SP9031,"
        "更换主轴轴承并重新预紧，试运行2小时正常\n"
        "WO-2,VMC-4,Acme Tooling GmbH,Acme Tooling GmbH reports X axis servo alarm SV0411,"
        "Replaced the X axis servo amplifier and checked the cable shield\n",
        encoding="utf-8",
    )
    published = refresh("w", Sources(folder, workorders=folder), tmp_path / "out", CFG)
    texts = []
    for table in ("sft", "rejects"):
        for shard in published.path.glob(f"{table}/**/*.parquet"):
            texts += [str(row) for row in pl.read_parquet(shard).iter_rows()]
    joined = "\n".join(texts)
    assert "宁波精工" not in joined and "Acme Tooling" not in joined
    assert "[CUSTOMER]" in joined
    sft = pl.read_parquet(next(published.path.glob("sft/**/*.parquet")))
    assert not [c for c in sft.columns if "customer" in c]


def test_a_refresh_carries_files_in_row_ranges_as_published(sample_data, tmp_path):
    """Carried samples, rejects and dedup index rows are read back a range of `shard_rows`
    source rows at a time; the second snapshot holds exactly the rows the first published
    for the unchanged files, in the same order."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name in ("service_orders_en.csv", "维修工单_2024.csv"):
        (inputs / name).write_bytes((sample_data / "workorders" / name).read_bytes())
    cfg = PipelineConfig(execution={"shard_rows": 4})
    out = tmp_path / "out"
    first = refresh("clean-workorders", Sources(inputs, workorders=inputs), out, cfg).path
    extra = sample_data / "workorders" / "gb18030_extra.csv"
    (inputs / extra.name).write_bytes(extra.read_bytes())
    second = refresh("clean-workorders", Sources(inputs, workorders=inputs), out, cfg).path

    def rows(snapshot: Path, table: str, order: list[str]) -> pl.DataFrame:
        frame = pl.read_parquet(snapshot / table, hive_partitioning=False)
        return frame.filter(pl.col("source_file") != extra.name).sort(order, maintain_order=True)

    sft_order = ["source_kind", "source_file", "source_row"]
    carried = rows(second, "sft", sft_order)
    assert carried.height > 8  # more than two ranges of 4 rows
    assert carried.equals(rows(first, "sft", sft_order))
    reject_order = [*sft_order, "stage", "record_id"]
    assert rows(second, "rejects", reject_order).equals(rows(first, "rejects", reject_order))
    index = pl.read_parquet(out / "state" / second.name / "dedup_index.parquet")
    assert set(carried["record_id"]) <= set(index["record_id"])
    assert index["record_id"].is_unique().all()


NOT_MANUALS = {
    # name: (text, reason code); two by their usual names, two named like manuals
    "CHANGELOG.md": (
        "# Changelog\n\n## [1.2.0] - 2024-03-01\n### Added\n- SHDR output for 840D sl alarms.\n"
        "### Fixed\n- Alarm text cut at 32 bytes.\n\n## [1.1.3] - 2023-11-20\n### Fixed\n"
        "- Crash on an empty alarm history.\n",
        "changelog",
    ),
    "LICENSE": (
        "MIT License\n\nCopyright (c) 2024 Example Automation GmbH\n\nPermission is hereby "
        "granted, free of charge, to any person obtaining a copy of this software.\n\nTHE SOFTWARE"
        ' IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.\n',
        "licence",
    ),
    "K1000TiC_软件说明.txt": (
        "KND K1000TiC 系统软件版本说明\n\nV3.2.5 (2024-05-10)\n"
        "1. 新增：G71 复合循环支持 II 型轮廓。\n2. 修复：主轴倍率在 MDI 方式下不生效。\n\n"
        "V3.2.4 (2023-12-01)\n1. 修复：ALM 0414 上电误报。\n",
        "changelog",
    ),
    "VMC850_manual_terms.txt": (
        "Copyright (c) 2023, Example Robotics Ltd.\nAll rights reserved.\n\nRedistribution and "
        "use in source and binary forms, with or without modification, are permitted provided "
        "that the conditions are met.\n\nTHIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND "
        'CONTRIBUTORS "AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES ARE DISCLAIMED.\n',
        "licence",
    ),
}


def test_changelogs_and_licences_beside_manuals_are_skipped_not_pretrained(sample_data, tmp_path):
    manuals = tmp_path / "manuals"
    shutil.copytree(sample_data / "manuals", manuals)
    for name, (text, _) in NOT_MANUALS.items():
        (manuals / name).write_text(text, encoding="utf-8")
    published = refresh("m", Sources(manuals, manuals=manuals), tmp_path / "out", CFG)
    skipped = {s.path: s.reason for s in published.manifest.skipped}
    assert {name: skipped.get(name, "").split(":")[0] for name in NOT_MANUALS} == {
        name: reason for name, (_, reason) in NOT_MANUALS.items()
    }
    pretrain = pl.read_parquet(published.path / "pretrain")
    assert pretrain.height > 0
    assert set(pretrain["source_file"]) == {p.name for p in (sample_data / "manuals").iterdir()}
    text = "\n".join(pretrain["text"])
    assert not any(marker in text for marker in ("Changelog", "K1000TiC", "AS IS", "MIT"))


def test_a_state_written_before_a_block_column_existed_reads_its_manuals_again(
    sample_data, tmp_path
):
    """A snapshot whose manual blocks lack a column of today's block schema (row_lines, say):
    the next refresh reads its unchanged manuals again rather than carry the old blocks, and
    the knowledge base has each table row's own line."""
    run = Sources(sample_data / "manuals", manuals=sample_data / "manuals")
    out = tmp_path / "out"
    first = refresh("clean-manuals", run, out, CFG).path
    state = out / "state" / first.name / "manual_blocks.parquet"
    pl.read_parquet(state).drop("row_lines").write_parquet(state)
    second = refresh("clean-manuals", run, out, CFG).path
    blocks = pl.read_parquet(out / "state" / second.name / "manual_blocks.parquet")
    tables = blocks.filter(pl.col("kind") == "table")
    assert tables.height and tables["row_lines"].null_count() == 0
    kb = pl.read_parquet(second / "fault_codes")
    assert kb.sort("code").equals(pl.read_parquet(first / "fault_codes").sort("code"))
    sinumerik = kb.filter(pl.col("source_file").str.starts_with("sinumerik"))
    assert sinumerik["source_row"].n_unique() == sinumerik.height
