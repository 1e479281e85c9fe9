"""Standard input: its format told from a look at its start, and every byte still there for the reader."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from contextlib import AbstractContextManager
from typing import Any

from docattn.data.readers.decoding import _wide_encoding

_LOOK = 1 << 16  # bytes looked at to tell the format


def _stdin_format() -> str:
    """What stdin holds, from a look at its start that consumes nothing: "jsonl" when its first
    non-blank line is a JSON object, "fasttext" when it starts with __label__, else "lines"."""
    if sys.stdin is None:
        return "lines"
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is not None and hasattr(buffer, "peek"):
        head = buffer.peek(_LOOK)[:_LOOK]
        if head and not _has_line(head):  # a slow pipe gave part of a line: wait for it, then put it back
            head = buffer.read1(_LOOK)
            while not _has_line(head) and len(head) < _LOOK:
                more = buffer.read1(_LOOK)
                if not more:
                    break
                head += more
            sys.stdin = _put_back(head, sys.stdin)
        codec = _wide_encoding(head, "<stdin>") if head else None
        text = head.decode(codec or "utf-8", "replace")
    elif sys.stdin.seekable():  # a StringIO (tests, notebooks)
        at = sys.stdin.tell()
        text = sys.stdin.read(_LOOK)
        sys.stdin.seek(at)
    else:
        return "lines"
    return _format_of(text)


def _has_line(head: bytes) -> bool:
    return b"\n" in head.lstrip(b"\xef\xbb\xbf \t\r\n")


def _format_of(text: str) -> str:
    text = text.lstrip("\ufeff \t\r\n")
    first, newline, _ = text.partition("\n")
    if first.startswith("__label__"):
        return "fasttext"
    if first.startswith("{"):
        if not newline:  # a line longer than the look: judge by its start
            return "jsonl" if re.match(r'\{\s*"', first) else "lines"
        try:
            return "jsonl" if isinstance(json.loads(first), dict) else "lines"
        except ValueError:
            return "lines"
    return "lines"


def _put_back(head: bytes, stdin: io.TextIOWrapper) -> io.TextIOWrapper:
    """``stdin`` with ``head``, read from it, in front again: whoever reads stdin next gets every byte, and a
    stdin replaced meanwhile never gets them."""
    raw = _Prefixed(head, stdin)
    buffered = io.BufferedReader(raw, buffer_size=max(len(head), io.DEFAULT_BUFFER_SIZE))
    return io.TextIOWrapper(
        buffered,
        encoding=getattr(stdin, "encoding", None),
        errors=getattr(stdin, "errors", None),
        line_buffering=getattr(stdin, "line_buffering", False),
    )


class _Prefixed(io.RawIOBase):
    """``head`` first, then the rest of ``stdin``'s bytes; holding ``stdin`` keeps it open (its
    collection would close the buffer under us)."""

    def __init__(self, head: bytes, stdin: io.TextIOWrapper):
        self.head, self.stdin, self.stream = head, stdin, stdin.buffer

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data, self.head = (self.head[: len(b)], self.head[len(b) :]) if self.head else (self.stream.read1(len(b)), b"")
        b[: len(data)] = data
        return len(data)


def _stdin() -> AbstractContextManager[Any]:
    # the binary buffer lets decoding failures be counted; a test's StringIO has none
    buffer = getattr(sys.stdin, "buffer", None)
    return contextlib.nullcontext(buffer if buffer is not None else sys.stdin)
