import polars as pl
import pytest

from pipeline.stages.normalize import normalize
from pipeline.text.alarm_codes import extract_alarm_codes
from pipeline.text.language import detect_language
from pipeline.text.mojibake import finish_text, fix_mojibake
from pipeline.text.pii import redact_pii
from schemas.normalize import NormalizeConfig
from schemas.records import INGESTED_SCHEMA, NORMALIZED_EXTRA

CFG = NormalizeConfig()


def repair_text(expr: pl.Expr, cfg: NormalizeConfig) -> pl.Expr:
    """Mojibake repair (ftfy where Latin mojibake shows, GBK rule), then `finish_text`: what
    `normalize` does to each field."""
    fixed = fix_mojibake(expr, cfg).struct.field("text")
    return finish_text(pl.coalesce(fixed, expr), cfg).alias(
        expr.meta.output_name(raise_if_undetermined=False) or "text"
    )


def frame(*rows: dict) -> pl.DataFrame:
    full = [
        {
            **{c: None for c in INGESTED_SCHEMA},
            "record_id": f"r{i}",
            "source_kind": "workorder",
            "source_file": "orders.csv",
            "source_row": i + 2,
            **row,
        }
        for i, row in enumerate(rows)
    ]
    return pl.DataFrame(full, schema=INGESTED_SCHEMA)


def repaired(*texts: str | None) -> list[str | None]:
    df = pl.DataFrame({"t": list(texts)}, schema={"t": pl.String})
    return df.select(repair_text(pl.col("t"), CFG)).to_series().to_list()


def codes(text: str, model: str | None = None, cfg: NormalizeConfig = CFG) -> list[str]:
    df = pl.DataFrame({"t": [text], "m": [model]}, schema={"t": pl.String, "m": pl.String})
    out = df.select(extract_alarm_codes(repair_text(pl.col("t"), cfg), pl.col("m"), cfg))
    return out.to_series().to_list()[0]


def gbk_mojibake(text: str) -> str:
    """UTF-8 bytes read as GBK, as a wrongly decoded export shows them."""
    return text.encode("utf-8").decode("gbk", errors="replace")


# --- repair ---------------------------------------------------------------------------------


def test_latin_mojibake_is_repaired_by_ftfy() -> None:
    broken = "Spindle didnâ€™t reach speed; cafÃ© area coolant at 20Â°C"
    assert repaired(broken) == ["Spindle didn’t reach speed; café area coolant at 20°C"]


def test_utf8_chinese_read_as_latin1_is_repaired() -> None:
    broken = "主轴异响".encode().decode("latin-1")
    assert repaired(broken) == ["主轴异响"]


@pytest.mark.parametrize(
    ("original", "expected"),
    [
        ("主轴", "主轴"),  # even byte count: exact
        ("伺服更换", "伺服更换"),
        ("伺服报警", "伺服报"),  # 警's bytes AD A6 are no GBK character: lost as U+FFFD
        ("更换编码器", "更换编码"),  # odd: the last character's bytes are incomplete
        ("冷却泵", "冷却"),
    ],
)
def test_utf8_read_as_gbk_is_repaired_by_rule(original: str, expected: str) -> None:
    broken = gbk_mojibake(original)
    assert broken != original
    assert repaired(f"{broken} SV0401") == [f"{expected} SV0401"]


def test_known_gbk_mojibake_examples() -> None:
    assert repaired("涓昏酱 过热") == ["主轴 过热"]
    assert repaired("鍐峰嵈娉?不出水") == ["冷却不出水"]


def test_gbk_mojibake_with_bytes_lost_mid_text_as_exported() -> None:
    # A GBK export of mojibake: bytes GBK cannot map became "?"; those characters are lost.
    fields = [
        "鍐峰嵈娉典笉鍑烘按锛屽喎鍗存恫绠辨恫浣嶆?ｅ父銆?",
        "鍐峰嵈娉电數鏈虹儳鍧忋??",
        "鏇存崲鍐峰嵈娉电數鏈猴紝璇曟満鍑烘按姝ｅ父銆?",
    ]
    assert repaired(*fields) == [
        "冷却泵不出水，冷却液箱液位常",
        "冷却泵电机烧坏",
        "更换冷却泵电机，试机出水正常",
    ]


def test_gbk_repair_leaves_genuine_chinese_with_rare_characters_alone() -> None:
    # 涓 and 浠 are real characters (GBK rows used by mojibake); here they are no mojibake.
    text = "涓涓细流，浠水县客户，主轴正常"
    assert repaired(text) == [text]


