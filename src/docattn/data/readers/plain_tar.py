"""A tar reader for plain archives (files, folders, links, long names), kept because it reads IMDB's 50k small
members clearly faster than :mod:`tarfile`, whose time goes to header parsing (``benchmarks/tar_reader.py``)."""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from docattn.data.readers.archives import SizeCheck, reading_limits


class NotPlainTar(Exception):
    """The archive uses a tar feature the fast reader leaves to :mod:`tarfile`."""


_TAR_OPENERS = {b"\x1f\x8b": gzip.open, b"BZh": bz2.open, b"\xfd7zXZ\x00": lzma.open}


def members(path: Path) -> Iterator[tuple[str, bytes, bytes, str]]:
    """(name, type flag, content, link target) of each member of a ustar/GNU/pax tar, optionally compressed.

    Anything beyond plain files, folders, links, long names and pax paths raises :class:`NotPlainTar`.
    """
    with open(path, "rb") as raw:
        magic = raw.read(6)
        raw.seek(0)
        opener = next((o for m, o in _TAR_OPENERS.items() if magic.startswith(m)), None)
        with opener(raw, "rb") if opener else contextlib.nullcontext(raw) as stream:
            yield from _plain_tar_stream(stream, reading_limits(path, raw.tell))


def _plain_tar_stream(stream: IO, unpacking: SizeCheck) -> Iterator[tuple[str, bytes, bytes, str]]:
    long_name: bytes | None = None
    name = "(first member)"
    while True:
        header = stream.read(512)
        if not header or header == _ZERO_BLOCK:
            return
        if len(header) < 512:
            raise EOFError(f"archive ends inside the header after {name!r}")
        if header[124] & 0x80 or _octal(header[148:156]) != sum(header) - sum(header[148:156]) + 256:
            raise NotPlainTar  # base-256 size or a bad checksum: let tarfile decide
        size, kind = _octal(header[124:136]), header[156:157]
        path = long_name if long_name is not None and kind not in (b"L", b"x", b"g") else _header_path(header)
        this = path.decode("utf-8", "surrogateescape")
        unpacking.before(this, size)
        content = stream.read(size)
        if len(content) < size:
            raise EOFError(f"archive ends inside member {name!r}")
        stream.read(-size % 512)
        unpacking.after(this)
        if kind == b"L":  # GNU long name of the next member
            long_name = content.split(b"\0", 1)[0]
            continue
        if kind == b"x":
            long_name = _pax_path(content) or long_name
            continue
        if kind == b"g":
            continue
        if kind not in (b"0", b"\0", b"7", b"5", b"1", b"2", b"3", b"4", b"6"):
            raise NotPlainTar
        name, long_name = this, None
        yield name, kind, content, header[157:257].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _header_path(header: bytes) -> bytes:
    path = header[:100].split(b"\0", 1)[0]
    if header[257:265] == b"ustar\x0000" and header[345] != 0:  # POSIX prefix field
        path = header[345:500].split(b"\0", 1)[0] + b"/" + path
    return path


_ZERO_BLOCK = bytes(512)


def _octal(raw: bytes) -> int:
    digits = raw.split(b"\0", 1)[0].strip()
    try:
        return int(digits, 8) if digits else 0
    except ValueError:
        raise NotPlainTar from None


def _pax_path(records: bytes) -> bytes | None:
    """The ``path`` of a pax extended header; a pax ``size`` (huge files) is left to tarfile."""
    path, position = None, 0
    while position < len(records):
        space = records.find(b" ", position)
        if space < 0:
            raise NotPlainTar
        length = int(records[position:space]) if records[position:space].isdigit() else 0
        if length <= 0:
            raise NotPlainTar
        key, _, value = records[space + 1 : position + length - 1].partition(b"=")
        if key == b"path":
            path = value
        elif key in (b"size", b"linkpath"):  # a huge file, or a link target past the header's 100 bytes
            raise NotPlainTar
        position += length
    return path
