"""MinHash signatures equal datasketch's; bands fit the signature."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from datasketch import LeanMinHash, MinHash
from pydantic import ValidationError

from pipeline.dedup.minhash import signatures
from schemas.dedup import DedupConfig
from tests.pipeline.dedup.support import shingle_hashes


@pytest.mark.parametrize("scheme", ["affine32", "legacy"])
def test_signatures_equal_datasketch(scheme: str) -> None:
    cfg = DedupConfig(scheme=scheme, num_perm=64, bands=8, rows=8, moderate_bands=16, seed=3)
    texts = pl.Series(["主轴异响温升65度", "spindlenoise", "sv0401", "ab"])
    hashes, offsets = shingle_hashes(texts, cfg.shingle_size)
    ours = signatures(offsets, cfg, lambda r0, r1: hashes[offsets[r0] : offsets[r1]])
    per_text = [hashes[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))]
    reference = MinHash.bulk(per_text, num_perm=64, seed=3, scheme=scheme, hashfunc=lambda h: h)
    for row, m in zip(ours, reference, strict=True):
        assert np.array_equal(row, LeanMinHash(m).hashvalues)


def test_bands_must_fit_the_signature() -> None:
    with pytest.raises(ValidationError, match="exceeds num_perm"):
        DedupConfig(num_perm=64, bands=14, rows=8)
