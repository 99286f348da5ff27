"""Manuals and vendor code tables the real way: file → sniff (kind and layout) → reader
(`read_manual` + `fault_entries`, or the vendor table reader) → knowledge-base entries.

The fixtures (tests/fixtures/documents/) are written from the layouts the vendors document,
not from our sample data: a FANUC maintenance manual's alarm list as a Markdown pipe table, the
Heidenhain TNC error list (error number, Cause of error, Error correction), a Haas alarm list
as an HTML table, a MAZATROL alarm page as an HTML <dl>, a SINUMERIK diagnostics manual
(alarm heading, then Explanation / Reaction / Remedy sections), a Mitsubishi M80 alarm list as
an aligned-column text grid, a GSK 980TDi labelled alarm guide in Chinese saved as UTF-16, a
KND code table (CSV) and a SINAMICS fault list (XLSX) with a key line above the header, and a
HNC servo drive's nested bilingual JSON alarm table. The PDFs (an Okuma alarm table spanning
two pages, a FANUC servo alarm list printed in two columns) and the XLSX are built here with
fpdf2 and xlsxwriter from the rows below. The PDF text is Latin: no CJK font is installed.

`EXPECTED` holds the codes counted by hand in each fixture.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
import xlsxwriter
from fpdf import FPDF

from pipeline.funnels.refresh import Sources, refresh
from pipeline.ingest.documents.manuals import read_manual
from pipeline.ingest.sniff import sniff
from pipeline.kb.extract import fault_entries
from pipeline.kb.vendor_tables import read_fault_table
from schemas.config import PipelineConfig
from schemas.manuals import FAULT_CODE_SCHEMA, ManualsConfig, ManualSource

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "documents"

OKUMA_HEADER = ("Alarm No.", "Alarm message", "Cause", "Remedy")
OKUMA_ROWS = [
    ("1204", "SERVO AMP OVERCURRENT",
     "The current of the servo amplifier exceeded the limit. The motor power line may be "
     "short-circuited or the insulation of the motor may be damaged.",
     "Check the insulation resistance of the motor and the power cable. Replace the amplifier "
     "if the alarm occurs again after the check."),
    ("1206", "SERVO AMP OVERVOLTAGE",
     "The DC link voltage rose above the limit during deceleration of a heavy load.",
     "Check the regenerative resistor and its wiring. Make the deceleration time constant "
     "longer."),
    ("1212", "ENCODER COMMUNICATION ERROR",
     "Communication with the absolute encoder failed. The encoder cable may be broken or "
     "affected by noise.",
     "Check the encoder cable, its connectors and the shield connection at both ends."),
    ("1416", "SPINDLE DRIVE OVERHEAT",
     "The heat sink temperature of the spindle drive unit rose above the limit.",
     "Check the cooling fan of the drive unit and clean the filter of the control cabinet."),
    ("1432", "SPINDLE SPEED DEVIATION",
     "The actual spindle speed differs from the commanded speed for longer than the set time.",
     "Check the spindle belt tension and the cutting load. Check the speed feedback cable."),
    ("2001", "HYDRAULIC PRESSURE LOW",
     "The hydraulic pressure switch turned off while the machine was running.",
     "Check the oil level of the hydraulic unit and the setting of the pressure switch."),
    ("2003", "LUBRICATION OIL LEVEL LOW",
     "The float switch of the lubrication tank detected a low oil level.",
     "Fill the lubrication tank with the specified oil up to the upper mark."),
    ("2010", "CHUCK CLAMP CONFIRMATION ERROR",
     "The chuck clamp confirmation switch did not turn on within the set time.",
     "Check the chuck clamp pressure and the position of the confirmation switch."),
    ("2304", "TURRET INDEX TIMEOUT",
     "Turret indexing did not finish within the set time. The turret clamp may be faulty.",
     "Check the turret clamp switch and the hydraulic pressure of the turret unit."),
    ("2311", "TAILSTOCK OVERTRAVEL",
     "The tailstock moved beyond its stroke end limit switch.",
     "Move the tailstock back into its stroke manually and check the limit switch dog."),
    ("3213", "ATC ARM POSITION ERROR",
     "The ATC arm stopped between its positions. The arm motor or the cam switch may be faulty.",
     "Return the arm to its origin in manual mode and check the cam switch signals."),
    ("3220", "MAGAZINE POT UP/DOWN ERROR",
     "The pot of the tool magazine did not reach its up or down position in time.",
     "Check the air pressure and the pot position sensors of the magazine."),
    ("4102", "COOLANT PUMP OVERLOAD",
     "The thermal relay of the coolant pump motor tripped.",
     "Reset the thermal relay and check the coolant pump for chips in the impeller."),
    ("4110", "CHIP CONVEYOR OVERLOAD",
     "The thermal relay of the chip conveyor motor tripped because of jammed chips.",
     "Remove the jammed chips from the conveyor and reset the thermal relay."),
    ("5025", "DOOR INTERLOCK OPEN",
     "The front door was opened while the spindle or an axis was moving.",
     "Close the door and check the door interlock switch and its wiring."),
    ("5030", "EMERGENCY STOP CIRCUIT ERROR",
     "The two channels of the emergency stop circuit did not switch together.",
     "Check the emergency stop button contacts and the safety relay module."),
]  # fmt: skip

FANUC_COLUMNS = (
    [
        "SV0401 V READY OFF",
        "Cause: The ready signal VRDY of the servo",
        "amplifier did not turn on.",
        "Remedy: Check the emergency stop circuit and",
        "the MCC of the power supply.",
    ],
    [
        "SV0410 EXCESS ERROR (STOP)",
        "Cause: The position error at standstill",
        "exceeded the value in parameter 1829.",
        "Remedy: Check the machine load and the",
        "servo motor brake.",
    ],
    [
        "SV0411 EXCESS ERROR (MOVING)",
        "Cause: The position error during movement",
        "exceeded the value in parameter 1828.",
        "Remedy: Check the position gain and the",
        "feed rate.",
    ],
    [
        "SV0417 ILL DGTL SERVO PARAMETER",
        "Cause: A digital servo parameter is set to",
        "an invalid value.",
        "Remedy: Correct the servo parameters and",
        "turn the power off and on.",
    ],
)

SINAMICS_ROWS = [
    ("F07800", "Drive: No power unit present", "OFF2",
     "The power unit parameters cannot be read or no parameters are stored in the power unit.",
     "Check the DRIVE-CLiQ wiring of the power unit. Replace the power unit."),
    ("F07801", "Drive: Motor overcurrent", "OFF2",
     "The permissible motor limit current was exceeded.",
     "Check the current limits (p0640) and the motor data. Increase the ramp-up time."),
    ("F07802", "Drive: Infeed or power unit not ready", "OFF2",
     "The infeed did not signal that it is ready within the monitoring time.",
     "Check the line voltage and the enable signals of the infeed."),
    ("A07850", "External alarm 1", "NONE",
     "The signal for external alarm 1 was triggered by the machine control.",
     "Remove the cause of the external alarm."),
    ("F30001", "Power unit: Overcurrent", "OFF2",
     "The power unit has detected an overcurrent condition.",
     "Check the motor cable for a short circuit or a ground fault."),
    ("F30005", "Power unit: Overload I2t", "OFF2",
     "The power unit was overloaded: the I2t value exceeded 100 %.",
     "Reduce the continuous load and check the duty cycle."),
]  # fmt: skip

EXPECTED: dict[str, tuple[str, str, list[str]]] = {
    "okuma_osp_alarm_list.pdf": (
        "manual", "pdf",
        ["OKUMA:1204", "OKUMA:1206", "OKUMA:1212", "OKUMA:1416", "OKUMA:1432", "OKUMA:2001",
         "OKUMA:2003", "OKUMA:2010", "OKUMA:2304", "OKUMA:2311", "OKUMA:3213", "OKUMA:3220",
         "OKUMA:4102", "OKUMA:4110", "OKUMA:5025", "OKUMA:5030"],
    ),
    "fanuc_servo_alarms_two_column.pdf": (
        "manual", "pdf", ["FANUC:SV0401", "FANUC:SV0410", "FANUC:SV0411", "FANUC:SV0417"],
    ),
    "fanuc_0if_spindle_alarms.md": (
        "manual", "markdown",
        ["FANUC:SP9001", "FANUC:SP9002", "FANUC:SP9003", "FANUC:SP9007", "FANUC:SP9009",
         "FANUC:SP9012", "FANUC:OH0700", "FANUC:OH0701"],
    ),
    "heidenhain_tnc640_errors.md": (
        "manual", "markdown",
        ["HEIDENHAIN:8B40-0001", "HEIDENHAIN:C3A0-0010", "HEIDENHAIN:1040-0004",
         "HEIDENHAIN:2230-0012"],
    ),
    "haas_mill_alarm_list.html": (
        "manual", "html",
        ["HAAS:102", "HAAS:103", "HAAS:108", "HAAS:135", "HAAS:160", "HAAS:9101"],
    ),
    "mazak_alarm_glossary.html": (
        "manual", "html", ["MAZAK:214", "MAZAK:215", "MAZAK:226", "MAZAK:301", "MAZAK:318"],
    ),
    "sinumerik_840d_diagnostics.html": (
        "manual", "html",
        ["SINUMERIK:21612", "SINUMERIK:25000", "SINUMERIK:25040", "SINUMERIK:25050"],
    ),
    "m80_alarm_list.txt": (
        "manual", "text",
        ["MITSUBISHI:S01-0031", "MITSUBISHI:S01-0032", "MITSUBISHI:S02-2219",
         "MITSUBISHI:S03-0052", "MITSUBISHI:S01-0050", "MITSUBISHI:M01-0004"],
    ),
    "gsk_980tdi_alarm_guide.txt": (
        "manual", "text", ["GSK:0401", "GSK:0405", "GSK:0414", "GSK:1003", "GSK:1011"],
    ),
    "knd_k1000_alarm_codes.csv": (
        "fault_table", "csv",
        ["KND:0010", "KND:0011", "KND:0029", "KND:0401", "KND:0411", "KND:2001"],
    ),
    "sinamics_s120_faults.xlsx": (
        "fault_table", "xlsx",
        ["SINAMICS:F07800", "SINAMICS:F07801", "SINAMICS:F07802", "SINAMICS:A07850",
         "SINAMICS:F30001", "SINAMICS:F30005"],
    ),
    "hsv_180u_alarms.json": (
        "fault_table", "json", ["HNC:ER.01", "HNC:ER.02", "HNC:ER.07", "HNC:ER.12"],
    ),
}  # fmt: skip
LANGUAGES = {"hsv_180u_alarms.json": ["en", "zh"]}
# The layout each fixture stands for, as the vendors document it.
LAYOUTS = {
    "okuma_osp_alarm_list.pdf": "PDF alarm table spanning two pages",
    "fanuc_servo_alarms_two_column.pdf": "two-column PDF",
    "fanuc_0if_spindle_alarms.md": "Markdown pipe table",
    "heidenhain_tnc640_errors.md": "Markdown labelled items under code headings",
    "haas_mill_alarm_list.html": "HTML table",
    "mazak_alarm_glossary.html": "HTML <dl>",
    "sinumerik_840d_diagnostics.html": "HTML alarm reference with field sub-headings",
    "m80_alarm_list.txt": "aligned-column text grid",
    "gsk_980tdi_alarm_guide.txt": "Chinese labelled guide in UTF-16",
    "knd_k1000_alarm_codes.csv": "CSV code table with a key line",
    "sinamics_s120_faults.xlsx": "XLSX code table with a key line",
    "hsv_180u_alarms.json": "nested bilingual JSON",
}


def _okuma_pdf(path: Path) -> None:
    """An Okuma-style alarm table (ruled, header repeated) that runs over two pages."""
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", style="B", size=13)
    pdf.cell(0, 8, "OSP-P300L Alarm & Error List", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=10)
    pdf.multi_cell(0, 5, "OKUMA lathes. Alarm A stops the machine; Alarm B stops the cycle.")
    pdf.ln(2)
    with pdf.table(col_widths=(18, 42, 65, 65), repeat_headings=1) as table:
        for values in [OKUMA_HEADER, *OKUMA_ROWS]:
            row = table.row()
            for value in values:
                row.cell(value)
    pdf.output(str(path))


def _fanuc_two_column_pdf(path: Path) -> None:
    """A FANUC servo alarm list printed in two columns, two alarms per column."""
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", style="B", size=12)
    pdf.cell(0, 8, "FANUC Series 0i-F  Servo alarms (SV alarm)", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=8)
    top = pdf.get_y() + 4
    for column, x in enumerate((10, 110)):
        y = top
        for entry in FANUC_COLUMNS[2 * column : 2 * column + 2]:
            for line in entry:
                pdf.text(x, y, line)
                y += 4.5
            y += 6
    pdf.output(str(path))


def _sinamics_workbook(path: Path) -> None:
    """A SINAMICS fault list with a key line above the header."""
    book = xlsxwriter.Workbook(str(path))
    sheet = book.add_worksheet("Faults")
    sheet.write_row(0, 0, ["SINAMICS S120 List Manual - Faults and alarms (excerpt)"])
    sheet.write_row(1, 0, ["Key: F = fault, A = alarm; Reaction: OFF1 / OFF2 / OFF3 / NONE"])
    sheet.write_row(2, 0, ["Number", "Name", "Reaction", "Cause", "Remedy"])
    for i, row in enumerate(SINAMICS_ROWS):
        sheet.write_row(3 + i, 0, row)
    book.close()


BUILT = {
    "okuma_osp_alarm_list.pdf": _okuma_pdf,
    "fanuc_servo_alarms_two_column.pdf": _fanuc_two_column_pdf,
    "sinamics_s120_faults.xlsx": _sinamics_workbook,
}


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture folder with the built PDFs and XLSX beside the committed documents."""
    folder = tmp_path_factory.mktemp("documents") / "manuals"
    shutil.copytree(FIXTURES, folder)
    for name, build in BUILT.items():
        build(folder / name)
    return folder