def test_replacement_runs_are_flagged_unrecoverable_not_repaired() -> None:
    result = normalize(frame({"symptom": "锟斤拷锟斤拷 换刀时卡刀"}, {"symptom": "换刀正常"}), CFG)
    kept = result.kept
    assert kept["symptom"].to_list() == ["锟斤拷锟斤拷 换刀时卡刀", "换刀正常"]
    assert kept["repairs"].to_list() == [["unrecoverable"], []]
    assert result.counters["unrecoverable"] == 1


def test_full_width_letters_and_digits_become_ascii_but_chinese_punctuation_stays() -> None:
    assert repaired("Ｘ轴报警ＳＶ０４０１，检查（放大器）：正常！") == [
        "X轴报警SV0401，检查（放大器）：正常！"
    ]


def test_whitespace_collapsed_newlines_kept() -> None:
    text = "  更换\u3000主轴  皮带\t\n\n  试运行\u200b正常  "
    assert repaired(text) == ["更换 主轴 皮带\n试运行正常"]
    flat = NormalizeConfig(keep_newlines=False)
    df = pl.DataFrame({"t": [text]})
    assert df.select(repair_text(pl.col("t"), flat)).item() == "更换 主轴 皮带 试运行正常"


def test_clean_text_is_untouched_and_blank_becomes_null() -> None:
    clean = [
        "主轴过热报警 SP9001，检查冷却风扇；更换X轴编码器电缆后恢复。",
        "SV0401 V READY OFF on X axis; replaced the amplifier fan.",
        "“Tool clamp” switch – checked, 5 °C delta",
    ]
    assert repaired(*clean, "   ", None) == [*clean, None, None]


# --- alarm codes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "model", "expected"),
    [
        ("X轴 SV0401 报警，复位无效", "FANUC 0i-MF", ["FANUC:SV0401"]),
        ("ＳＶ０４０１ 伺服就绪信号关闭", None, ["FANUC:SV0401"]),
        ("SV401 and OT0500 after homing", None, ["FANUC:SV0401", "FANUC:OT0500"]),
        ("程序报警 PS0010，主轴 SP9012 报警", "发那科", ["FANUC:PS0010", "FANUC:SP9012"]),
        ("old control shows P/S 010", None, ["FANUC:PS0010"]),
        ("报警 414，X轴误差过大", "FANUC 0i-TF", ["FANUC:414"]),
        ("ALM 414 on X axis", "FANUC 0i-TF", ["FANUC:414"]),
        ("报警25000、25040，编码器故障", "SINUMERIK 828D", ["SINUMERIK:25000", "SINUMERIK:25040"]),
        ("PLC报警700016 润滑液位低", "西门子 840D sl", ["SINUMERIK:700016"]),
        ("Alarm No. 300500 drive fault", "Siemens SINUMERIK 840D", ["SINUMERIK:300500"]),
        (
            "S01 0052 报警，Z70 绝对位置异常",
            "Mitsubishi M80",
            ["MITSUBISHI:S01-0052", "MITSUBISHI:Z70"],
        ),
        ("三菱系统 报警 M01 0005", None, ["MITSUBISHI:M01-0005"]),
        ("TNC error 8B40-0001 after restart", "Heidenhain TNC 640", ["HEIDENHAIN:8B40-0001"]),
        (
            "主轴升速至8000rpm时TNC 640报错8B40",
            "DMG DMU 50（Heidenhain TNC 640）",
            ["HEIDENHAIN:8B40"],
        ),
        ("error 1234 on probing", "FANUC 0i-MF", ["FANUC:1234"]),
        ("海德汉 error 8040-0001", None, ["HEIDENHAIN:8040-0001"]),
        ("Alarm 108 servo overload", "Haas VF-2", ["HAAS:108"]),
        ("Alarm 2001 after power-up", "Fanuc Robodrill", ["FANUC:2001"]),
        ("alarm 22000 on spindle", "siemens", ["SINUMERIK:22000"]),
        ("Alarm #108, reset twice", "Haas VF-2", ["HAAS:108"]),
        ("报警 2045，设备停机", None, ["ALARM:2045"]),
    ],
)
def test_alarm_codes_per_family(text: str, model: str | None, expected: list[str]) -> None:
    assert codes(text, model) == expected


@pytest.mark.parametrize(
    "text",
    [
        "修改参数1825、1826后正常",
        "参数 No.1815 绝对位置检测设定",
        "set parameter 3003 bit 0",
        "MD32200 POSCTRL_GAIN 调整，$MA_VELO_FFW_WEIGH 检查",
        "宏变量 #2000 清零",
        "报警：参数1825 3000 改回",
        "alarm: No.1815 1",
        "报警时间 2024-03-15 10:30:15",
        "报警日期20240315",
        "更换放大器 料号 A06B-6117-H105",
        "报警 P/N 123456 fan replaced",
        "主轴转速 S3000 时异响，报警 3000rpm 附近",
        "报警联系 13812345678",
        "报警 110101199003071234",
    ],
)
def test_not_alarm_codes(text: str) -> None:
    assert codes(text, "FANUC 0i-MF") == []
    assert codes(text, "SINUMERIK 828D") == []


