"""Text encoding of an input file: BOM, strict UTF-8, GBK, GB18030, then charset_normalizer."""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from pathlib import Path

import charset_normalizer

from pipeline.core.errors import InputFileError


class EncodingError(InputFileError, ValueError):
    """Bytes that no supported encoding decodes; the message names the file."""

    reason = "undecodable_file"


_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def detect_encoding(data: bytes, source: str | Path | None = None) -> str:
    """Python codec name for `data`.

    Order: a byte-order mark (UTF-8 gives `utf-8-sig`); strict UTF-8 (ASCII and empty input
    included); strict GBK; GB18030; charset_normalizer's best guess. Raises EncodingError
    naming `source` when none of them decodes the bytes.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom) and _decodes(data, encoding):
            return encoding
    for encoding in ("utf-8", "gbk", "gb18030"):
        if _decodes(data, encoding):
            return encoding
    best = charset_normalizer.from_bytes(data).best()
    if best is not None and _decodes(data, best.encoding):
        return best.encoding
    where = str(source) if source is not None else "<bytes>"
    raise EncodingError(
        f"{where}: cannot decode the text: not UTF-8, GBK or GB18030 and no other encoding "
        f"fits; set the source's `encoding` in the configuration"
    )


def resolved_encoding(data: bytes, encoding: str, source: str | Path | None = None) -> str:
    """The configured encoding, or the detected one when it is 'auto'."""
    return detect_encoding(data, source) if encoding == "auto" else encoding


def undecodable_lines(data: bytes) -> list[int] | None:
    """Line numbers of the lines that are not UTF-8 in a file that otherwise is (more of its
    non-ASCII lines decode than do not); None when the file is not UTF-8 with a few bad lines.

    One GBK line pasted into a UTF-8 export must not turn the whole file into GB18030
    mojibake: the file is UTF-8, and those lines are quarantined by number.
    """
    bad, good = _utf8_lines(data.split(b"\n"))
    return bad if bad and len(bad) < good else None


def _utf8_lines(lines: Iterable[bytes]) -> tuple[list[int], int]:
    """(numbers of the non-ASCII lines that are not UTF-8, count of those that are)."""
    bad, good = [], 0
    for number, line in enumerate(lines, start=1):
        if line.isascii():
            continue
        try:
            line.decode("utf-8")
            good += 1
        except UnicodeDecodeError:
            bad.append(number)
    return bad, good


def decode(data: bytes, source: str | Path, encoding: str = "auto") -> tuple[str, str, list[int]]:
    """(text, encoding, undecodable line numbers). With `auto`, a UTF-8 file with a few lines
    in another encoding decodes as UTF-8 with U+FFFD in those lines, which are returned."""
    if encoding == "auto":
        bad = undecodable_lines(data) if not data.startswith(codecs.BOM_UTF8) else None
        if bad is not None:
            return check_text(data.decode("utf-8", "replace"), source), "utf-8", bad
    encoding = resolved_encoding(data, encoding, source)
    try:
        return check_text(data.decode(encoding), source), encoding, []
    except UnicodeDecodeError as exc:
        raise EncodingError(
            f"{source}: byte {exc.start} is not valid {encoding}: {exc.reason}"
        ) from None
    except LookupError:
        raise EncodingError(
            f"{source}: unknown encoding {encoding!r} in the configuration"
        ) from None


_BLOCK = 1 << 20


def _blocks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        yield from iter(lambda: fh.read(_BLOCK), b"")


def _file_decodes(path: Path, encoding: str) -> bool:
    """Whether the whole file decodes strictly, read a block at a time."""
    decoder = codecs.getincrementaldecoder(encoding)()
    try:
        for block in _blocks(path):
            decoder.decode(block)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _mostly_utf8(path: Path) -> bool:
    """`undecodable_lines` of the file is not None, read a line at a time."""
    with open(path, "rb") as fh:
        bad, good = _utf8_lines(fh)
    return 0 < len(bad) < good


def scan_encoding(path: Path, encoding: str = "auto") -> tuple[str, bool]:
    """`decode`'s choice of encoding for a file, made without holding it: (codec, whether
    some of its lines are not valid in it and decode as U+FFFD). A configured `encoding` is
    taken as it is; an unknown codec name raises EncodingError."""
    if encoding != "auto":
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise EncodingError(
                f"{path}: unknown encoding {encoding!r} in the configuration"
            ) from None
        return encoding, False
    with open(path, "rb") as fh:
        head = fh.read(4)
    for bom, name in _BOMS:
        if head.startswith(bom) and _file_decodes(path, name):
            return name, False
    if _file_decodes(path, "utf-8"):
        return "utf-8", False
    if not head.startswith(codecs.BOM_UTF8) and _mostly_utf8(path):
        return "utf-8", True
    for name in ("gbk", "gb18030"):
        if _file_decodes(path, name):
            return name, False
    with open(path, "rb") as fh:
        sample = fh.read(4 * _BLOCK)
    best = charset_normalizer.from_bytes(sample).best()
    if best is not None and _file_decodes(path, best.encoding):
        return best.encoding, False
    raise EncodingError(
        f"{path}: cannot decode the text: not UTF-8, GBK or GB18030 and no other encoding "
        f"fits; set the source's `encoding` in the configuration"
    )


def text_lines(path: Path, encoding: str, replace: bool = False) -> Iterator[str]:
    """The file's physical lines, their endings kept, decoded a block at a time.
    A NUL character, or bytes not valid in `encoding` (unless `replace`), raise EncodingError
    naming the file and line."""
    errors = "replace" if replace else "strict"
    try:
        with open(path, encoding=encoding, errors=errors, newline="") as fh:
            for number, line in enumerate(fh, start=1):
                if "\x00" in line:
                    where = f"{path}:{number}"
                    raise EncodingError(f"{where}: NUL byte: binary content, not a text file")
                yield line
    except UnicodeDecodeError as exc:
        line = _line_of_bad_byte(path, encoding)
        raise EncodingError(f"{path}:{line}: not valid {encoding}: {exc.reason}") from None


def _line_of_bad_byte(path: Path, encoding: str) -> int:
    """The line holding the first byte of the file not valid in `encoding`."""
    decoder, lines, tail = codecs.getincrementaldecoder(encoding)(), 1, ""
    for block in _blocks(path):
        try:
            text = decoder.decode(block)
        except UnicodeDecodeError as exc:  # its object: the bytes held back, then the block
            return lines + _breaks(tail + exc.object[: exc.start].decode(encoding)) - _breaks(tail)
        lines += _breaks(tail + text) - _breaks(tail)
        tail = text[-1:]
    return lines


def _breaks(text: str) -> int:
    """Line breaks in `text`: \\n, \\r\\n or a lone \\r."""
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def check_text(text: str, source: str | Path) -> str:
    """`text`, unless it holds a NUL character: binary content, not a text file."""
    at = text.find("\x00")
    if at >= 0:
        line = text.count("\n", 0, at) + 1
        raise EncodingError(f"{source}:{line}: NUL byte: binary content, not a text file")
    return text


def read_text(path: str | Path, encoding: str = "auto") -> tuple[str, str]:
    """Decode a whole file; returns (text, encoding used). `encoding="auto"` detects it; lines
    that do not decode hold U+FFFD (see `decode`)."""
    text, used, _ = decode(Path(path).read_bytes(), path, encoding)
    return text, used