def read_entries(path: Path, root: Path) -> tuple[str, str | None, pl.DataFrame]:
    """(kind, layout, knowledge-base rows) of one file, read as the pipeline reads it."""
    found = sniff(path)
    if found.kind == "fault_table":
        return found.kind, found.layout, read_fault_table(path, root, found.layout).kept
    assert found.kind == "manual", found
    source = ManualSource(pattern=path.name, format=found.layout)
    blocks = read_manual(path, source, root).state["blocks"]
    return found.kind, found.layout, fault_entries(blocks, ManualsConfig()).kept


def entry(kb: pl.DataFrame, code: str, language: str | None = None) -> dict:
    rows = kb.filter(pl.col("code") == code)
    if language:
        rows = rows.filter(pl.col("language") == language)
    assert rows.height == 1, rows
    return rows.row(0, named=True)


def _check(documents: Path, name: str) -> pl.DataFrame:
    kind, layout, codes = EXPECTED[name]
    found_kind, found_layout, kb = read_entries(documents / name, documents)
    assert (found_kind, found_layout) == (kind, layout)
    assert kb.schema == pl.Schema(FAULT_CODE_SCHEMA)
    assert sorted(kb["code"].unique()) == sorted(codes)  # recall and code precision 1.0
    assert kb.height == len(codes) * len(LANGUAGES.get(name, [None]))
    assert (kb["source_file"] == name).all()
    assert kb["message"].null_count() == 0
    return kb


