"""Bytes to clean text: UTF-8 (else Latin-1 or U+FFFD, counted), UTF-16/32 with a byte-order mark, and
lines read in bounded memory however long they are."""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import IO

from docattn.data.limits import max_document_chars
from docattn.errors import DataError

_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),  # UTF-32 first: its LE BOM
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)  # starts like UTF-16's
_BLOCK = 1 << 20  # bytes read at a time past a line's limit


def _max_chars() -> int:
    return max_document_chars()


def _line_limit() -> int:
    """Bytes of one line read whole: 8 per character of a document leaves room for JSON's \\uXXXX
    escapes and a record's other fields; a line up to 1 MiB is always read whole."""
    return max(8 * _max_chars(), 1 << 20)


def _clean(text: str) -> str:
    """NUL and \\x1e (docattn's internal sentence separator) become spaces: never silently merge."""
    if "\x00" in text:
        text = text.replace("\x00", " ")
    if "\x1e" in text:
        text = text.replace("\x1e", " ")
    return text


def _decoded_lines(stream: IO, name: str, errors: str, stats: dict[str, int], long_lines: str = "cut") -> Iterator[str]:
    """Lines as clean text, BOM stripped, line ends kept: UTF-8 (else as ``errors`` says) or UTF-16/32 with a BOM.

    Read in bounded memory: a line past ``_line_limit()`` is cut there, the rest read in blocks and dropped
    (``long_lines="cut"``: the document limit then cuts and counts it), or is a DataError ("error": a CSV or
    JSON record cut short would read wrong).
    """
    limit = _line_limit()
    first = stream.readline(limit)
    if not first:
        return
    if isinstance(first, bytes) and (codec := _wide_encoding(first, name)):
        # b"\n" is no line end in UTF-16/32: decode blocks, split the text
        blocks = chain([first], iter(lambda: stream.read(_BLOCK), b""))
        lines: Iterator[bytes | str] = _wide_lines(blocks, codec, name, limit, long_lines)
    else:
        lines = _capped_lines(stream, first, name, limit, long_lines)
    for number, raw in enumerate(lines, 1):
        line = raw if isinstance(raw, str) else _decode_utf8(raw, f"{name}:{number}", errors, stats)
        if number == 1:
            line = line.removeprefix("\ufeff")
        yield _clean(line)


def _capped_lines(stream: IO, first: bytes | str, name: str, limit: int, long_lines: str) -> Iterator[bytes | str]:
    """``first``, then the lines of ``stream``, each at most ``limit`` bytes (see :func:`_decoded_lines`)."""
    newline, line_ends = (b"\n", b"\r\n") if isinstance(first, bytes) else ("\n", "\r\n")
    line, number = first, 1
    while line:
        if len(line) >= limit and not line.endswith(newline):
            rest = stream.readline(_BLOCK)
            if rest.rstrip(line_ends):  # longer than the limit, not just as long
                if long_lines == "error":
                    raise _long_line(name, number, limit)
                while rest and not rest.endswith(newline):  # the rest of it, read and dropped
                    rest = stream.readline(_BLOCK)
                if isinstance(line, bytes):
                    line = _whole_utf8(line)
            else:  # exactly as long as the limit
                line += rest
        yield line
        line, number = stream.readline(limit), number + 1


def _long_line(name: str, number: int, limit: int) -> DataError:
    return DataError(
        f"{name}:{number}: a record longer than {limit:,} bytes (8 x DOCATTN_MAX_DOCUMENT_CHARS, "
        f"now {_max_chars():,}), which cut short would read wrong; raise DOCATTN_MAX_DOCUMENT_CHARS "
        "or shorten the document"
    )


def _whole_utf8(raw: bytes) -> bytes:
    """``raw`` without a UTF-8 character its end cuts in two (bytes cut at a limit)."""
    for back in range(1, min(4, len(raw)) + 1):
        byte = raw[-back]
        if byte < 0x80:
            return raw
        if byte >= 0xC0:  # the lead byte: how many bytes its character takes
            return raw if back >= (2 if byte < 0xE0 else 3 if byte < 0xF0 else 4) else raw[:-back]
    return raw


