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
    utf16_without_bom,
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


# A GSK 980TDi troubleshooting guide as Windows Notepad saves "Unicode": UTF-16 LE with a BOM.
GSK_GUIDE = (
    "GSK 980TDi 车床数控系统 故障排除指南\r\n"
    "报警号：0301\r\n报警内容：X轴正向硬限位超程\r\n"
    "原因：1. X轴行程开关动作；2. 限位开关信号线断开（X0.0 = 0）。\r\n"
    "处理方法：按住超程解除键，手动反向移出限位；检查行程开关及 DC24V 电源。\r\n"
    "报警号：0414\r\n报警内容：Z轴伺服驱动器报警\r\n"
    "原因：驱动器过流或编码器反馈异常。\r\n处理方法：查看驱动器数码管报警号，按驱动器手册处理。\r\n"
)
# An HNC-818 guide exported by a Java tool: UTF-16 BE without a BOM.
HNC_GUIDE = (
    "华中数控 HNC-818B 常见故障\n"
    "故障现象：主轴不能启动，报警 SP 080 主轴驱动未就绪。\n"
    "可能原因：主轴使能信号 Y1.2 未输出；变频器故障（E.OC3 过流）。\n"
    "处理方法：检查 PLC 梯形图 Y1.2 输出及继电器 KA3，复位变频器。\n"
)
# A DMU 50 maintenance grid written in German and French in Excel, saved as "CSV (Windows)".
GRID = (
    "Intervall / Intervalle;Baugruppe / Sous-ensemble;Tätigkeit;Opération\r\n"
    "täglich / quotidien;Kühlschmierstoff;Füllstand prüfen, Konzentration 6–8 %;"
    "Vérifier le niveau, concentration 6–8 %\r\n"
    "wöchentlich / hebdomadaire;Späneförderer;Späne entfernen, Filter reinigen;"
    "Éliminer les copeaux, nettoyer le filtre\r\n"
    "monatlich / mensuel;Hydraulikaggregat;Öldruck 45 bar ± 2 prüfen;"
    "Contrôler la pression d’huile 45 bar ± 2\r\n"
    "jährlich / annuel;Spindel;Lagervorspannung messen, „Spindeltest“ ausführen;"
    "Mesurer la précharge des roulements à billes\r\n"
)
# A Czech and Polish maintenance note from a TOS Varnsdorf boring mill, cp1250 (Windows).
CZECH = (
    "Údržba vřetena – TOS Varnsdorf WHN 13 CNC\r\n"
    "Denně: kontrola tlaku oleje v mazacím okruhu, doplnění chladicí kapaliny.\r\n"
    "Týdně: čištění filtru, kontrola těsnosti hydraulického agregátu.\r\n"
    "Měsíčně: výměna vložky filtru, kontrola vůle kuličkového šroubu osy X.\r\n"
    "Konserwacja wrzeciona: sprawdzić łożyska, wymienić uszczelkę, oczyścić zbiornik.\r\n"
)
# A SINUMERIK 840D sl alarm log exported on a German HMI in ISO-8859-1 (no byte 0x80-0x9f).
SINUMERIK_LOG = (
    "Nr.      Kommen                    Gehen                     Quittieren"
    "                Text\n"
    "25050    16.08.2024 07:58:03.412   16.08.2024 08:05:10.001   16.08.2024 08:04:59.870"
    "   Achse X1 Konturüberwachung\n"
    "22050    16.08.2024 09:00:00.000   16.08.2024 09:01:30.000   16.08.2024 09:02:00.000"
    "   Überwachung Spindeldrehzahl überschritten\n"
    "700016   16.08.2024 10:12:44.100   16.08.2024 10:15:00.000   16.08.2024 10:15:02.000"
    "   Stößel Klemmung öffnen\n"
)
# A KND work-order export from a Chinese ERP: GBK, English codes among short Chinese words.
KND_ORDERS = (
    "工单号,设备,报警号,故障现象,处理\r\n"
    "WO-0811,K1000TiC,ALM401,X轴伺服准备未完成,检查MCC及急停回路\r\n"
    "WO-0812,K1000TiC,ALM410,Z轴停止时误差过大,调整PRM1829后试车\r\n"
    "WO-0813,K2000MC,SP9011,主轴过热,更换主轴电机风扇\r\n"
)

