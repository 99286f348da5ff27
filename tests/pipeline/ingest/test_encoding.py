import codecs
import random

import pytest

from pipeline.ingest.encoding import (
    EncodingError,
    decode,
    detect_encoding,
    read_text,
    scan_encoding,
    text_lines,
)

ZH = "主轴过热报警 SP9001，检查冷却风扇；更换X轴编码器电缆后恢复。"
EN = "SV0401 V READY OFF on X axis; replaced the amplifier fan."


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "utf-8"),
        (EN.encode("ascii"), "utf-8"),
        (ZH.encode("utf-8"), "utf-8"),
        (codecs.BOM_UTF8 + ZH.encode("utf-8"), "utf-8-sig"),
        (ZH.encode("utf-16"), "utf-16"),
        (ZH.encode("gbk"), "gbk"),
        # € and ‰ exist in GB18030 but not in GBK
        ((ZH + " 单价 €12 损耗 3‰").encode("gb18030"), "gb18030"),
    ],
)
def test_detects_common_encodings(data: bytes, expected: str) -> None:
    assert detect_encoding(data) == expected
    assert data.decode(expected) in ("", EN, ZH, ZH + " 单价 €12 损耗 3‰")


def test_gbk_text_is_not_mistaken_for_utf8() -> None:
    data = "报警号,报警信息\nSV0401,伺服V就绪信号关闭\n".encode("gbk")
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    assert detect_encoding(data) == "gbk"


def test_undecodable_bytes_name_the_file(tmp_path) -> None:
    rng = random.Random(7)
    noise = bytes(rng.randrange(256) for _ in range(4000))
    with pytest.raises(EncodingError, match=r"VMC-03_alarm\.bin: cannot decode"):
        detect_encoding(noise, "VMC-03_alarm.bin")
    path = tmp_path / "VMC-03_alarm.bin"
    path.write_bytes(noise)
    with pytest.raises(EncodingError, match="VMC-03_alarm.bin"):
        read_text(path)


def test_read_text_detects_and_honours_configured_encoding(tmp_path) -> None:
    path = tmp_path / "history.txt"
    path.write_bytes(ZH.encode("gbk"))
    assert read_text(path) == (ZH, "gbk")
    assert read_text(path, "gb18030") == (ZH, "gb18030")
    with pytest.raises(EncodingError, match=r"history\.txt: byte 0 is not valid utf-8"):
        read_text(path, "utf-8")
    with pytest.raises(EncodingError, match="unknown encoding 'klingon'"):
        read_text(path, "klingon")


@pytest.mark.parametrize(
    ("data", "expected", "some_lines_bad"),
    [
        (EN.encode("ascii"), "utf-8", False),
        (codecs.BOM_UTF8 + ZH.encode("utf-8"), "utf-8-sig", False),
        (ZH.encode("utf-16"), "utf-16", False),
        (("报警号,报警信息\n" * 3000 + "SV0401,伺服V就绪信号关闭\n").encode("gbk"), "gbk", False),
        # a GBK line pasted into a UTF-8 export, past the first block read
        ((ZH + "\n").encode() * 40000 + "X轴过载\n".encode("gbk"), "utf-8", True),
    ],
)
def test_scan_encoding_agrees_with_decode_without_holding_the_file(
    tmp_path, data: bytes, expected: str, some_lines_bad: bool
) -> None:
    path = tmp_path / "export.csv"
    path.write_bytes(data)
    text, encoding, bad = decode(data, path)
    assert (encoding, bool(bad)) == (expected, some_lines_bad)
    assert scan_encoding(path) == (expected, some_lines_bad)
    assert "".join(text_lines(path, expected, some_lines_bad)) == text


def test_text_lines_name_the_line_of_a_bad_byte(tmp_path) -> None:
    path = tmp_path / "history.csv"
    path.write_bytes((ZH + "\n").encode() * 3 + "X轴过载\n".encode("gbk"))
    with pytest.raises(EncodingError, match=r"history\.csv:4: not valid utf-8"):
        list(text_lines(path, "utf-8"))
    path.write_bytes(b"SV0401\nSV\x000401\n")
    with pytest.raises(EncodingError, match=r"history\.csv:2: NUL byte"):
        list(text_lines(path, "utf-8"))
    with pytest.raises(EncodingError, match="unknown encoding 'klingon'"):
        scan_encoding(path, "klingon")
