"""Dedup over shards gives exactly what the single-frame stage gives on the same records,
in steps none of which reads the records of every shard."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.dedup.sharded import dedup_shards
from pipeline.execution.runner import InProcess, in_process
from pipeline.execution.stage_files import load_state
from pipeline.funnels import workorders
from schemas.config import PipelineConfig, load_config
from tests.pipeline.dedup.oracle import dedup
from tests.pipeline.execution.support import load_kept, load_rejects
from tests.pipeline.ingest.workorders.support import discover_files, read_workorder_file


def _cleaned(files: list[Path], root: Path, cfg: PipelineConfig) -> pl.DataFrame:
    """Records after the real ingest, normalize and filter stages."""
    ingested = pl.concat(
        [read_workorder_file(p, root, cfg.ingest).result.kept for p in files], how="vertical"
    )
    return workorders.clean(ingested, cfg, workorders.technicians(ingested))["filter"].kept


def _sharded(frame: pl.DataFrame, size: int, index: pl.DataFrame | None, cfg, tmp: Path):
    paths = []
    tmp.mkdir(parents=True, exist_ok=True)
    for i, lo in enumerate(range(0, frame.height, size)):
        path = tmp / f"shard-{i}.parquet"
        frame.slice(lo, size).write_parquet(path)
        paths.append(str(path))
    parts = []  # the published index in three parts, as a refresh carries it
    for j, lo in enumerate(range(0, index.height if index is not None else 0, 97)):
        index.slice(lo, 97).write_parquet(tmp / f"index-{j}.parquet")
        parts.append(str(tmp / f"index-{j}.parquet"))
    work = tmp / "work"
    runner = Recording(work, cfg)
    outputs = dedup_shards(runner, work, paths, parts, cfg, ("test",))
    kept, rejects = load_kept(outputs), load_rejects(outputs)
    return kept, rejects, load_state(outputs, "index"), runner.seen


def _rows(inputs: dict[str, list[str]]) -> dict[str, int]:
    return {name: sum(pl.scan_parquet(p).select(pl.len()).collect().item() for p in paths)
            for name, paths in inputs.items()}  # fmt: skip


class Recording(InProcess):
    """The in-process runner, noting each step, its inputs' row counts and those of each
    group of inputs a step reads one after the other (`groups`)."""

    def __init__(self, work: Path, cfg: PipelineConfig) -> None:
        super().__init__(work, cfg)
        object.__setattr__(self, "seen", [])

    def __call__(self, call):  # type: ignore[override]
        groups = [
            _rows({k: g[k] for k in g if k != "sources"}) for g in call.params.get("groups", [])
        ]
        self.seen.append((call.step, _rows(call.inputs), groups))
        return super().__call__(call)


def _single(frame: pl.DataFrame, index: pl.DataFrame | None, cfg: PipelineConfig):
    result, new_index = dedup(frame, cfg.dedup, index)
    files = result.kept.select("record_id", "source_file")
    return result.kept, result.rejected, new_index.join(files, on="record_id", how="left")


def _assert_same(single, sharded) -> None:
    for one, many in zip(single, sharded[:3], strict=True):
        assert one.columns == many.columns
        assert one.equals(many), (one, many)


@pytest.fixture(scope="module")
def maintie(external: Path, repo: Path) -> tuple[pl.DataFrame, PipelineConfig]:
    """MaintIE's gold work orders: short real texts with many exact and near repeats."""
    cfg = load_config(repo / "sample_data" / "configs" / "uwa_maintie.toml")
    root = external / "uwa-maintie"
    return _cleaned(discover_files(root, cfg.ingest), root, cfg), cfg


def _budget(cfg: PipelineConfig, entries: int, rows: int = 250_000) -> PipelineConfig:
    """`cfg` with at most about `entries` bucket entries per candidate-pair partition, and
    about `rows` imported rows per verify step (`shard_rows`)."""
    update = {"dedup_partition_entries": entries, "shard_rows": rows}
    return cfg.model_copy(update={"execution": cfg.execution.model_copy(update=update)})