def test_pdf_alarm_table_over_two_pages(documents: Path) -> None:
    kb = _check(documents, "okuma_osp_alarm_list.pdf")
    assert len({row[0] for row in OKUMA_ROWS}) == 16
    last = entry(kb, "OKUMA:5030")  # on the second page
    assert last["message"] == "EMERGENCY STOP CIRCUIT ERROR"
    assert last["causes"] == [OKUMA_ROWS[-1][2]]
    assert last["remedies"] == [OKUMA_ROWS[-1][3]]
    first = entry(kb, "OKUMA:1204")
    assert first["remedies"] == [OKUMA_ROWS[0][3]]  # a cell wrapped over three lines, whole


def test_two_column_pdf(documents: Path) -> None:
    kb = _check(documents, "fanuc_servo_alarms_two_column.pdf")
    sv0411 = entry(kb, "FANUC:SV0411")  # the first alarm of the right-hand column
    assert sv0411["message"] == "EXCESS ERROR (MOVING)"
    assert sv0411["causes"] == [
        "The position error during movement exceeded the value in parameter 1828."
    ]
    assert sv0411["remedies"] == ["Check the position gain and the feed rate."]


def test_markdown_pipe_table(documents: Path) -> None:
    kb = _check(documents, "fanuc_0if_spindle_alarms.md")
    sp9003 = entry(kb, "FANUC:SP9003")
    assert sp9003["message"] == "DC LINK FUSE BLOWN"
    assert sp9003["remedies"] == ["The fuse in the DC link of the SPM is blown. Replace the SPM."]
    assert entry(kb, "FANUC:OH0701")["message"] == "FAN MOTOR STOP"  # the second table


