"""Input-file listing by configured glob, which only the tests use (the flows take the files
`pipeline.ingest.inventory` lists)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, TypeVar


class _Claims(Protocol):
    pattern: str


S = TypeVar("S", bound=_Claims)


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
