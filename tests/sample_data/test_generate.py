"""The synthetic corpus generator and the hand-written sample exports."""

from __future__ import annotations

import csv
import io
import random
import re
import unicodedata
from pathlib import Path

import polars as pl
import pytest

from sample_data import make_samples
from sample_data.generate import (
    FIELDS,
    HEADERS,
    MAX_CHARS,
    MIN_CHARS,
    generate,
    ground_truth,
    write_corpus,
)
from schemas.records import TEXT_FIELDS, WORKORDER_FIELDS

SAMPLES = Path(make_samples.__file__).parent / "workorders"


@pytest.fixture(scope="module")
def corpus() -> tuple[pl.DataFrame, pl.DataFrame]:
    return generate(20_000, seed=7), ground_truth(20_000, seed=7)


def _text(row: dict) -> str:
    return "".join(row[c] or "" for c in TEXT_FIELDS)


def _shingles(text: str, k: int = 5) -> set[str]:
    t = re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).lower())
    return {t[i : i + k] for i in range(max(len(t) - k + 1, 1))}


def _jaccard(a: str, b: str) -> float:
    x, y = _shingles(a), _shingles(b)
    return len(x & y) / len(x | y)


# ---------------------------------------------------------------- generator


def test_columns_follow_the_record_contract(corpus):
    records, _ = corpus
    assert FIELDS == WORKORDER_FIELDS
    assert records.columns == [*WORKORDER_FIELDS, "cluster_id"]
    assert records.schema["cluster_id"] == pl.Int64
    assert all(records.schema[f] == pl.String for f in FIELDS)
    assert records["order_id"].n_unique() == records.height == 20_000
    assert records["symptom"].null_count() == 0


def test_same_seed_same_frame_other_seed_other_frame():
    assert generate(3000, seed=3).equals(generate(3000, seed=3))
    assert not generate(3000, seed=3).equals(generate(3000, seed=4))


def test_text_length_bounds_and_both_languages(corpus):
    records, _ = corpus
    lengths = records.select(
        pl.sum_horizontal([pl.col(c).fill_null("").str.len_chars() for c in TEXT_FIELDS])
    ).to_series()
    assert lengths.min() >= MIN_CHARS
    assert lengths.max() <= MAX_CHARS
    english = records["status"].is_in(["Closed", "Completed", "Monitor", "Waiting parts"])
    assert 0.2 < english.mean() < 0.4
    assert records["symptom"].str.contains("现象：|症状：|故障现象：").any()
    assert records["symptom"].str.contains("Symptom: |Problem: |Complaint: ").any()
    # structured rows, symptom + action rows and free-text rows all occur
    assert records["prevention"].null_count() > 0
    assert records["prevention"].drop_nulls().len() > 0.3 * records.height


def test_cluster_ground_truth_shape(corpus):
    records, truth = corpus
    assert truth["order_id"].equals(records["order_id"])
    assert truth["cluster_id"].equals(records["cluster_id"])
    sizes = records.group_by("cluster_id").len()["len"]
    multi = sizes.filter(sizes > 1)
    assert multi.min() == 2
    assert multi.max() == 6
    share = multi.sum() / records.height
    assert 0.27 <= share <= 0.33
    # every multi-member cluster has exactly one original
    originals = truth.filter(pl.col("edit") == "original").group_by("cluster_id").len()
    assert originals.height == multi.len()
    assert originals["len"].max() == 1
    edits = set(truth["edit"].unique())
    assert {"exact", "meta", "insert", "delete", "punct", "space", "tail", "fullwidth"} <= edits


