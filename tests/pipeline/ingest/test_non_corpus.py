"""Text that is not corpus text, by content: each kind must make up most of the text."""

from __future__ import annotations

from pipeline.ingest.non_corpus import (
    code_kind,
    is_changelog,
    is_configuration,
    is_json_configuration,
    is_licence,
    is_log_dump,
    what_text,
)

NOTICE = (
    "Copyright (c) 2022 Example GmbH. Licensed under the Apache License, Version 2.0; you may "
    "not use this file except in compliance with the License.\n\n"
)
MANUAL_BODY = "\n\n".join(
    f"{n}. Check the spindle drawbar clamping force with the gauge; it must read 18-22 kN. "
    f"Clean the taper and the pull stud before each measurement on machine VMC-0{n}."
    for n in range(1, 12)
)


def test_a_licence_notice_in_front_of_a_manual_does_not_make_it_a_licence() -> None:
    assert is_licence(NOTICE + 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.')
    assert not is_licence(NOTICE + "Provided without warranty of any kind.\n\n" + MANUAL_BODY)


def test_dated_notes_are_no_log_dump_but_machine_logs_are() -> None:
    notes = [f"2024-03-{d:02d} 08:10 主轴异响，补充油脂后试车正常。" for d in range(10, 20)]
    logs = [f"2024-03-{d:02d} 08:10:{d:02d},120 INFO focas: poll ok" for d in range(10, 20)]
    assert not is_log_dump(notes) and is_log_dump(logs)
    assert not is_log_dump(logs[:4])  # five lines at least


def test_a_revision_history_or_numbered_steps_are_no_changelog() -> None:
    steps = ["Version 4.7 SP2 of the HMI shows the alarm log under Diagnosis."] + [
        f"{n}. Press the softkey and read the alarm text." for n in range(1, 8)
    ]
    assert not is_changelog(steps + ["Version 4.8 keeps it there."])
    entries = ["v2.3.1 (2024-03-01)", "- Fixed ALM 414 on power-up", "v2.3.0 (2024-01-10)"]
    assert is_changelog(entries + ["- Added G71 type II"])


def test_docstrings_do_not_hide_python_and_gcode_examples_do_not_make_a_program() -> None:
    module = '"""Generator.\n\nLong prose about the data,\nwrapped over lines.\n"""\n' + "".join(
        f'NAME_{n} = ("a", "b")\n' for n in range(6)
    )
    assert code_kind(module, module.splitlines()) == "source code"
    manual = ["Run the warm-up program after a stop of more than two days:"] * 6 + [
        "G04 X300.",
        "M30",
    ]
    assert code_kind("\n".join(manual), manual) is None


def test_toml_with_arrays_is_configuration_and_labelled_items_are_not() -> None:
    toml = ["[project]", 'name = "cnc-agent"', "dependencies = [", '    "polars>=1.20",', "]",
            "[tool.ruff]", "line-length = 100"]  # fmt: skip
    assert is_configuration(toml)
    items = ["Alarm: 108", "Message: SERVO OVERLOAD", "Cause: axis load", "Remedy: check axis"]
    assert not is_configuration(items * 2)
    assert what_text("\n".join(items * 2), items * 2) is None


def test_json_settings_but_not_a_code_keyed_alarm_table() -> None:
    assert is_json_configuration('{"poll_s": 5, "mqtt": {"host": "10.0.0.5", "port": 1883}}')
    table = '{"SV0401": {"zh": "V就绪信号关闭", "en": "V READY OFF"}, "SV0436": {"zh": "软过热"}}'
    assert not is_json_configuration(table)
    assert not is_json_configuration('{"orders": [{"symptom": "noise"}], "a": 1, "b": 2}')
