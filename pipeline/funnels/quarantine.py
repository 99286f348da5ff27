"""File-level quarantine: an input file that cannot be read (or must not be) becomes one
reject row with a reason and a one-line detail, and a manifest entry; the run goes on.

Reasons: `unreadable_file` and `undecodable_file` (from the readers' `InputFileError`, and for
a file of a format we read whose bytes are empty, binary or a damaged archive), `cannot_open`
(the OS refused), `too_many_pages` (a PDF manual over `manuals.max_pdf_pages`). Files that
must never be read (a symlink leaving the input, a published corpus inside it) are skipped
with a reason instead (`pipeline.ingest.inventory`).
"""

from __future__ import annotations

import polars as pl

from pipeline.core.errors import QuarantineError
from pipeline.core.stage import empty_rejects, make_rejects
from pipeline.ingest.lineage import record_ids

STAGE = "quarantine"


def quarantine_rows(kind: str, files: dict[str, tuple[str, str]]) -> pl.DataFrame:
    """One reject row per file: lineage path -> (reason, detail)."""
    if not files:
        return empty_rejects()
    paths = sorted(files)
    frame = pl.DataFrame(
        {
            "record_id": record_ids(kind, "", pl.Series(paths), pl.Series([""] * len(paths))),
            "source_kind": [kind] * len(paths),
            "source_file": paths,
            "_reason": [files[p][0] for p in paths],
            "_detail": [" ".join(files[p][1].split()) for p in paths],
        }
    )
    return make_rejects(frame, STAGE, pl.col("_reason"), pl.col("_detail"))


def fail_if_strict(strict: bool, quarantined: pl.DataFrame) -> None:
    """A strict run refuses to publish when any file was quarantined."""
    if not strict or quarantined.height == 0:
        return
    first = quarantined.row(0, named=True)
    more = f" (and {quarantined.height - 1} more file(s))" if quarantined.height > 1 else ""
    raise QuarantineError(
        f"{first['detail']}{more}; strict run: nothing published (without --strict such "
        "files are quarantined and the run goes on)"
    )