def test_duplicates_are_near_and_unrelated_records_are_not(corpus):
    records, truth = corpus
    rows = records.with_columns(edit=truth["edit"]).to_dicts()
    original = {r["cluster_id"]: r for r in rows if r["edit"] == "original"}
    copies = [r for r in rows if r["edit"] not in ("original", "singleton") and r["cluster_id"]
              in original]  # fmt: skip
    exact = [r for r in copies if r["edit"] in ("exact", "meta")]
    assert exact and all(_text(r) == _text(original[r["cluster_id"]]) for r in exact)
    meta = [r for r in copies if r["edit"] == "meta"]
    assert all(r["reported_at"] != original[r["cluster_id"]]["reported_at"] for r in meta)
    edited = [r for r in copies if r["edit"] not in ("exact", "meta")]
    assert all(_text(r) != _text(original[r["cluster_id"]]) for r in edited)
    sims = sorted(_jaccard(_text(r), _text(original[r["cluster_id"]])) for r in edited[:400])
    assert sims[len(sims) // 2] > 0.8  # median near duplicate
    rnd = random.Random(0)
    unrelated = [_jaccard(_text(a), _text(b)) for a, b in
                 ((rnd.choice(rows), rnd.choice(rows)) for _ in range(400))
                 if a["cluster_id"] != b["cluster_id"]]  # fmt: skip
    assert max(unrelated) < 0.6


def test_hard_negatives_differ_only_in_code_or_machine(corpus):
    records, truth = corpus
    rows = {r["order_id"]: r for r in records.with_columns(edit=truth["edit"]).to_dicts()}
    negatives = truth.filter(pl.col("negative_of").is_not_null())
    assert negatives.height >= 0.02 * records.height
    code = re.compile(r"[0-9A-Za-z ]")
    seen = set()
    for order_id, of, kind in negatives.select("order_id", "negative_of", "edit").iter_rows():
        neg, orig = rows[order_id], rows[of]
        seen.add(kind)
        assert neg["cluster_id"] != orig["cluster_id"]
        assert orig["edit"] == "singleton"
        if kind == "negative_code":
            assert _text(neg) != _text(orig)
            assert code.sub("", _text(neg)) == code.sub("", _text(orig))
            assert neg["machine_model"] == orig["machine_model"]
        else:
            assert kind == "negative_machine"
            assert neg["machine_model"] != orig["machine_model"]
            assert orig["machine_model"] in _text(orig)
            assert _text(neg) == _text(orig).replace(orig["machine_model"], neg["machine_model"])
    assert seen == {"negative_code", "negative_machine"}


def test_written_csv_shards_are_byte_identical_per_seed(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    write_corpus(3000, a, seed=5, fmt="csv", shards=3)
    write_corpus(3000, b, seed=5, fmt="csv", shards=3)
    write_corpus(3000, c, seed=6, fmt="csv", shards=3)
    names = sorted(p.name for p in a.iterdir())
    assert names == ["clusters.parquet", "part-00000.csv", "part-00001.csv", "part-00002.csv"]
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "part-00000.csv").read_bytes() != (c / "part-00000.csv").read_bytes()


def test_written_parquet_shards_are_byte_identical_per_seed(tmp_path):
    write_corpus(2000, tmp_path / "a", seed=1, fmt="parquet", shards=2)
    write_corpus(2000, tmp_path / "b", seed=1, fmt="parquet", shards=2)
    for name in ("part-00000.parquet", "part-00001.parquet", "clusters.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    parts = pl.concat([pl.read_parquet(tmp_path / "a" / f"part-0000{i}.parquet") for i in (0, 1)])
    assert parts.columns == list(FIELDS)
    assert parts.equals(generate(2000, seed=1).drop("cluster_id"))


def test_csv_shard_encodings_headers_and_truth_positions(tmp_path):
    write_corpus(3000, tmp_path, seed=2, fmt="csv", shards=3)
    gbk, bom, utf8 = (tmp_path / f"part-0000{i}.csv" for i in range(3))
    raw = gbk.read_bytes()
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    assert raw.decode("gbk").startswith(",".join(HEADERS[0]) + "\r\n")
    assert bom.read_bytes().startswith(b"\xef\xbb\xbf" + ",".join(HEADERS[1]).encode())
    assert not utf8.read_bytes().startswith(b"\xef\xbb\xbf")
    assert utf8.read_bytes().decode("utf-8").startswith(",".join(HEADERS[2]) + "\n")
    truth = pl.read_parquet(tmp_path / "clusters.parquet")
    assert truth.columns == [
        "position", "order_id", "cluster_id", "shard", "shard_row", "edit", "negative_of",
    ]  # fmt: skip
    assert truth.height == 3000
    encodings = {"part-00000.csv": "gbk", "part-00001.csv": "utf-8-sig", "part-00002.csv": "utf-8"}
    for shard, encoding in encodings.items():
        text = (tmp_path / shard).read_bytes().decode(encoding)
        ids = [row[0] for row in csv.reader(io.StringIO(text, newline=""))][1:]
        expected = truth.filter(pl.col("shard") == shard).sort("shard_row")["order_id"]
        assert ids == expected.to_list()


def test_cli_writes_the_corpus(tmp_path):
    from sample_data.generate import main

    main(["--rows", "500", "--out", str(tmp_path), "--seed", "9", "--format", "parquet"])
    assert pl.read_parquet(tmp_path / "part-00000.parquet").height == 500
    assert pl.read_parquet(tmp_path / "clusters.parquet")["cluster_id"].equals(
        generate(500, seed=9)["cluster_id"]
    )


# ---------------------------------------------------------------- hand-written samples


def test_sample_files_decode_with_their_intended_encodings():
    zh = (SAMPLES / make_samples.ZH_CSV).read_bytes()
    with pytest.raises(UnicodeDecodeError):
        zh.decode("utf-8")
    assert zh.decode("gbk").startswith("工单号,设备编号,机床型号,报修时间,故障现象")
    en = (SAMPLES / make_samples.EN_CSV).read_bytes()
    assert en.startswith(b"\xef\xbb\xbf")
    assert en.decode("utf-8-sig").startswith("Order No,Asset,Machine Model")
    gb = (SAMPLES / make_samples.GB18030_CSV).read_bytes()
    with pytest.raises(UnicodeDecodeError):
        gb.decode("gbk")
    text = gb.decode("gb18030")
    assert "䶮" in text and "𠀀" in text and "㐀" in text
    sheet = pl.read_excel(SAMPLES / make_samples.XLSX)
    assert sheet.columns[4:8] == ["故障描述", "故障原因", "维修措施", "预防建议"]
    assert sheet.height == len(make_samples.XLSX_ROWS)
    merged = sheet["设备编号"].is_null()
    assert 0.5 < merged.mean() < 0.8  # blanks under merged cells: fill down


def test_sample_files_are_what_make_samples_writes(tmp_path):
    make_samples.write_samples(tmp_path)
    for path in SAMPLES.iterdir():
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name


def test_sample_index_lines_point_at_the_records():
    index = make_samples.sample_index()
    encodings = {
        make_samples.ZH_CSV: "gbk",
        make_samples.EN_CSV: "utf-8-sig",
        make_samples.GB18030_CSV: "gb18030",
    }
    readme = (SAMPLES / "README.md").read_text(encoding="utf-8")
    for name, encoding in encodings.items():
        lines = (SAMPLES / name).read_bytes().decode(encoding).split("\n")
        for order_id, line, tags in (
            index.filter(pl.col("file") == name).select("order_id", "line", "tags").iter_rows()
        ):
            assert lines[line - 1].startswith(order_id + ","), (name, line)
            assert f"| {line} | {order_id} |" in readme
            if "malformed" in tags:
                assert len(next(csv.reader([lines[line - 1].rstrip("\r")]))) != 11
    sheet = pl.read_excel(SAMPLES / make_samples.XLSX)
    xlsx = index.filter(pl.col("file") == make_samples.XLSX)
    for order_id, row in xlsx.select("order_id", "line").iter_rows():
        assert sheet["工单编号"][row - 2] == order_id  # row 1 is the header
    counts = dict(index.group_by("file").len().iter_rows())
    assert counts == {
        make_samples.ZH_CSV: 62,
        make_samples.EN_CSV: 41,
        make_samples.XLSX: 30,
        make_samples.GB18030_CSV: 5,
    }


def test_sample_messiness_is_present():
    index = make_samples.sample_index()
    tags = set(index["tags"].explode())
    assert set(make_samples.TAGS) == tags
    zh = (SAMPLES / make_samples.ZH_CSV).read_bytes().decode("gbk")
    en = (SAMPLES / make_samples.EN_CSV).read_bytes().decode("utf-8-sig")
    for needle in ("ＳＶ０４１１", "ＡＬＭ４１４", "锟斤拷", "鍐峰嵈娉", "同上", "13912345678",
                   "@example.com", make_samples.ID_1, "A06B-6117-H105", "参数1825"):  # fmt: skip
        assert needle in zh, needle
    for needle in ("Ã©", "Â°C", "â€™", "unacceptable", "ＳＶ０４０１"):
        assert needle in en, needle
    pairs = index.filter(pl.col("tags").list.contains("code_differs"))
    assert pairs.height == 3


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 7])
def test_tiny_corpora_have_every_row_and_no_cluster_without_members(rows):
    # a corpus too small for any cluster used to mark row 0 of an empty array as a cluster's first
    frame = generate(rows, seed=rows)
    truth = ground_truth(rows, seed=rows)
    assert frame.height == rows == truth.height
    assert frame["order_id"].n_unique() == rows
