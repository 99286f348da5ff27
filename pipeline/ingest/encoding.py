"""Text encoding of an input file, decided by the characters each candidate gives.

Order: a byte-order mark; UTF-16 without one (the NUL-byte pattern of its ASCII, then a decode
that gives text); strict UTF-8; GBK and GB18030, unless the bytes are Western single-byte text
that happens to decode as GBK (umlauts followed by a letter do: `Überwachung` → `躡erwachung`);
the Western and Central European single-byte code pages (cp1252, ISO-8859-15, cp1250,
Latin-1) scored by the letters they give; then charset_normalizer. A configured encoding is
used as it is.
"""

from __future__ import annotations

import codecs
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from itertools import combinations
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


# Characters of text in UTF-16: ASCII printable and whitespace, Latin, Greek, Cyrillic, general
# punctuation and signs, CJK punctuation, kana, CJK ideographs, Hangul, full-width forms.
_TEXT_RANGES = re.compile(
    "[\t\n\r\x20-\x7e\xa0-\u024f\u0370-\u04ff\u2000-\u22ff\u2460-\u27bf"
    "\u3000-\u30ff\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]"
)


def utf16_without_bom(data: bytes) -> str | None:
    """`utf-16-le` or `utf-16-be` for BOM-less UTF-16 text, else None: NUL bytes on one side
    of the pairs only (the high byte of ASCII characters), and a decode in that byte order
    that is nearly all letters, digits, punctuation and whitespace."""
    data = data[: len(data) - len(data) % 2]
    even, odd = data[0::2].count(0), data[1::2].count(0)
    if odd > 3 * even:
        order = "utf-16-le"
    elif even > 3 * odd:
        order = "utf-16-be"
    else:
        return None
    text = data.decode(order, "replace")
    return order if len(_TEXT_RANGES.findall(text)) >= 0.98 * len(text) else None


# Letters of the alphabets written in cp1252/ISO-8859-15 and cp1250 (besides ASCII).
_ALPHABETS = tuple(
    set(letters + letters.upper())
    for letters in (
        "äöüß",  # German
        "àâæçéèêëîïôœùûüÿ",  # French
        "áéíóúñü",  # Spanish
        "àèéìíîòóù",  # Italian
        "áâãàçéêíóôõú",  # Portuguese
        "éëïóöüèá",  # Dutch
        "åäöæøé",  # Scandinavian
        "áéíóúýþæöð",  # Icelandic
        "áčďéěíňóřšťúůýž",  # Czech
        "áäčďéíĺľňóôŕšťúýž",  # Slovak
        "ąćęłńóśźż",  # Polish
        "áéíóöőúüű",  # Hungarian
        "čćđšž",  # Slovene, Croatian
        "ăâîșțşţ",  # Romanian
    )
)
_SIGNS = set("\xa0€„“”‚‘’‹›«»–—…•·°±²³µ×÷§¶©®™¼½¾¿¡Øø")
_NON_ASCII_RUN = re.compile("[^\x00-\x7f]+")
_ASCII_LETTER = re.compile("[A-Za-z]")
_WESTERN = ("cp1252", "iso-8859-15", "cp1250", "latin-1")
_WESTERN_FIT = 0.85  # the least `western_fit` of a Western reading


def western_fit(text: str) -> float:
    """Share of the non-ASCII characters of a single-byte decoding that Western or Central
    European text holds: typographic and technical signs, and letters (in runs of at most
    three, as inside words) of the one or two alphabets that cover most of them. 1.0 for
    ASCII text; Chinese, Cyrillic or binary read byte by byte score low."""
    signs, letters, total = 0, Counter[str](), 0
    for run in _NON_ASCII_RUN.findall(text):
        total += len(run)
        if len(run) <= 3:
            signs += sum(c in _SIGNS for c in run)
            letters.update(c for c in run if c not in _SIGNS and c.isalpha())
    if not total:
        return 1.0
    covered = [sum(n for c, n in letters.items() if c in alphabet) for alphabet in _ALPHABETS]
    pairs = [
        sum(n for c, n in letters.items() if c in a or c in b)
        for a, b in combinations(_ALPHABETS, 2)
    ]
    return (signs + max(covered + pairs)) / total