def test_markdown_labelled_error_list(documents: Path) -> None:
    kb = _check(documents, "heidenhain_tnc640_errors.md")
    tool = entry(kb, "HEIDENHAIN:C3A0-0010")
    assert tool["message"] == "Tool not defined"
    assert tool["causes"] == ["The tool called in TOOL CALL is not in the tool table TOOL.T."]
    assert tool["remedies"] == [
        "Enter the tool in the tool table or correct the tool number in the program."
    ]


def test_html_table(documents: Path) -> None:
    kb = _check(documents, "haas_mill_alarm_list.html")
    alarm = entry(kb, "HAAS:160")
    assert alarm["message"] == "LOW VOLTAGE"
    assert alarm["description"] == (
        "The incoming line voltage is below 190 VAC. Check the power supply of the machine."
    )


def test_html_definition_list(documents: Path) -> None:
    kb = _check(documents, "mazak_alarm_glossary.html")
    arm = entry(kb, "MAZAK:301")
    assert arm["message"] == "ATC ARM POSITION ERROR"
    assert arm["causes"] == ["the proximity switch of the arm is faulty."]
    assert arm["remedies"] == ["Return the arm manually and check the switch."]


def test_html_alarm_reference_with_sections(documents: Path) -> None:
    kb = _check(documents, "sinumerik_840d_diagnostics.html")
    encoder = entry(kb, "SINUMERIK:25000")
    assert encoder["message"] == "Axis %1 hardware fault of active encoder"
    assert encoder["description"] == (
        "The signals of the currently active position measuring encoder are missing or not in "
        "phase."
    )
    assert encoder["effect"] == (
        "NC not ready. Mode group not ready. The NC switches to follow-up mode."
    )
    assert encoder["remedies"] == [
        "Check the measuring circuit connectors for correct contacting. Check the encoder "
        "signals and replace faulty encoders."
    ]
    assert "Parameters" not in (encoder["description"] or "")


