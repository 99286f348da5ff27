"""The relative path that names an input file in lineage, and the one content hash of a file."""

from __future__ import annotations

import hashlib
from pathlib import Path


def relative_path(path: str | Path, root: str | Path | None) -> str:
    """`path` relative to the input root, as lineage names it (the file name when the root
    is the file itself or not given)."""
    path = Path(path)
    if root is None or Path(root).is_file():
        return path.name
    return path.relative_to(root).as_posix()


def sha256_bytes(data: bytes) -> str:
    """The content hash that names a file in the ledger and the manifest."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """`sha256_bytes` of a file's content, read a block at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
