"""Stable string and shingle hashes follow their definitions."""

from __future__ import annotations

import polars as pl

from pipeline.dedup.hashing import SHINGLE_ADD, SHINGLE_MULT, string_hashes
from tests.pipeline.dedup.support import shingle_hashes


def test_shingle_hashes_follow_their_definition() -> None:
    def reference(shingle: str, k: int) -> int:
        codes = [ord(ch) for ch in shingle] + [0] * (k - len(shingle))
        total = int(SHINGLE_ADD) + sum(
            c * int(m) for c, m in zip(codes, SHINGLE_MULT, strict=False)
        )
        return (total % (1 << 64)) >> 32

    texts = ["主轴异响温升", "sv0401", "ab"]
    hashes, offsets = shingle_hashes(pl.Series(texts), 5)
    expected = [reference(t[i : i + 5], 5) for t in texts for i in range(max(len(t) - 4, 1))]
    assert hashes.tolist() == expected
    assert offsets.tolist() == [0, 2, 4, 5]


def test_string_hashes_follow_their_definition() -> None:
    mask, mix = (1 << 64) - 1, 0x9E3779B97F4A7C15

    def fmix64(x: int) -> int:
        x ^= x >> 33
        x = (x * 0xFF51AFD7ED558CCD) & mask
        x ^= x >> 33
        x = (x * 0xC4CEB9FE1A85EC53) & mask
        return x ^ (x >> 33)

    def reference(text: str) -> int:
        total = 0
        for place, at in enumerate(range(0, len(text), 8)):
            codes = [ord(ch) for ch in text[at : at + 8]] + [0] * 8
            window = int(SHINGLE_ADD) + sum(
                c * int(m) for c, m in zip(codes[:8], SHINGLE_MULT[:8], strict=True)
            )
            total += fmix64((window & mask) ^ ((place * mix) & mask))
        return fmix64((total & mask) ^ ((len(text) * mix) & mask))

    texts = ["主轴异响温升65度\x1f轴承磨损", "sv0401", "", "spindle" * 3, "spindle" * 3 + "s"]
    hashes = string_hashes(pl.Series(texts)).tolist()
    assert hashes == [reference(t) for t in texts]
    assert hashes[2] == 0 and len(set(hashes)) == len(texts)