def latin_as_gbk(text: str) -> float:
    """Share of the non-ASCII characters of a GBK decoding that Latin text read as GBK gives:
    an accented letter and the ASCII letter after it became one ideograph outside GB2312
    (its second byte is below 0x80: `Kontur黚erwachung`, `躡erwachung`), in a run of one or
    two touching an ASCII letter. Chinese text is written in GB2312 ideographs, in long runs."""
    odd, total = 0, 0
    for m in _NON_ASCII_RUN.finditer(text):
        total += len(m.group())
        touching = text[m.start() - 1 : m.start()] + text[m.end() : m.end() + 1]
        if len(m.group()) <= 2 and _ASCII_LETTER.search(touching):
            odd += sum(not _in_gb2312(c) for c in m.group())
    return odd / total if total else 0.0


def _in_gb2312(char: str) -> bool:
    try:
        char.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return True


def _western(sample: bytes, decodes: Callable[[str], bool]) -> tuple[str, float] | None:
    """The single-byte code page whose decoding of `sample` fits Western or Central European
    text best (the earlier in `_WESTERN` on a tie), among those that decode all the data."""
    scored = []
    for rank, encoding in enumerate(_WESTERN):
        try:
            scored.append((-western_fit(sample.decode(encoding)), rank, encoding))
        except UnicodeDecodeError:
            continue
    for fit, _, encoding in sorted(scored):
        if decodes(encoding):
            return encoding, -fit
    return None


def _legacy(sample: bytes, decodes: Callable[[str], bool]) -> str | None:
    """GBK or GB18030 when the data decodes in it, unless a Western code page fits and the
    GBK reading is what Latin text read as GBK gives (`latin_as_gbk`); else a Western code
    page that fits; None
    when neither does (charset_normalizer is asked next)."""
    western = _western(sample, decodes)
    fits = western is not None and western[1] >= _WESTERN_FIT
    for encoding in ("gbk", "gb18030"):
        if decodes(encoding):
            if fits and latin_as_gbk(sample.decode(encoding, "ignore")) >= 0.5:
                return western[0]  # type: ignore[index]
            return encoding
    return western[0] if fits else None  # type: ignore[index]


def _marked(sample: bytes, decodes: Callable[[str], bool]) -> str | None:
    """The encoding a byte-order mark names, or BOM-less UTF-16, for data whose head is
    `sample` (`decodes`: whether all of it decodes strictly in a codec); else None."""
    for bom, encoding in _BOMS:
        if sample.startswith(bom) and decodes(encoding):
            return encoding
    if b"\x00" in sample:
        order = utf16_without_bom(sample)
        if order is not None and decodes(order):
            return order
    return None


def detect_encoding(data: bytes, source: str | Path | None = None) -> str:
    """Python codec name for `data`, in the module's order: a byte-order mark (UTF-8 gives
    `utf-8-sig`), BOM-less UTF-16, strict UTF-8 (ASCII and empty input included), GBK or
    GB18030 unless Western text reads better, a Western code page, charset_normalizer's best
    guess. Raises EncodingError naming `source` when none of them decodes the bytes."""

    def decodes(encoding: str) -> bool:
        return _decodes(data, encoding)

    found = _marked(data, decodes) or ("utf-8" if decodes("utf-8") else _legacy(data, decodes))
    if found is not None:
        return found
    best = charset_normalizer.from_bytes(data).best()
    if best is not None and _decodes(data, best.encoding):
        return best.encoding
    where = str(source) if source is not None else "<bytes>"
    raise EncodingError(
        f"{where}: cannot decode the text: not UTF-8, UTF-16, GBK, GB18030 or a Western code "
        f"page and no other encoding fits; set the source's `encoding` in the configuration"
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
        sample = fh.read(4 * _BLOCK)

    def decodes(name: str) -> bool:
        return _file_decodes(path, name)

    marked = _marked(sample, decodes)
    if marked is not None:
        return marked, False
    if decodes("utf-8"):
        return "utf-8", False
    if not sample.startswith(codecs.BOM_UTF8) and _mostly_utf8(path):
        return "utf-8", True
    found = _legacy(sample, decodes)
    if found is not None:
        return found, False
    best = charset_normalizer.from_bytes(sample).best()
    if best is not None and _file_decodes(path, best.encoding):
        return best.encoding, False
    raise EncodingError(
        f"{path}: cannot decode the text: not UTF-8, UTF-16, GBK, GB18030 or a Western code "
        f"page and no other encoding fits; set the source's `encoding` in the configuration"
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