@pytest.mark.parametrize(
    ("size", "entries", "rows"), [(37, 1024, 5), (200, 1 << 25, 250_000), (100_000, 4096, 1)]
)
def test_sharded_dedup_equals_single_frame_on_real_work_orders(
    maintie, size, entries, rows, tmp_path
) -> None:
    frame, cfg = maintie
    cfg = _budget(cfg, entries, rows)
    single = _single(frame, None, cfg)
    assert single[1].height > 10  # the corpus really has duplicates
    assert set(single[1]["reason"]) == {"exact_dup", "near_dup"}
    sharded = _sharded(frame, size, None, cfg, tmp_path)
    _assert_same(single, sharded)
    groups = [g for step, _, groups in sharded[3] if step == "dedup.verify" for g in groups]
    # a group imports about `rows` far nodes at most (more only from one source of `size`)
    assert max(g["imported"] for g in groups) <= rows + size
    if rows < size < frame.height:
        assert len(groups) > -(-frame.height // size)  # a shard's pairs in several groups


def test_sharded_dedup_checks_against_a_published_index(maintie, tmp_path) -> None:
    frame, cfg = maintie
    half = frame.height // 2
    first, index = dedup(frame.head(half), cfg.dedup)[0], dedup(frame.head(half), cfg.dedup)[1]
    assert first.kept.height == index.height
    rest = frame.slice(half)
    single = _single(rest, index, cfg)
    assert (single[1]["duplicate_of"].is_in(index["record_id"].implode())).sum() > 0
    _assert_same(single, _sharded(rest, 211, index, cfg, tmp_path))


def test_sharded_dedup_equals_single_frame_on_sample_exports(repo: Path, tmp_path) -> None:
    """Chinese and English exports, each record repeated as a technician re-logs it."""
    cfg = PipelineConfig()
    root = repo / "sample_data" / "workorders"
    frame = _cleaned(discover_files(root, cfg.ingest), root, cfg)
    relogged = frame.with_columns(
        pl.col("record_id") + "-relog",
        pl.col("symptom").str.to_uppercase(),
        pl.col("alarm_codes").list.reverse(),
    )
    both = pl.concat([frame, relogged]).sort("record_id")
    single = _single(both, None, cfg)
    assert single[1].height >= frame.height // 2
    for size in (5, 16):
        _assert_same(single, _sharded(both, size, None, cfg, tmp_path / str(size)))


def test_no_dedup_step_holds_every_record(repo: Path, tmp_path, monkeypatch) -> None:
    """Issue 14's bound: no dedup step reads the records of every shard at once, the bucket
    entries of a run over the partition budget are split among candidate steps, and the
    driver between the steps reads neither a signature nor the candidate pairs (they are
    routed to per-shard verify steps, which return the edges)."""
    cfg = PipelineConfig(execution={"dedup_partition_entries": 1024})
    root = repo / "sample_data" / "workorders"
    frame = _cleaned(discover_files(root, cfg.ingest), root, cfg)
    driver_reads: list[str] = []
    read_parquet = pl.read_parquet

    def reading(source, *args, **kwargs):
        driver_reads.append("/".join(Path(source).parts[-2:]))
        return read_parquet(source, *args, **kwargs)

    class Steps(Recording):  # the steps read as they do; the driver's reads are noted
        def __call__(self, call):  # type: ignore[override]
            monkeypatch.setattr(pl, "read_parquet", read_parquet)
            try:
                return super().__call__(call)
            finally:
                monkeypatch.setattr(pl, "read_parquet", reading)

    paths = []
    for i, lo in enumerate(range(0, frame.height, 8)):
        paths.append(str(tmp_path / f"shard-{i}.parquet"))
        frame.slice(lo, 8).write_parquet(paths[-1])
    work = tmp_path / "work"
    runner = Steps(work, cfg)
    monkeypatch.setattr(pl, "read_parquet", reading)
    dedup_shards(runner, work, paths, [], cfg, ("test",))
    monkeypatch.setattr(pl, "read_parquet", read_parquet)
    seen = runner.seen

    read = [rows for _, rows, groups in seen for rows in (rows, *groups)]
    signatures = {name for rows in read for name in rows if name.endswith("signatures")}
    apart = {"buckets", *signatures}  # bucket entries; signature values, num_perm a node
    records = [n for rows in read for name, n in rows.items() if name not in apart]
    assert len(paths) > 2 and max(records) < frame.height
    own = [rows["signatures"] for _, rows, _ in seen if "signatures" in rows]
    assert max(own) <= 8 * cfg.dedup.num_perm  # one shard's nodes
    steps = {step for step, _, _ in seen}
    assert {"dedup.export", "dedup.verify"} <= steps
    for step, rows, groups in seen:
        if step == "dedup.verify":  # at most the far node of each pair
            assert sum(g["imported"] for g in groups) <= rows["pairs"]
            for g in groups:
                assert g["imported_signatures"] == g["imported"] * cfg.dedup.num_perm
        if step == "dedup.apply":  # a node per key the shard holds but did not introduce
            assert rows["foreign"] <= 8
    entries = [rows["buckets"] for step, rows, _ in seen if step == "dedup.pairs"]
    assert len(entries) > 2 and max(entries) < sum(entries) / 2
    assert "edges/kept.parquet" in driver_reads  # verified edges, not candidate pairs
    assert not [name for name in driver_reads if "signatures" in name or "pairs/" in name]


def test_a_shard_without_records_changes_nothing(maintie, tmp_path) -> None:
    """A header-only export gives an empty shard between others."""
    frame, cfg = maintie
    paths = []
    for i, part in enumerate([frame.head(300), frame.clear(), frame.slice(300)]):
        paths.append(str(tmp_path / f"shard-{i}.parquet"))
        part.write_parquet(paths[-1])
    work = tmp_path / "work"
    outputs = dedup_shards(in_process(work, cfg), work, paths, [], cfg, ("test",))
    sharded = load_kept(outputs), load_rejects(outputs), load_state(outputs, "index")
    _assert_same(_single(frame, None, cfg), sharded)
