"""Dedup stage: exact duplicates by a hash of normalized content, near duplicates by MinHash
LSH, in steps over shards.

- `content`: a record's normalized content, hashes, guard sets (alarm codes, code-like
  numbers), machine, completeness features and node key (records with equal keys are exact
  duplicates and share one node).
- `hashing`: the stable 64-bit hashes of texts, string sets and character shingles.
- `minhash`: MinHash signatures of the shingles (equal to datasketch's), band hashes.
- `lsh`: candidate pairs of nodes sharing a band bucket (split by machine), components.
- `verify`: which candidate pairs are one incident (the rules of schemas.dedup).
- `clusters`: per cluster, the kept record (the most complete one, or the published ones).
- `steps`: the per-shard and per-partition steps; `sharded`: the driver over them.
"""
