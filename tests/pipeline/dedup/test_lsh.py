"""LSH candidate pairs: every same-machine pair sharing a band, none across machines."""

from __future__ import annotations

import numpy as np

from pipeline.dedup.lsh import bucket_entries, candidate_pairs
from schemas.dedup import DedupConfig


def test_candidates_are_the_same_machine_pairs_sharing_a_band() -> None:
    """Against a brute force over band hashes: every pair on one machine sharing a text band
    (or, both naming a machine, a moderate band) is a candidate; no pair on two machines is."""
    rng = np.random.default_rng(5)
    cfg = DedupConfig(num_perm=32, bands=4, rows=4, moderate_bands=4, moderate_rows=2)
    base = rng.integers(0, 2**32, (40, 32), dtype=np.uint32)
    sig = base[rng.integers(0, 40, 300)]  # copies of 40 texts, then some values changed
    changed = rng.random(sig.shape) < 0.3
    sig[changed] = rng.integers(0, 2**32, int(changed.sum()), dtype=np.uint32)
    machine = rng.choice(np.array([0, 11, 22, 33], dtype=np.uint64), 300)
    bits = max((len(sig) - 1).bit_length(), 1)
    packed = bucket_entries(sig, np.arange(len(sig)), machine, bits, cfg)
    u, v = candidate_pairs(packed, bits, cfg.pair_window, len(sig))
    found = set(zip(u.tolist(), v.tolist(), strict=True))
    assert all(machine[a] == machine[b] and a < b for a, b in found)
    expected = set()
    for bands, rows, named_only in ((4, 4, False), (4, 2, True)):
        for band in range(bands):
            block = sig[:, band * rows : (band + 1) * rows]
            for a in range(len(sig)):
                for b in range(a + 1, len(sig)):
                    same = machine[a] == machine[b] and (machine[a] != 0 or not named_only)
                    if same and np.array_equal(block[a], block[b]):
                        expected.add((a, b))
    assert len(expected) > 100
    assert expected <= found