def _decode_utf8(raw: bytes, where: str, errors: str, stats: dict[str, int]) -> str:
    """UTF-8 text; otherwise a DataError ("strict"), or Latin-1 / U+FFFD counted in ``stats["decode_errors"]``."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        if errors == "strict":
            raise DataError(
                f"{where}: not UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start}); "
                "re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE > FILE.utf8) "
                "or, from Python, read it with errors='latin-1' or errors='replace'"
            ) from None
        stats["decode_errors"] += 1
        return raw.decode("latin-1") if errors == "latin-1" else raw.decode("utf-8", "replace")


def _wide_encoding(head: bytes, where: str) -> str | None:
    """ "utf-16"/"utf-32" when ``head`` starts with their BOM; UTF-16/32 without one is a DataError.

    ASCII in UTF-16 has a NUL in every other byte (UTF-32: three in four), which UTF-8 would
    read as valid text full of NULs: without a BOM the byte order is a guess, so ask for UTF-8.
    """
    for bom, codec in _WIDE_BOMS:
        if head.startswith(bom):
            return codec
    sample = head[:4096]
    if len(sample) >= 4 and sample.count(0) * 4 >= len(sample):
        wide = "UTF-32" if sample.count(0) * 3 >= len(sample) * 2 else "UTF-16"
        wide += "LE" if sample[1::2].count(0) > sample[::2].count(0) else "BE"  # LE: NUL after each ASCII byte
        raise DataError(
            f"{where}: looks like {wide} text without a byte-order mark; docattn reads UTF-8: "
            f"re-encode it (e.g. iconv -f {wide} -t utf-8 FILE > FILE.utf8)"
        )
    return None


def _wide_lines(blocks: Iterable[bytes], codec: str, where: str, limit: int, long_lines: str) -> Iterator[str]:
    """Text lines of UTF-16/32 bytes read in blocks; a line past ``limit`` characters is cut there, the
    rest dropped, or is a DataError, as ``long_lines`` says (see :func:`_decoded_lines`)."""
    pending, dropping, number = "", False, 1
    try:
        for text in codecs.iterdecode(blocks, codec):
            *complete, rest = text.split("\n")
            for part in complete:
                if not dropping:
                    yield pending + part + "\n"
                pending, dropping, number = "", False, number + 1
            if dropping:
                continue
            pending += rest
            if len(pending) > limit:
                if long_lines == "error":
                    raise _long_line(where, number, limit)
                yield pending[:limit]
                pending, dropping = "", True
    except UnicodeDecodeError as error:
        raise DataError(f"{where}: malformed {codec.upper()} text ({error.reason})") from None
    if pending:
        yield pending


def _decode_document(raw: bytes, where: str, errors: str, stats: dict[str, int], cut: bool = False) -> str:
    """A whole file as text: UTF-16/32 with a BOM, else UTF-8 (else as ``errors`` says), BOM stripped.
    ``cut``: ``raw`` stops at a limit, maybe inside a character, which is dropped."""
    codec = _wide_encoding(raw, where)
    if codec is None:
        return _decode_utf8(_whole_utf8(raw) if cut else raw, where, errors, stats).removeprefix("\ufeff")
    try:
        return codecs.getincrementaldecoder(codec)().decode(raw, final=not cut)
    except UnicodeDecodeError as error:
        raise DataError(f"{where}: malformed {codec.upper()} text ({error.reason})") from None


_NOT_UTF8 = re.compile("[\ud800-\udfff]")


def _shown(name: str) -> str:
    """``name`` fit for a label, an id or a JSON file: the bytes of a file or member name that were not UTF-8
    (kept by os and tarfile as surrogate escapes, which no file can hold) read as Latin-1, as they are in a
    document; a folder ``pos\\xff`` gave the class 'pos\\udcff', and training failed writing labels.json."""
    if name.isascii():
        return name
    return _NOT_UTF8.sub(lambda m: chr(ord(m[0]) - 0xDC00) if "\udc80" <= m[0] <= "\udcff" else "\ufffd", name)
