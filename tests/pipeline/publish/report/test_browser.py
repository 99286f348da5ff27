"""The report in a real headless Chromium: loads without console messages, every section
renders, and the screenshot is not blank.

Chromium is Debian's `chromium` package; where it is missing the test installs it with
apt-get, and skips (with the reason) when that is not possible.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.publish.report.data import SampleDigest
from pipeline.publish.report.page import render_report
from pipeline.stages.messages import render_messages
from pipeline.training.plan import plan_stages
from schemas.plan import PlanConfig
from tests.pipeline.publish.report.fixtures import manifest

SECTIONS = ("trend", "top", "timeline", "examples")


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip("chromium missing and apt-get unavailable (or not root) to install it")
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    done = subprocess.run(install, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode:  # a fresh machine has no package lists yet
        subprocess.run(["apt-get", "update"], capture_output=True, timeout=600, check=False)
        done = subprocess.run(install, capture_output=True, text=True, timeout=900, check=False)
    found = shutil.which("chromium")
    if done.returncode or not found:
        pytest.skip(f"apt-get install chromium failed: {done.stderr.strip()[-300:]}")
    return found


def _run(chromium: str, page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--enable-logging=stderr", "--v=0", *args, page.as_uri()]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def _png_pixels(path: Path) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes) to H x W x C."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in (2, 6) and interlace == 0
    bpp = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * bpp)
    out = np.zeros((height, width * bpp), dtype=np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        up = out[y - 1] if y else np.zeros_like(line)
        if kind == 0:
            out[y] = line
        elif kind == 2:
            out[y] = (line + up) % 256
        else:  # sub (1), average (3), paeth (4): left neighbours, one pixel at a time
            row = np.zeros_like(line)
            for x in range(line.size):
                a = row[x - bpp] if x >= bpp else 0
                b, c = up[x], (up[x - bpp] if x >= bpp else 0)
                if kind == 1:
                    pred = a
                elif kind == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                row[x] = (line[x] + pred) % 256
            out[y] = row
    return out.reshape(height, width, bpp)[:, :, :3].astype(np.uint8)


def _page(tmp_path: Path) -> Path:
    base = manifest()
    earlier = base.model_copy(update={"snapshot_id": "20240310T080000000000Z"})
    sft = render_messages(
        pl.DataFrame(
            {
                "record_id": ["a1", "a2", "a3", "a4", "b1", "c1"],
                "source_file": ["workorders/维修工单_2024.csv"] * 6,
                "source_row": [3, 4, 5, 6, 9, 12],
                "tier": ["A", "A", "A", "A", "B", "C"],
                "asset": ["CNC-25", "CNC-25", "M-205", "M-102", "CNC-27", None],
                "language": ["zh", "zh", "en", "en", "zh", "zh"],
                "alarm_codes": [["FANUC:SV0436"], ["FANUC:SV0436", "FANUC:SV0401"],
                                ["SINUMERIK:25000"], ["HAAS:161"], [], []],
                "symptom": ["Y轴报警SV0436", "开机报警SV0401", "X axis encoder fault 25000",
                            "Alarm 161 X axis drive fault, call 13812345678", "换刀卡刀",
                            "主轴异响"],
                "diagnosis": ["润滑不良", "MCC未吸合", "Encoder cable chafed", "Amplifier",
                              None, None],
                "action": ["疏通油路", "更换MCC", "Replaced cable", "Replaced amplifier",
                           "调整机械手", None],
                "prevention": [None] * 6,
            }
        )
    ).with_columns(n_tokens=pl.Series([120, 180, 95, 88, 60, 40], dtype=pl.Int32))  # fmt: skip
    t0 = datetime(2024, 3, 18, 11, 11, 11)
    incidents = pl.DataFrame(
        {
            "machine": ["VMC-03", "VMC-03", "DMU-07"],
            "alarm_codes": [["FANUC:EX1002"], ["FANUC:SV0401"], ["SINUMERIK:25000"]],
            "first_at": [t0, t0 + timedelta(hours=5), t0 - timedelta(days=6)],
            "last_at": [t0 + timedelta(minutes=8), t0 + timedelta(hours=5), t0 - timedelta(days=6)],
            "count": [2, 1, 2],
        }
    )  # fmt: skip
    lengths = {c: sft["n_tokens"] for c in ("pretrain", "tier_A", "tier_B", "tier_C", "sft_tools")}
    plan = plan_stages(lengths, PlanConfig())
    html = render_report(
        base, plan, sft.select("tier", "n_tokens"), None,
        history=[earlier], samples=SampleDigest.of(sft), incidents=incidents,
    )  # fmt: skip
    assert "13812345678" not in html  # redacted in the examples
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    return page


def test_console_check_catches_errors(chromium: str, tmp_path: Path) -> None:
    """The console check is live: a page with a script error is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><p>x</p><script>undefined_fn()</script>", encoding="utf-8")
    assert any(
        "undefined_fn" in line for line in _console(_run(chromium, bad, "--dump-dom").stderr)
    )


def test_report_loads_renders_every_section(chromium: str, tmp_path: Path) -> None:
    page = _page(tmp_path)
    done = _run(chromium, page, "--dump-dom")
    assert done.returncode == 0, done.stderr[-500:]
    assert _console(done.stderr) == []
    dom = done.stdout
    for key in SECTIONS:
        start = dom.index(f'<section id="{key}">')
        body = dom[start : dom.index("</section>", start)]
        assert "<svg" in body or "<table" in body or 'class="turn"' in body, key
    assert dom.count('class="incident"') == 3
    assert dom.count('class="example"') == 3 + 1 + 1  # three from tier A, all of B and C
    assert dom.count('class="trend"') == 3  # read, kept, rejected over two refreshes


def test_screenshot_is_not_blank(chromium: str, tmp_path: Path) -> None:
    page = _page(tmp_path)
    shot = tmp_path / "shot.png"
    done = _run(chromium, page, "--window-size=1000,1400", f"--screenshot={shot}")
    assert shot.exists(), done.stderr[-500:]
    pixels = _png_pixels(shot)
    assert pixels.shape[:2] == (1400, 1000)
    not_white = (pixels < 240).any(axis=2).mean()
    assert not_white > 0.02
    colors = {tuple(c) for c in pixels.reshape(-1, 3)[::7]}
    assert len(colors) > 20
    kept_green = np.array([0x5A, 0xAE, 0x61])  # the funnel's kept bars
    assert (np.abs(pixels.astype(int) - kept_green).sum(axis=2) < 12).any()
