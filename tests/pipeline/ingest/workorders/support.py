"""Work-order exports listed by `ingest.include` and read whole: the tests' shortcuts (the
flows take the files `pipeline.ingest.inventory` lists and read them in parts)."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from pipeline.ingest.files import relative_path
from pipeline.ingest.workorders.reader import FileRead, IngestError, read_workorder_parts
from schemas.ingest import IngestConfig
from tests.pipeline.ingest.support import any_case


def discover_files(root: Path, cfg: IngestConfig) -> list[Path]:
    """Input files under `root` (or `root` itself), sorted, honouring include/exclude globs."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise IngestError(f"{root}: input path does not exist")
    found = {p for pattern in cfg.include for p in root.glob(any_case(pattern)) if p.is_file()}
    return sorted(
        p for p in found if not any(fnmatch.fnmatch(relative_path(p, root), x) for x in cfg.exclude)
    )


def read_workorder_file(path: Path, root: Path, cfg: IngestConfig) -> FileRead:
    """Read one export. Raises IngestError for a file that cannot be read at all."""
    return next(read_workorder_parts(path, root, cfg, None))
