"""Text encoding of an input file: BOM, strict UTF-8, GBK, GB18030, then charset_normalizer."""

from __future__ import annotations

import codecs
from pathlib import Path

import charset_normalizer


class EncodingError(ValueError):
    """Bytes that no supported encoding decodes; the message names the file."""


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


def read_text(path: str | Path, encoding: str = "auto") -> tuple[str, str]:
    """Decode a whole file; returns (text, encoding used). `encoding="auto"` detects it."""
    path = Path(path)
    data = path.read_bytes()
    encoding = resolved_encoding(data, encoding, path)
    try:
        return data.decode(encoding), encoding
    except UnicodeDecodeError as exc:
        raise EncodingError(
            f"{path}: byte {exc.start} is not valid {encoding}: {exc.reason}"
        ) from None
    except LookupError:
        raise EncodingError(f"{path}: unknown encoding {encoding!r} in the configuration") from None