def test_aligned_text_grid(documents: Path) -> None:
    kb = _check(documents, "m80_alarm_list.txt")
    overspeed = entry(kb, "MITSUBISHI:S01-0031")
    assert overspeed["message"] == "Overspeed"
    assert overspeed["remedies"] == ["Check the servo parameters and the detector cable."]


def test_chinese_labelled_guide_in_utf16(documents: Path) -> None:
    assert (documents / "gsk_980tdi_alarm_guide.txt").read_bytes()[:2] == b"\xff\xfe"
    kb = _check(documents, "gsk_980tdi_alarm_guide.txt")
    follow = entry(kb, "GSK:0414")
    assert follow["message"] == "X轴跟随误差过大"
    assert follow["causes"] == ["负载过大或机械卡死", "位置环增益设定不当"]
    assert follow["remedies"] == ["检查机械传动部分", "调整参数 No.0030 的位置环增益"]
    assert (kb["language"] == "zh").all()


def test_csv_code_table_with_a_key_line(documents: Path) -> None:
    kb = _check(documents, "knd_k1000_alarm_codes.csv")
    follow = entry(kb, "KND:0411")
    assert follow["message"] == "X轴跟随误差过大"
    assert follow["causes"] == ["负载过大", "编码器反馈异常"]
    assert follow["source_row"] == 7  # key line 1, header line 2