EN_WITH_AXES = "SV0401 X轴 servo alarm, MCC off\nSV0436 Z轴 overload, Y轴 reset\n" * 3


@pytest.mark.parametrize(
    ("data", "text", "expected"),
    [
        (codecs.BOM_UTF16_LE + GSK_GUIDE.encode("utf-16-le"), GSK_GUIDE, "utf-16"),
        (HNC_GUIDE.encode("utf-16-be"), HNC_GUIDE, "utf-16-be"),
        (GSK_GUIDE.encode("utf-16-le"), GSK_GUIDE, "utf-16-le"),
        (GRID.encode("cp1252"), GRID, "cp1252"),
        (CZECH.encode("cp1250"), CZECH, "cp1250"),
        # Latin-1 bytes read the same in cp1252, the Windows superset of Latin-1
        (SINUMERIK_LOG.encode("latin-1"), SINUMERIK_LOG, "cp1252"),
        (
            "Preis Filterpatrone: 12,50 ¤\n".replace("¤", "€").encode("iso-8859-15"),
            "Preis Filterpatrone: 12,50 €\n",
            "iso-8859-15",
        ),  # fmt: skip
        (KND_ORDERS.encode("gbk"), KND_ORDERS, "gbk"),
        # English with one-character Chinese words: `轴` is D6 E1, `Öá` in cp1252
        (EN_WITH_AXES.encode("gbk"), EN_WITH_AXES, "gbk"),
    ],
)
def test_encoding_decided_by_the_characters_it_gives(
    tmp_path, data: bytes, text: str, expected: str
) -> None:
    assert detect_encoding(data) == expected
    path = tmp_path / "doc.txt"
    path.write_bytes(data)
    assert read_text(path) == (data.decode(expected), expected)
    assert data.decode(expected).removeprefix("\ufeff") == text
    assert scan_encoding(path) == (expected, False)
    assert "".join(text_lines(path, expected)).removeprefix("\ufeff") == text


def test_latin1_german_alarm_log_decodes_as_gbk_but_is_not_read_so() -> None:
    data = SINUMERIK_LOG.encode("latin-1")
    assert "Kontur黚erwachung" in data.decode("gbk")  # what the log used to become
    text, encoding, bad = decode(data, "Alarmprotokoll.txt")
    assert "Überwachung Spindeldrehzahl" in text and "Stößel" in text and not bad


def test_a_configured_encoding_always_wins(tmp_path) -> None:
    path = tmp_path / "wartung.txt"
    path.write_bytes(CZECH.encode("cp1250"))
    assert read_text(path, "latin-1")[1] == "latin-1"  # taken as it is, even when wrong
    assert scan_encoding(path, "cp1252") == ("cp1252", False)
    path.write_bytes(HNC_GUIDE.encode("utf-16-be"))
    assert read_text(path, "utf-16-be") == (HNC_GUIDE, "utf-16-be")
    with pytest.raises(EncodingError, match="not valid utf-16-le"):
        read_text(path, "utf-16-le")


def test_binary_with_nul_bytes_is_not_taken_for_utf16() -> None:
    rng = random.Random(3)
    # ASCII-range bytes with NUL high bytes, but mostly control characters: not text
    data = b"".join(bytes((rng.randrange(32), 0)) for _ in range(2000))
    assert utf16_without_bom(data) is None
    with pytest.raises(EncodingError, match=r"frame\.bin:1: NUL byte"):
        decode(data, "frame.bin")
    assert utf16_without_bom(HNC_GUIDE.encode("utf-16-be")) == "utf-16-be"
