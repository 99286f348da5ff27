"""CSV rows from a stream of physical lines, read once and never held whole.

The csv module parses (quoted newlines and delimiters); this module numbers each row by its
first physical line, finds the header below report titles and blank rows, and recovers from
a bad row: one that spans several lines (an unbalanced quote swallowing the rows after it)
is reported at its first line only, and reading resumes on the next line. Only the lines of
the row being read are kept for that.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator

from pipeline.ingest.workorders.columns import HEADER_ROWS

# (first physical line, problem or None, fields)
CsvRow = tuple[int, str | None, list[str]]


class _Lines:
    """Numbered physical lines; the lines taken since `mark` can be given back."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines
        self._back: list[str] = []  # given-back lines, the next one last
        self.taken: list[str] = []
        self.number = 0  # lines taken so far

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self._back.pop() if self._back else next(self._lines)
        self.number += 1
        self.taken.append(line)
        return line

    def mark(self) -> None:
        self.taken = []

    def give_back(self, keep: int) -> None:
        """Give back the lines taken since `mark` after the first `keep`."""
        back = self.taken[keep:]
        self._back.extend(reversed(back))
        self.number -= len(back)
        self.taken = self.taken[:keep]


def read_csv_rows(
    lines: Iterator[str],
    delimiter: str,
    choose_header: Callable[[list[list[str]]], int],
    header_row: int | None = None,
) -> tuple[int, list[str], Iterator[CsvRow]] | None:
    """(header line, header, the rows after it), or None for a file without any row.

    The header is the first row at or after physical line `header_row` when it is given,
    else `choose_header`'s pick among the first `HEADER_ROWS` rows. A row whose field count
    differs from the header's, or that the csv module cannot parse, comes with its problem.
    """
    source = _Lines(lines)
    reader = csv.reader(source, delimiter=delimiter)
    head: list[tuple[int, int, list[str]]] = []  # first line, last line, fields ([]: error)
    while len(head) < HEADER_ROWS:
        start = source.number + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error:
            row = []
        head.append((start, source.number, row))
    if not any(row for _, _, row in head):
        return None
    if header_row is not None:
        index = next((i for i, (n, _, _) in enumerate(head) if n >= header_row), 0)
    else:
        index = choose_header([row for _, _, row in head])
    header_line, last, header = head[index]
    source.give_back(last)  # the rows read after the header are read again as data
    return header_line, header, _rows(source, delimiter, len(header))


def _rows(source: _Lines, delimiter: str, width: int) -> Iterator[CsvRow]:
    reader = csv.reader(source, delimiter=delimiter)
    while True:
        source.mark()
        start = source.number + 1
        try:
            row = next(reader)
            problem = None if not row or len(row) == width else f"expected {width} fields"
        except StopIteration:
            return
        except csv.Error as exc:
            row, problem = [], f"unparseable CSV: {exc}"
        if problem is None:
            if row:  # a blank physical line is not a record
                yield start, None, row
            continue
        end = source.number
        if row and end == start:
            problem += f", found {len(row)}"
        elif end > start:
            problem += (
                f" (an unbalanced quote here ran on to line {end}; read again from {start + 1})"
            )
            row = [source.taken[0]]
            source.give_back(1)
            reader = csv.reader(source, delimiter=delimiter)
        yield start, problem, [field[:1000] for field in row]