def test_xlsx_code_table_with_a_key_line(documents: Path) -> None:
    kb = _check(documents, "sinamics_s120_faults.xlsx")
    overcurrent = entry(kb, "SINAMICS:F07801")
    assert overcurrent["message"] == "Drive: Motor overcurrent"
    assert overcurrent["remedies"] == [
        "Check the current limits (p0640) and the motor data. Increase the ramp-up time."
    ]
    assert overcurrent["family"] == "SINAMICS"  # SINUMERIK's drives, filed as alarm logs are
    assert overcurrent["effect"] == "OFF2"


def test_nested_bilingual_json(documents: Path) -> None:
    kb = _check(documents, "hsv_180u_alarms.json")
    encoder = kb.filter(pl.col("code") == "HNC:ER.07").sort("language")
    assert encoder.select("language", "message", "remedies").rows() == [
        ("en", "Encoder fault", ["Check the encoder cable and connector"]),
        ("zh", "编码器故障", ["检查编码器电缆及插头"]),
    ]


def test_every_layout_has_a_test() -> None:
    assert set(LAYOUTS) == set(EXPECTED)
    assert len(EXPECTED) >= 12 and len(set(LAYOUTS.values())) >= 8
    committed = {p.name for p in FIXTURES.iterdir()} - {"README.md"}
    assert committed | set(BUILT) == set(EXPECTED)


def test_recall_and_code_precision_over_all_fixtures(documents: Path) -> None:
    expected = {(name, code) for name, (_, _, codes) in EXPECTED.items() for code in codes}
    found = set()
    for name in EXPECTED:
        _, _, kb = read_entries(documents / name, documents)
        found |= {(name, code) for code in kb["code"].drop_nulls()}
    recall = len(found & expected) / len(expected)
    precision = len(found & expected) / len(found)
    assert recall >= 0.95
    assert precision == 1.0


def test_refresh_over_the_fixture_folder(documents: Path, tmp_path: Path) -> None:
    published = refresh("refresh-corpus", Sources.everything(documents), tmp_path, PipelineConfig())
    manifest = published.manifest
    inputs = {i.path: i.reader for i in manifest.inputs}
    skipped = {s.path: s.reason for s in manifest.skipped}
    assert skipped == {
        "README.md": "readme: readme or source-notes file (by its name): not corpus text"
    }
    assert inputs == {name: f"{kind}:{layout}" for name, (kind, layout, _) in EXPECTED.items()}
    kb = pl.read_parquet(published.path / "fault_codes" / "*.parquet")
    for name, (_, _, codes) in EXPECTED.items():
        assert sorted(kb.filter(pl.col("source_file") == name)["code"].unique()) == sorted(codes)
    assert not [i for i in manifest.inputs if i.source_kind == "workorder"]