def test_codes_found_next_to_parameters_dates_and_part_numbers() -> None:
    text = "2024-03-15 报警 SV0436，参数2021调整，更换 A06B-6117-H105，报警 414 消失"
    assert codes(text, "FANUC 0i-MF") == ["FANUC:SV0436", "FANUC:414"]


def test_family_shapes_need_their_context() -> None:
    assert codes("S01 0052 报警", "FANUC 0i-MF") == []
    assert codes("error 8B40-0001", "FANUC 0i-MF") == []
    assert codes("海德汉系统 error 8B40-0001", None) == ["HEIDENHAIN:8B40-0001"]


def test_sinumerik_digits_and_family_from_text() -> None:
    assert codes("西门子828D 报警 25000") == ["SINUMERIK:25000"]
    assert codes("报警 414", "SINUMERIK 828D") == []  # too short for SINUMERIK


def test_runaway_code_lists_are_collapsed() -> None:
    text = " ".join(["SV0401"] * 60) + " " + " ".join(f"PS{i:04d}" for i in range(1, 40))
    found = codes(text, "FANUC 0i-MF", NormalizeConfig(max_alarm_codes=5))
    assert found == ["FANUC:SV0401", "FANUC:PS0001", "FANUC:PS0002", "FANUC:PS0003", "FANUC:PS0004"]


def test_extract_without_hint_and_on_nulls() -> None:
    df = pl.DataFrame({"t": ["ALM 414", None, "主轴正常"]})
    out = df.select(extract_alarm_codes(pl.col("t"), None, CFG)).to_series()
    assert out.dtype == pl.List(pl.String)
    assert out.to_list() == [["ALARM:414"], [], []]


# --- PII ------------------------------------------------------------------------------------


def redact(text: str, names: tuple[str, ...] = ()) -> str:
    return pl.DataFrame({"t": [text]}).select(redact_pii(pl.col("t"), names)).item()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("客户电话13812345678，SV0401", "客户电话[PHONE]，SV0401"),
        ("手机 138-1234-5678 / 139 1234 5678", "手机 [PHONE] / [PHONE]"),
        ("+86 13812345678 或 +8613912345678", "[PHONE] 或 [PHONE]"),
        ("座机0755-12345678，传真021-1234567", "座机[PHONE]，传真[PHONE]"),
        ("call (555) 123-4567 or +1 555 123 4567", "call [PHONE] or [PHONE]"),
        ("mail li.wei@example.com.cn, cc ops@plant.de", "mail [EMAIL], cc [EMAIL]"),
        ("身份证 11010119900307123X 已登记", "身份证 [ID] 已登记"),
        ("联系人：张伟，报修人王建国", "联系人：[NAME]，报修人[NAME]"),
        ("操作员李强反映夜班报警", "操作员[NAME]反映夜班报警"),
        ("张师傅和王工到场，李工程师确认", "[NAME]和[NAME]到场，[NAME]确认"),
        ("供应商赵先生、钱女士已到场", "供应商[NAME]、[NAME]已到场"),
        ("Contact: John Smith for access", "Contact: [NAME] for access"),
        ("Tech: J. Doe; signed by Anna Lee", "Tech: [NAME]; signed by [NAME]"),
    ],
)
def test_pii_kinds_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_redaction_keeps_codes_part_numbers_and_ordinary_words() -> None:
    text = (
        "SV0401 报警，料号 A06B-6117-H105，订货号 6FC5370-8AA30-0AA0，P/N 123456，"
        "2024-03-15 10:30，每周工作 金工车间，Operator panel ok, reported by night shift"
    )
    assert redact(text) == text


def test_normalize_redacts_with_counts_and_names_from_the_technician_column() -> None:
    result = normalize(
        frame(
            {
                "technician": "张伟",
                "symptom": "X轴报警SV0401",
                "remarks": "联系电话13812345678，邮箱 zhang.wei@factory.cn",
            },
            {
                "technician": "李强、陈静",
                "symptom": "冷却泵不出水",
                "remarks": "张伟 已更换滤网，陈静复查",
            },
            {"technician": None, "symptom": "Replaced way-lube filter", "remarks": "no issue"},
        ),
        CFG,
    )
    kept = result.kept
    assert kept["technician"].to_list() == ["[NAME]", "[NAME]", None]
    assert kept["remarks"].to_list() == [
        "联系电话[PHONE]，邮箱 [EMAIL]",
        "[NAME] 已更换滤网，[NAME]复查",
        "no issue",
    ]
    assert kept["pii_redactions"].to_list() == [3, 3, 0]
    assert kept["alarm_codes"].to_list() == [["FANUC:SV0401"], [], []]
    assert result.counters["pii_redacted"] == 2
    assert result.counters["pii_strings_redacted"] == 6
    joined = " ".join(str(v) for row in kept.rows() for v in row)
    for secret in ("13812345678", "zhang.wei", "张伟", "李强", "陈静"):
        assert secret not in joined


