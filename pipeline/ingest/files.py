"""Which input files a source claims, the relative path that names them in lineage, and the
one content hash of a file."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol, TypeVar


class _Claims(Protocol):
    pattern: str


S = TypeVar("S", bound=_Claims)


def relative_path(path: str | Path, root: str | Path | None) -> str:
    """`path` relative to the input root, as lineage names it (the file name when the root
    is the file itself or not given)."""
    path = Path(path)
    if root is None or Path(root).is_file():
        return path.name
    return path.relative_to(root).as_posix()


def any_case(pattern: str) -> str:
    """The glob `pattern` matching ASCII letters in either case: `*.pdf` also finds `X.PDF`."""
    out, in_class = [], False
    for ch in pattern:
        in_class = (in_class or ch == "[") and ch != "]"
        plain = ch.isascii() and ch.isalpha() and not in_class
        out.append(f"[{ch.lower()}{ch.upper()}]" if plain else ch)
    return "".join(out)


def claimed_files(root: str | Path, sources: list[S]) -> list[tuple[Path, S]]:
    """Files under `root` that a source claims by its glob `pattern` (first match wins), sorted."""
    root = Path(root)
    claimed: dict[Path, S] = {}
    for source in sources:
        for path in sorted(root.glob(any_case(source.pattern))):
            if path.is_file():
                claimed.setdefault(path, source)
    return sorted(claimed.items(), key=lambda item: item[0].as_posix())


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