def test_phone_and_id_never_become_alarm_codes_in_normalize() -> None:
    result = normalize(
        frame({"symptom": "报警 13812345678", "remarks": "报警 110101199003071234"}), CFG
    )
    assert result.kept["alarm_codes"].to_list() == [[]]
    assert result.kept["pii_redactions"].to_list() == [2]


# --- language and the stage -----------------------------------------------------------------


def test_language() -> None:
    df = pl.DataFrame(
        {
            "t": [
                "主轴过热报警 SP9001，检查冷却风扇",
                "Spindle overheat alarm SP9001, checked the fan",
                "Spindle 主轴 overheat, replaced the cooling fan motor",
                None,
            ]
        }
    )
    assert df.select(detect_language(pl.col("t"))).to_series().to_list() == ["zh", "en", "en", "en"]


def test_stage_keeps_every_row_and_reports_counters() -> None:
    df = frame(
        {"machine_model": "FANUC 0i-MF", "symptom": gbk_mojibake("主轴") + " 报警 SV0401"},
        {"machine_model": "Haas VF-2", "symptom": "Alarm 108, didnâ€™t clear"},
        {"symptom": "锟斤拷 换刀卡刀", "technician": "王五"},
        {"symptom": "主轴正常"},
    )
    result = normalize(df, CFG)
    kept = result.kept
    assert kept.height == 4 and result.rejected.height == 0
    assert kept["symptom"].to_list() == [
        "主轴 报警 SV0401",
        "Alarm 108, didn’t clear",
        "锟斤拷 换刀卡刀",
        "主轴正常",
    ]
    assert kept["repairs"].to_list() == [["gbk_as_utf8"], ["ftfy"], ["unrecoverable"], []]
    assert kept["language"].to_list() == ["zh", "en", "zh", "zh"]
    assert kept["record_id"].to_list() == ["r0", "r1", "r2", "r3"]
    assert result.counters == {
        "read": 4,
        "kept": 4,
        "rejected": 0,
        "repaired_ftfy": 1,
        "repaired_gbk_as_utf8": 1,
        "unrecoverable": 1,
        "pii_redacted": 1,
        "pii_strings_redacted": 1,
        "with_alarm_codes": 2,
    }


def test_added_columns_have_the_contract_dtypes() -> None:
    kept = normalize(frame({"symptom": "主轴正常"}), CFG).kept
    assert list(kept.columns) == [*INGESTED_SCHEMA, *NORMALIZED_EXTRA]
    for name, dtype in {**INGESTED_SCHEMA, **NORMALIZED_EXTRA}.items():
        assert kept.schema[name] == dtype, name


def test_empty_frame_and_missing_columns() -> None:
    result = normalize(frame(), CFG)
    assert result.kept.height == 0 and result.counters["read"] == 0
    assert dict(result.kept.schema) == {**INGESTED_SCHEMA, **NORMALIZED_EXTRA}
    with pytest.raises(ValueError, match="remarks"):
        normalize(frame({"symptom": "x"}).drop("remarks"), CFG)


def gbk_export(text: str) -> str:
    """UTF-8 read as GBK, then written back as GBK: what could not be mapped became "?"."""
    return gbk_mojibake(text).replace("\ufffd", "?")


def test_gbk_repair_that_drops_characters_is_tagged_lossy() -> None:
    df = frame(
        {"cause": gbk_export("润滑泵损坏") + "，油路堵塞"},  # odd byte count: 坏 is cut
        {"cause": gbk_export("伺服报警") + " SV0401"},  # 警's bytes are no GBK character
        {"cause": gbk_export("更换冷却泵电机，试机出水正常。")},  # only the final 。 is lost
        {"cause": gbk_export("主轴") + " 过热"},  # even byte count: nothing lost
    )
    kept = normalize(df, CFG).kept
    assert kept["cause"].to_list() == [
        "润滑泵损，油路堵塞",
        "伺服报 SV0401",
        "更换冷却泵电机，试机出水正常",
        "主轴 过热",
    ]
    assert kept["repairs"].to_list() == [
        ["gbk_as_utf8", "gbk_lossy"],
        ["gbk_as_utf8", "gbk_lossy"],
        ["gbk_as_utf8"],
        ["gbk_as_utf8"],
    ]
