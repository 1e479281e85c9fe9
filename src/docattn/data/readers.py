"""Readers for the corpus formats docattn trains on: a path in, :class:`Corpus` splits out.

``read_splits`` returns every split a source holds ("train", "valid", "test"; "all" for a source
without splits), ``read_corpus`` one of them. Formats: csv, tsv, jsonl, zhang (Zhang et al. 2015
CSVs), tang (Tang et al. 2015 ``.ss``), folder (folder-per-label trees, also inside .tar.gz/.zip),
fasttext and lines. Bad input is always a one-line :class:`DataError` naming the file, the line
or archive member, and what was expected.

Memory is bounded by settings, never by the input's size. Each limit is an environment variable,
read whenever a reader runs (the same for the CLI, Python code and tests), else the default below:

- ``DOCATTN_MAX_DOCUMENT_CHARS`` (1,000,000): a longer document is cut there and counted in the
  corpus ``stats["cut_documents"]`` (``stats["first_cut_document"]`` names the first). A line is
  read in blocks: past 8x this many bytes the rest of it is dropped unread; a CSV or JSON record
  that long is refused, since cut short it would read wrong.
- ``DOCATTN_MAX_MEMBER_BYTES`` (256 MiB): an archive member is held in memory whole, so a larger
  one is refused from its header, before it is read (unpack the archive and read the folder).
- ``DOCATTN_MAX_COMPRESSION_RATIO`` (100): members, and archives, over 8 MiB that unpack to more
  than this many times their compressed size are refused unread (text compresses about 3:1, a
  compression bomb about 1000:1). ``docattn data download`` applies it too (see registry.py).
"""

from __future__ import annotations

import bz2
import codecs
import contextlib
import csv
import dataclasses
import gzip
import io
import json
import lzma
import math
import os
import posixpath
import re
import shutil
import stat
import sys
import tarfile
import tempfile
import zipfile
import zlib
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import IO, Any, Callable, ContextManager, Hashable, Iterable, Iterator

from docattn.data.corpus import Corpus
from docattn.data.limits import MAX_COMPRESSION_RATIO, MAX_DOCUMENT_CHARS, MAX_MEMBER_BYTES, RATIO_FLOOR, max_document_chars, setting  # noqa: F401
# MAX_DOCUMENT_CHARS stays readable as readers.MAX_DOCUMENT_CHARS, where the limits were first defined
from docattn.errors import ConfigError, DataError

__all__ = ["FORMATS", "STDIN", "detect_format", "read_corpus", "read_splits", "read_texts"]

FORMATS = ("csv", "tsv", "jsonl", "zhang", "tang", "folder", "fasttext", "lines")
STDIN = "-"

# formats read line by line from one file (or stdin); the rest need a directory or an archive
_LINE_FORMATS = ("csv", "tsv", "jsonl", "zhang", "tang", "fasttext", "lines")
_OPTIONS = {
    "csv": {"text_columns", "label_column", "header", "delimiter"},
    "tsv": {"text_columns", "label_column", "header", "delimiter"},
    "jsonl": {"text_field", "label_field", "sentences_field"},
}
_COMMON_OPTIONS = {"on_empty", "errors", "ignore_labels"}
_DECODE_ERRORS = ("strict", "replace", "latin-1")  # what a line or file that is not UTF-8 becomes
_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),  # UTF-32 first: its LE BOM
              (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))  # starts like UTF-16's
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")
_SPLIT_ORDER = ("train", "valid", "test", "all")
_SPLIT_ALIASES = {"train": "train", "dev": "valid", "valid": "valid", "validation": "valid", "test": "test"}
_IGNORED_FOLDERS = {"unsup"}  # aclImdb's unlabelled reviews
_ZHANG_FILES = {"train.csv": "train", "test.csv": "test", "valid.csv": "valid", "dev.csv": "valid"}
_FASTTEXT_LABELS = re.compile(r"\s*((?:__label__\S*(?:\s+|$))+)")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_SAMPLE_ROWS = 200  # rows looked at to sniff a CSV header

_BLOCK = 1 << 20  # bytes read at a time past a line's limit


# --------------------------------------------------------------------------- public API


def read_splits(path: str | os.PathLike, format: str | None = None, **options: Any) -> dict[str, Corpus]:
    """Every split of ``path``, keyed "train"/"valid"/"test", or {"all": corpus} when it has none.

    Options: ``on_empty`` ("skip": drop empty documents and count them in
    ``stats["skipped_empty"]``; "error"); ``errors``, what text that is not UTF-8 becomes
    ("strict": a DataError naming the line, the default for files read line by line; "latin-1":
    Latin-1 text, the default for folder-per-label documents, each file with its own encoding, e.g.
    20 Newsgroups posts; "replace": U+FFFD; both counted in ``stats["decode_errors"]``); plus per
    format: csv/tsv ``text_columns``, ``label_column``, ``header``, ``delimiter``; jsonl
    ``text_field``, ``label_field``, ``sentences_field``. UTF-16/32 text with a byte-order mark is
    decoded; without one it is a DataError. ``ignore_labels``: labels are not read, and a missing
    or empty one is no error (prediction input); the corpora have ``labels`` None. A document longer
    than $DOCATTN_MAX_DOCUMENT_CHARS is cut, counted in ``stats["cut_documents"]`` (limits: see the
    module docstring).
    """
    return _without_labels(_read(path, format, options, split=None, single=False), options)


def read_corpus(
    path: str | os.PathLike, split: str | None = None, format: str | None = None, **options: Any
) -> Corpus:
    """One split of ``path`` ("-" reads stdin, as "lines" unless ``format`` says otherwise).

    ``split`` may be left out only when the source has a single split; options as in
    :func:`read_splits`.
    """
    splits = _without_labels(_read(path, format, options, split=split, single=True), options)
    return next(iter(splits.values()))


def read_texts(path: str | os.PathLike, format: str | None = None, **options: Any) -> Corpus:
    """Unlabelled text for word vectors: the documents of the training split of ``path`` (all of
    it when the source has no splits), labels ignored.

    Folder trees also give their unlabelled folders (aclImdb's 50,000 reviews in train/unsup).
    A test split is never read, so test text cannot reach the vectors. Options as in
    :func:`read_splits`.
    """
    source = None if str(path) == STDIN else _existing(path)
    if source is not None and (source.is_dir() or _is_archive(source)):
        tree = _open_tree(source)
        if (format or _detect_tree(tree)) == "folder":
            _format_options("folder", options)
            corpus = _read_folder_texts(tree, options.get("on_empty", "skip"), options.get("errors", "latin-1"))
            return _count_skipped_links(tree, {"train": corpus})["train"]
    splits = read_splits(path, format, **options)
    name = "train" if "train" in splits else "all"
    if name not in splits:
        raise DataError(f"{path}: no training split to take text from (splits: {', '.join(splits)})")
    corpus = splits[name]
    corpus.labels = None
    return corpus


def detect_format(path: str | os.PathLike) -> str:
    """The format ``path`` will be read as, from its name, its folder layout or its first line."""
    if str(path) == STDIN:
        return _stdin_format()
    source = _existing(path)
    if source.is_dir() or _is_archive(source):
        return _detect_tree(_open_tree(source, keep_data=False))
    return _detect_file(source)


def _max_chars() -> int:
    return max_document_chars()


def _line_limit() -> int:
    """Bytes of one line read whole: 8 per character of a document leaves room for JSON's \\uXXXX
    escapes and a record's other fields; a line up to 1 MiB is always read whole."""
    return max(8 * _max_chars(), 1 << 20)


# --------------------------------------------------------------------------- dispatch


@dataclass
class _Source:
    """One file to read line by line: its display name, how to open it, and the read options."""

    name: str
    open: Callable[[], ContextManager[Any]]
    options: dict[str, Any]
    classes: list[str] | None = None  # Zhang classes.txt, when present
    classes_name: str = ""


def _read(path: str | os.PathLike, format: str | None, options: dict[str, Any], split: str | None,
          single: bool) -> dict[str, Corpus]:
    if format is not None and format not in FORMATS:
        raise ConfigError(f"unknown format {format!r}; formats: {', '.join(FORMATS)}")
    on_empty = options.get("on_empty", "skip")
    if on_empty not in ("skip", "error"):
        raise ConfigError(f"on_empty must be 'skip' or 'error', not {on_empty!r}")
    if options.get("errors", "strict") not in _DECODE_ERRORS:
        raise ConfigError(f"errors must be one of {', '.join(_DECODE_ERRORS)}, not {options['errors']!r}")

    if str(path) == STDIN:
        format = format or _stdin_format()
        if format not in _LINE_FORMATS:
            raise DataError(f"stdin: format {format!r} needs a directory or an archive; stdin reads "
                            f"{', '.join(_LINE_FORMATS)}")
        options = _format_options(format, options)
        _select_splits(["all"], split, single, "<stdin>")
        return {"all": _READERS[format](_Source("<stdin>", _stdin, options))}

    source = _existing(path)
    if source.is_dir() and (source / "config.json").is_file() and (source / "vocab.json").is_file():
        raise DataError(f"{source} is a docattn run directory (a trained model), not data; "
                        "give the documents to read (a file, folder, archive or data set name)")
    if source.is_dir() or _is_archive(source):
        tree = _open_tree(source)
        format = format or _detect_tree(tree)
        options = _format_options(format, options)
        if format == "folder":
            return _count_skipped_links(tree, _read_folder(tree, split, single, on_empty, options.get("errors", "latin-1")))
        if format == "zhang":
            sources = _zhang_sources(tree, options)
        elif format == "tang":
            sources = _tang_sources(tree, options)
        else:
            raise DataError(f"{source}: format {format!r} reads one file, not a directory or an archive")
    else:
        format = format or _detect_file(source)
        options = _format_options(format, options)
        if format == "folder":
            raise DataError(f"{source}: format 'folder' reads a directory or a .tar.gz/.tgz/.tar/.zip archive")
        file_source = _Source(str(source), lambda: open(source, "rb"), options)
        if format == "zhang":
            classes_file = source.parent / "classes.txt"
            if classes_file.is_file():
                file_source.classes = _read_classes(_read_bytes(classes_file, _CLASSES_BYTES + 1), str(classes_file))
                file_source.classes_name = str(classes_file)
        sources = {"all": file_source}

    return {name: _READERS[format](sources[name]) for name in _select_splits(sources, split, single, source)}


def _count_skipped_links(tree: "_Tree", splits: dict[str, Corpus]) -> dict[str, Corpus]:
    """Links whose target the archive lacks are not read; ``stats["skipped_links"]`` says how many, so it is not silent."""
    if tree.skipped_links:
        for corpus in splits.values():
            corpus.stats["skipped_links"] = len(tree.skipped_links)
    return splits


def _without_labels(splits: dict[str, Corpus], options: dict[str, Any]) -> dict[str, Corpus]:
    """With ``ignore_labels`` every corpus loses its labels: csv/jsonl skip them while reading (so a missing
    one is no error), the formats whose label is part of the line or path (zhang, tang, fasttext, folder) here."""
    if options.get("ignore_labels"):
        for corpus in splits.values():
            corpus.labels, corpus.classes = None, None
    return splits


def _existing(path: str | os.PathLike) -> Path:
    source = Path(path)
    try:
        mode = source.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise DataError(f"{source}: no such file or directory") from None
    except OSError as error:
        raise DataError(f"cannot read {source}: {error.strerror or error}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        # reading a device or pipe never ends (/dev/zero), waits for a writer (a FIFO) or reads nothing (/dev/null)
        kind = next((k for test, k in _SPECIAL_FILES if test(mode)), "a special file")
        raise DataError(f"{source}: not a regular file or folder ({kind}); give a file or folder of documents")
    return source


_SPECIAL_FILES = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                  (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"))


def _format_options(format: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` checked against what ``format`` takes; the CLI's --text-col/--label-col
    (``text_columns``/``label_column``) name a JSONL file's fields."""
    if format == "jsonl" and ({"text_columns", "label_column"} & set(options)):
        options = dict(options)
        columns = options.pop("text_columns", None)
        if columns is not None:
            if len(columns) != 1 or "text_field" in options:
                raise ConfigError(f"format 'jsonl' reads one text field; got text columns {columns}"
                                  + (f" and text_field={options['text_field']!r}" if "text_field" in options else ""))
            options["text_field"] = str(columns[0])
        if "label_column" in options:
            label = options.pop("label_column")
            if "label_field" in options:
                raise ConfigError(f"give a JSONL label field once: label_column={label!r} and label_field={options['label_field']!r}")
            options["label_field"] = str(label)
    allowed = _OPTIONS.get(format, set()) | _COMMON_OPTIONS
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigError(f"option(s) {', '.join(unknown)} do not apply to format {format!r} "
                          f"(it takes: {', '.join(sorted(allowed))})")
    return options


def _select_splits(available: Iterable[str], split: str | None, single: bool, path: Any) -> list[str]:
    available = list(available)
    if split is not None:
        wanted = _split_name(split) or split
        if wanted not in available:
            raise DataError(f"{path} has no split {split!r} (splits: {', '.join(available)})")
        return [wanted]
    if single and len(available) > 1:
        raise DataError(f"{path} holds several splits ({', '.join(available)}); pass split= to pick one")
    return available


def _split_name(folder: str) -> str | None:
    """The split a folder or file stem names: train/test/dev/valid, or a -train/-test suffix."""
    name = folder.lower()
    if name in _SPLIT_ALIASES:
        return _SPLIT_ALIASES[name]
    suffix = name.rsplit("-", 1)[-1] if "-" in name else ""
    return _SPLIT_ALIASES.get(suffix)


def _ordered_splits(names: Iterable[str]) -> list[str]:
    return sorted(set(names), key=lambda s: (_SPLIT_ORDER.index(s) if s in _SPLIT_ORDER else len(_SPLIT_ORDER), s))


# --------------------------------------------------------------------------- detection


def _is_archive(path: Path) -> bool:
    return path.is_file() and path.name.lower().endswith(_ARCHIVE_SUFFIXES)


def _detect_file(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "zhang" if (path.parent / "classes.txt").is_file() else "csv"
    if suffix == ".tsv":
        return "tsv"
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix == ".ss":
        return "tang"
    first = _first_nonempty_line(path)
    if first.startswith("__label__"):
        return "fasttext"
    if suffix in (".txt", ".ft"):
        return "lines"
    raise DataError(f"{path}: cannot tell the format from the name; use .csv, .tsv, .jsonl, .ss, .txt, "
                    f"a directory or an archive, or pass format= (one of {', '.join(FORMATS)})")


def _first_nonempty_line(path: Path) -> str:
    try:
        with open(path, "rb") as stream:
            for line in islice(_decoded_lines(stream, str(path), "replace", {"decode_errors": 0}), 1000):
                if line.strip():
                    return line.strip()
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror or error}") from None
    return ""


def _detect_tree(tree: _Tree) -> str:
    folders_with_classes = {posixpath.dirname(p) for p in tree.paths if posixpath.basename(p) == "classes.txt"}
    if any(posixpath.dirname(p) in folders_with_classes and p.endswith(".csv") for p in tree.paths):
        return "zhang"
    names = {}
    for p in tree.paths:
        names.setdefault(posixpath.dirname(p), set()).add(posixpath.basename(p))
    if any({"train.csv", "test.csv"} <= files for files in names.values()):  # Zhang's Yelp and Amazon: no classes.txt
        return "zhang"
    if any(p.endswith(".ss") for p in tree.paths):
        return "tang"
    return "folder"


# --------------------------------------------------------------------------- text hygiene


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
    return DataError(f"{name}:{number}: a record longer than {limit:,} bytes (8 x DOCATTN_MAX_DOCUMENT_CHARS, "
                     f"now {_max_chars():,}), which cut short would read wrong; raise DOCATTN_MAX_DOCUMENT_CHARS "
                     "or shorten the document")


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
            raise DataError(f"{where}: not UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start}); "
                            "re-encode the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE > FILE.utf8) "
                            "or, from Python, read it with errors='latin-1' or errors='replace'") from None
        stats["decode_errors"] += 1
        return raw.decode("latin-1") if errors == "latin-1" else raw.decode("utf-8", "replace")


def _wide_encoding(head: bytes, where: str) -> str | None:
    """"utf-16"/"utf-32" when ``head`` starts with their BOM; UTF-16/32 without one is a DataError.

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
        raise DataError(f"{where}: looks like {wide} text without a byte-order mark; docattn reads UTF-8: "
                        f"re-encode it (e.g. iconv -f {wide} -t utf-8 FILE > FILE.utf8)")
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


def _source_lines(stream: IO, source: _Source, stats: dict[str, int], long_lines: str = "cut") -> Iterator[str]:
    return _decoded_lines(stream, source.name, source.options.get("errors", "strict"), stats, long_lines)


def _numbered_lines(source: _Source, stats: dict[str, int], long_lines: str = "cut") -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its line end); ``long_lines`` as in :func:`_decoded_lines`."""
    with _opened(source) as stream:
        for number, line in enumerate(_source_lines(stream, source, stats, long_lines), 1):
            yield number, line.rstrip("\r\n")


@contextlib.contextmanager
def _opened(source: _Source) -> Iterator[Any]:
    try:
        handle = source.open()
    except OSError as error:
        raise DataError(f"cannot read {source.name}: {error.strerror or error}") from None
    with handle as stream:
        yield stream


def _stdin_format() -> str:
    """What stdin holds, from a look at its start that consumes nothing: "jsonl" when its first
    non-blank line is a JSON object, "fasttext" when it starts with __label__, else "lines"."""
    global _STDIN_HEAD
    if sys.stdin is None:
        return "lines"
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is not None and hasattr(buffer, "peek"):
        held = _STDIN_HEAD[1] if _STDIN_HEAD and _STDIN_HEAD[0] is buffer else b""
        head = held or buffer.peek(1 << 16)[: 1 << 16]
        if head and not held and b"\n" not in head.lstrip(b"\xef\xbb\xbf \t\r\n"):  # a slow pipe gave part of a line: wait for it
            head = buffer.read1(1 << 16)
            while b"\n" not in head.lstrip(b"\xef\xbb\xbf \t\r\n") and len(head) < 1 << 16:
                more = buffer.read1(1 << 16)
                if not more:
                    break
                head += more
            _STDIN_HEAD = (buffer, head)  # handed back to the reader of this same stdin first by _stdin()
        codec = _wide_encoding(head, "<stdin>") if head else None
        text = head.decode(codec or "utf-8", "replace")
    elif sys.stdin.seekable():  # a StringIO (tests, notebooks)
        at = sys.stdin.tell()
        text = sys.stdin.read(1 << 16)
        sys.stdin.seek(at)
    else:
        return "lines"
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


_STDIN_HEAD: tuple | None = None  # (stdin's buffer, the bytes _stdin_format had to read from it), not yet given to a reader


class _Prefixed(io.RawIOBase):
    """``head`` first, then the rest of ``stream``: stdin with what the format sniffing read put back."""

    def __init__(self, head: bytes, stream):
        self.head, self.stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data, self.head = (self.head[: len(b)], self.head[len(b):]) if self.head else (self.stream.read1(len(b)), b"")
        b[: len(data)] = data
        return len(data)


def _stdin() -> ContextManager[Any]:
    # the binary buffer lets decoding failures be counted; a test's StringIO has none
    global _STDIN_HEAD
    held, _STDIN_HEAD = _STDIN_HEAD, None
    buffer = getattr(sys.stdin, "buffer", None)
    if held and held[0] is buffer:  # the same stdin: what the sniffing read comes first
        return contextlib.nullcontext(io.BufferedReader(_Prefixed(held[1], buffer)))
    return contextlib.nullcontext(buffer if buffer is not None else sys.stdin)


def _read_bytes(path: Path, limit: int = -1) -> bytes:
    """The file's bytes, at most ``limit`` of them (-1: all)."""
    try:
        with _open_file(path) as file:
            return file.read(limit)
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror or error}") from None


def _open_file(path: Path) -> IO[bytes]:
    """``path`` opened to read, when it is a regular file: a named pipe in a data folder waited for a writer
    forever, and a device gave its bytes (all of /dev/zero up to the length limit) as a document."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        kind = next((k for test, k in _SPECIAL_FILES if test(mode)), "a special file")
        raise DataError(f"{path}: not a regular file ({kind}); take it out of the data folder")
    return open(path, "rb")


# --------------------------------------------------------------------------- documents


class _Documents:
    """One split's documents as they are read, applying the empty-document policy."""

    def __init__(self, source: str, on_empty: str):
        self.source = source
        self.on_empty = on_empty
        self.texts: list[str] = []
        self.labels: list[Hashable] = []
        self.sentences: list[list[str] | None] = []
        self.rationales: list[Any] = []
        self.ids: list[str] = []
        self.stats = {"skipped_empty": 0, "decode_errors": 0}
        self.max_chars = _max_chars()

    def add(self, where: str, doc_id: str, text: str, label: Hashable = None,
            sentences: list[str] | None = None, rationale: Any = None, cut: bool = False) -> None:
        """``cut``: the reader already cut the text short (a file read up to a limit)."""
        if cut or len(text) > self.max_chars:
            text = text[: self.max_chars]
            if sentences is not None:
                sentences = _cut_sentences(sentences, self.max_chars)
            self.stats["cut_documents"] = self.stats.get("cut_documents", 0) + 1
            self.stats.setdefault("first_cut_document", _shown(where))
        if not text or text.isspace():
            if self.on_empty == "error":
                raise DataError(f"{where}: empty document (pass on_empty='skip' to drop empty documents)")
            self.stats["skipped_empty"] += 1
            return
        self.texts.append(text)
        self.labels.append(label)
        self.sentences.append(sentences)
        self.rationales.append(rationale)
        self.ids.append(doc_id)

    def corpus(self, labeled: bool, classes: list[Hashable] | None = None, hint: str = "") -> Corpus:
        if not self.texts:
            raise DataError(f"no documents in {self.source}{hint}")
        # documents given as sentences keep them even beside documents given as text (None: the splitter's job)
        has_sentences = any(s is not None for s in self.sentences)
        has_rationales = all(r is not None for r in self.rationales)
        return Corpus(
            texts=self.texts,
            labels=self.labels if labeled else None,
            sentences=self.sentences if has_sentences else None,
            ids=self.ids,
            source=self.source,
            classes=classes,
            stats=self.stats,
            rationales=self.rationales if has_rationales else None,
        )


def _cut_sentences(sentences: list[str], limit: int) -> list[str]:
    """The sentences that fit in ``limit`` characters joined by "\\n", the last one cut to fit."""
    kept = []
    for sentence in sentences:
        if limit <= 0:
            break
        kept.append(sentence[:limit])
        limit -= len(sentence) + 1
    return kept


def _missing_label(where: str, what: str) -> DataError:
    return DataError(f"{where}: missing or empty label ({what})")


# --------------------------------------------------------------------------- csv / tsv


def _read_csv(source: _Source) -> Corpus:
    return _read_delimited(source, ",")


def _read_tsv(source: _Source) -> Corpus:
    """Tab-separated values, quoted as a CSV writer quotes them (pandas) or not at all (GLUE, most
    tools): a file that does not parse as quoted, a text field starting with a bare quote say, is
    read again with quotes as ordinary characters. A quoted field holding both a line break and a
    tab reads as CSV quoting says, one field, but is counted (``stats["quoted_tab_breaks"]``, with the
    first one's lines): a bare opening quote whose partner happened to sit before a tab looks the
    same, and merges the records between them, so it is said, never silent."""
    if source.open is _stdin:  # read twice at most, so keep what stdin gave, on disk past 16 MiB
        with _opened(source) as stream:
            kept = tempfile.SpooledTemporaryFile(16 << 20, mode="w+" if isinstance(stream, io.TextIOBase) else "w+b")
            shutil.copyfileobj(stream, kept, _BLOCK)

        def reopen() -> ContextManager[Any]:
            kept.seek(0)
            return contextlib.nullcontext(kept)

        source = dataclasses.replace(source, open=reopen)
    try:
        return _read_delimited(source, "\t")
    except _QuotingError:
        return _read_delimited(source, "\t", quoted=False)


class _QuotingError(DataError):
    """A record the csv module could not parse with quotes."""


def _read_delimited(source: _Source, default_delimiter: str, quoted: bool = True) -> Corpus:
    """Chosen text column(s) and a label column, by header name or 0-based index."""
    options = source.options
    delimiter = options.get("delimiter") or default_delimiter
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ConfigError(f"delimiter must be one character, not {delimiter!r}")
    header = options.get("header")
    if header not in (True, False, None):
        raise ConfigError(f"header must be True, False or None (sniff), not {header!r}")
    text_columns = options.get("text_columns")
    if text_columns is not None and not isinstance(text_columns, (list, tuple)):
        text_columns = [text_columns]
    label_column = options.get("label_column")

    docs = _Documents(source.name, options.get("on_empty", "skip"))
    with _opened(source) as stream:
        rows = _csv_rows(_source_lines(stream, source, docs.stats, "error"), source.name, delimiter, quoted,
                         docs.stats if quoted and delimiter == "\t" else None)
        sample = list(islice(rows, _SAMPLE_ROWS))
        if not sample:
            raise DataError(f"no documents in {source.name}")
        columns = _resolve_columns(sample, list(text_columns or []), label_column, header, source.name, delimiter)
        text_index, label_index, has_header = columns
        if options.get("ignore_labels"):
            label_index = None
        width = max(text_index + ([label_index] if label_index is not None else [])) + 1
        for line, row in chain(sample[1:] if has_header else sample, rows):
            where = f"{source.name}:{line}"
            if len(row) < width:
                raise DataError(f"{where}: expected at least {width} fields, found {len(row)}")
            label = None
            if label_index is not None:
                label = row[label_index].strip()
                if not label:
                    raise _missing_label(where, f"column {label_index}")
            text = "\n".join(part for part in (row[i] for i in text_index) if part and not part.isspace())
            docs.add(where, str(line), text, label)
    if label_index is not None:
        docs.labels = _integer_labels(docs.labels)
    return docs.corpus(labeled=label_index is not None)


def _integer_labels(labels: list[str]) -> list:
    """Labels as ints when every one is an integer, so ratings sort 1, 2, ..., 10 rather than 1, 10, 2;
    kept as written when two spellings would become one number ("01" and "1")."""
    if not all(_INTEGER.fullmatch(label) for label in labels):
        return labels
    spellings = {}
    for label in set(labels):
        spellings.setdefault(int(label), set()).add(label)
    if any(len(s) > 1 for s in spellings.values()):
        return labels
    return [int(label) for label in labels]


def _csv_rows(lines: Iterator[str], source: str, delimiter: str, quoted: bool = True,
              stats: dict | None = None) -> Iterator[tuple[int, list[str]]]:
    """(first line number, fields) of each non-blank record; quoting errors name the line. With
    ``stats``, records whose quoted field holds a line break and the delimiter are counted there."""
    limit = _line_limit()  # documents are longer than the 128 KiB default; an unclosed quote must not take the file
    csv.field_size_limit(limit)
    if quoted:
        reader = csv.reader(lines, delimiter=delimiter, strict=True)
    else:
        reader = csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            if "field larger than field limit" in str(error):
                raise _QuotingError(f"{source}:{start}: a field longer than {limit:,} characters (8 x "
                                    f"DOCATTN_MAX_DOCUMENT_CHARS), or a quote that never closes; raise "
                                    "DOCATTN_MAX_DOCUMENT_CHARS if the document is that long") from None
            raise _QuotingError(f"{source}:{start}: malformed CSV record ({error})") from None
        if stats is not None and reader.line_num > start and any(_spans_records(f, delimiter) for f in row):
            stats["quoted_tab_breaks"] = stats.get("quoted_tab_breaks", 0) + 1
            stats.setdefault("first_quoted_tab_break", f"{source}:{start}-{reader.line_num}")
        if row:
            yield start, row


def _spans_records(field: str, delimiter: str) -> bool:
    """Whether a field holds a line break and the delimiter: maybe records swallowed by a quote."""
    return "\n" in field and delimiter in field


def _resolve_columns(sample: list[tuple[int, list[str]]], text_columns: list[Any], label_column: Any,
                     header: bool | None, source: str, delimiter: str) -> tuple[list[int], int | None, bool]:
    """Column indexes of the text(s) and the label, and whether the first row is a header."""
    line, first = sample[0]
    named = [c for c in [*text_columns, label_column] if isinstance(c, str)]
    if header is False and named:
        raise ConfigError(f"{source}: columns {named} are names, but header=False; use 0-based indexes")
    if header is None:
        if named:
            header = True
        elif not text_columns:
            header = bool({"text", "label"} & {cell.strip() for cell in first})
        else:
            header = _looks_like_header(sample, label_column, delimiter)
    names = [cell.strip() for cell in first] if header else None
    if not text_columns:
        if names is None:
            preview = ", ".join(repr(cell[:20]) for cell in first[:6])
            raise DataError(f"{source}:{line}: no header row with a 'text' column (first row: {preview}); "
                            "pass text_columns= and label_column= (names or 0-based indexes; "
                            "on the command line --text-col and --label-col)")
        text_columns = ["text"]
        if label_column is None and "label" in names:
            label_column = "label"

    def index(column: Any) -> int:
        if isinstance(column, str):
            if column not in names:  # type: ignore[operator]
                raise DataError(f"{source}:{line}: no column {column!r} in the header "
                                f"(columns: {', '.join(names)})")  # type: ignore[arg-type]
            return names.index(column)  # type: ignore[union-attr]
        if isinstance(column, bool) or not isinstance(column, int) or column < 0:
            raise ConfigError(f"a column is a header name or a 0-based index, not {column!r}")
        if names is not None and column >= len(names):
            raise DataError(f"{source}:{line}: column {column} out of range: the header has {len(names)} "
                            f"columns ({', '.join(names)})")
        return column

    text_index = [index(c) for c in text_columns]
    label_index = None if label_column is None else index(label_column)
    return text_index, label_index, bool(header)


def _looks_like_header(sample: list[tuple[int, list[str]]], label_column: Any, delimiter: str) -> bool:
    """Sniff a header row: its label cell is unlike the labels below it, else csv.Sniffer decides."""
    first, rest = sample[0][1], [row for _, row in sample[1:]]
    if isinstance(label_column, int) and rest:
        head = first[label_column].strip() if len(first) > label_column else ""
        labels = [row[label_column].strip() for row in rest if len(row) > label_column]
        if labels and all(_INTEGER.fullmatch(v) for v in labels):
            return not _INTEGER.fullmatch(head)
        if head in labels:
            return False
        if len(set(labels)) < len(labels):  # labels repeat below, the first cell never: a column name
            return True
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter).writerows([first, *rest[:20]])
    try:
        return csv.Sniffer().has_header(buffer.getvalue())
    except csv.Error:
        return False


# --------------------------------------------------------------------------- jsonl


def _read_jsonl(source: _Source) -> Corpus:
    """One JSON object per line; label values keep their JSON types; the text is a string or a list of
    sentences; an "id" field (string or number) is the document's id, else its line number."""
    options = source.options
    text_field = options.get("text_field") or "text"
    label_field = options.get("label_field")
    label_required = label_field is not None  # the default "label" may be absent: unlabelled input
    label_field = label_field or "label"
    sentences_field = options.get("sentences_field") or "sentences"
    docs = _Documents(source.name, options.get("on_empty", "skip"))
    first_unlabeled, any_labeled = None, False
    for line, raw in _numbered_lines(source, docs.stats, "error"):
        if not raw.strip():
            continue
        where = f"{source.name}:{line}"
        try:
            record = json.loads(raw, strict=False)
        except json.JSONDecodeError as error:
            raise DataError(f"{where}: malformed JSON ({error.msg} at column {error.colno}); "
                            "expected one JSON object per line") from None
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected a JSON object per line, found {type(record).__name__}")
        sentences = _json_sentences(record, sentences_field, where)
        if text_field in record and isinstance(record[text_field], list):  # a list of sentences, as fit() takes them
            listed = _json_sentences(record, text_field, where)
            sentences = listed if sentences is None else sentences
            text = "\n".join(listed)
        elif text_field in record:
            text = record[text_field]
            if not isinstance(text, str):
                raise DataError(f"{where}: field {text_field!r} must be a string or a list of sentences, "
                                f"found {type(text).__name__}")
            text = _clean(text)
        elif sentences is not None:
            text = "\n".join(sentences)
        else:
            raise DataError(f"{where}: no field {text_field!r} (fields: {', '.join(map(str, record))}); "
                            "pass text_field= (on the command line --text-col)")
        label = record.get(label_field)
        if options.get("ignore_labels"):
            label = None
        elif label_field in record:
            any_labeled = True
            if isinstance(label, str):
                label = label.strip()
            if label is None or label == "":
                raise _missing_label(where, f"field {label_field!r}")
            if isinstance(label, float) and not math.isfinite(label):  # json reads NaN: equal to no label, not even itself
                spelling = "NaN" if label != label else "Infinity" if label > 0 else "-Infinity"
                raise DataError(f"{where}: label {spelling} in field {label_field!r} is no class; "
                                "labels must be strings or integers")
            if not isinstance(label, Hashable):
                raise DataError(f"{where}: label must be a string or a number, found {type(label).__name__}")
        elif label_required:
            raise DataError(f"{where}: no field {label_field!r} (fields: {', '.join(map(str, record))}); "
                            "pass label_field= (on the command line --label-col)")
        elif first_unlabeled is None:
            first_unlabeled = where
        doc_id = record.get("id")  # the document's own id, which predict writes back; else its line number
        if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool) or doc_id == "":
            doc_id = line
        docs.add(where, str(doc_id), text, label, sentences, record.get("rationale"))
    if any_labeled and first_unlabeled is not None:
        raise _missing_label(first_unlabeled, f"field {label_field!r}, present on other lines")
    return docs.corpus(labeled=any_labeled or label_required)


def _json_sentences(record: dict, field_name: str, where: str) -> list[str] | None:
    value = record.get(field_name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise DataError(f"{where}: field {field_name!r} must be a list of strings")
    return [stripped for s in value if (stripped := _clean(s).strip())]


# --------------------------------------------------------------------------- zhang / tang


def _read_zhang(source: _Source) -> Corpus:
    """Zhang et al. 2015: "class","title","text" (more text columns for Yahoo), classes 1-based."""
    docs = _Documents(source.name, source.options.get("on_empty", "skip"))
    classes = source.classes
    with _opened(source) as stream:
        for line, row in _csv_rows(_source_lines(stream, source, docs.stats, "error"), source.name, ","):
            where = f"{source.name}:{line}"
            if len(row) < 2:
                raise DataError(f"{where}: expected a class and at least one text field, found {len(row)} field(s)")
            class_id = row[0].strip()
            if not class_id:
                raise _missing_label(where, "the class column")
            if not _INTEGER.fullmatch(class_id):
                raise DataError(f"{where}: expected a 1-based class number in the first column, found {class_id!r}")
            label: Hashable = int(class_id)
            if classes is not None:
                if not 1 <= int(class_id) <= len(classes):
                    raise DataError(f"{where}: class {class_id} is outside 1-{len(classes)} "
                                    f"({source.classes_name} lists {len(classes)} classes)")
                label = classes[int(class_id) - 1]
            parts = _zhang_unescape(row[1:])
            # a blank line between title, description (and answer): each field is its own sentence
            text = "\n\n".join(part for part in parts if part and not part.isspace())
            docs.add(where, str(line), text, label)
    return docs.corpus(labeled=True, classes=list(classes) if classes is not None else None)


_NOT_A_NEWLINE_ESCAPE = re.compile(r"\\(?!n)")
_BACKSLASH_RUN = re.compile(r"\\+")


def _zhang_unescape(fields: list[str]) -> list[str]:
    """Line breaks in Zhang et al.'s CSVs: "\\n" in Yelp, Yahoo and Amazon, but runs of backslashes in
    AG News ("worm\\Sasser", "results.\\\\Using"), where "social\\network" is a break before "network".
    A record with any backslash that is no "\\n" is read the AG way: each run of them is a break."""
    if any(_NOT_A_NEWLINE_ESCAPE.search(f) for f in fields):
        return [_BACKSLASH_RUN.sub("\n", f) for f in fields]
    return [f.replace("\\n", "\n") for f in fields]


_CLASSES_BYTES = 1 << 20  # a classes.txt names a few dozen classes


def _read_classes(data: bytes, where: str) -> list[str]:
    if len(data) > _CLASSES_BYTES:
        raise DataError(f"{where}: over {_CLASSES_BYTES:,} bytes; expected one class name per line")
    names = [line.strip() for line in _clean(_decode_document(data, where, "strict", {})).splitlines() if line.strip()]
    if not names:
        raise DataError(f"{where}: no class names (expected one per line)")
    if len(set(names)) != len(names):
        raise DataError(f"{where}: duplicate class names in {names}")
    return names


def _read_tang(source: _Source) -> Corpus:
    """Tang et al. 2015 ``user\\t\\tproduct\\t\\trating\\t\\ttext``, sentences split by <sssss>."""
    docs = _Documents(source.name, source.options.get("on_empty", "skip"))
    for line, raw in _numbered_lines(source, docs.stats):
        if not raw.strip():
            continue
        where = f"{source.name}:{line}"
        fields = raw.split("\t\t", 3)
        if len(fields) < 4:
            raise DataError(f"{where}: expected 4 fields separated by two tabs (user, product, rating, text), "
                            f"found {len(fields)}")
        rating = fields[2].strip()
        if not rating:
            raise _missing_label(where, "the rating field")
        if not _INTEGER.fullmatch(rating):
            raise DataError(f"{where}: expected an integer rating in the third field, found {rating!r}")
        sentences = [s for part in fields[3].split("<sssss>") if (s := part.strip())]
        docs.add(where, str(line), "\n".join(sentences), int(rating), sentences)
    return docs.corpus(labeled=True)


# --------------------------------------------------------------------------- fasttext / lines


def _read_fasttext(source: _Source) -> Corpus:
    """``__label__x text``: the first label prefix is the label, further prefixes are dropped."""
    docs = _Documents(source.name, source.options.get("on_empty", "skip"))
    for line, raw in _numbered_lines(source, docs.stats):
        if not raw.strip():
            continue
        where = f"{source.name}:{line}"
        match = _FASTTEXT_LABELS.match(raw)
        if match is None:
            raise DataError(f"{where}: expected the line to start with __label__<label>, found {raw[:40]!r}")
        label = match.group(1).split()[0][len("__label__"):]
        if not label:
            raise _missing_label(where, "nothing after __label__")
        docs.add(where, str(line), raw[match.end():], label)
    docs.labels = _integer_labels(docs.labels)
    return docs.corpus(labeled=True)


def _read_lines(source: _Source) -> Corpus:
    """One unlabelled document per line (prediction input); ids are the line numbers."""
    docs = _Documents(source.name, source.options.get("on_empty", "skip"))
    for line, raw in _numbered_lines(source, docs.stats):
        docs.add(f"{source.name}:{line}", str(line), raw)
    return docs.corpus(labeled=False)


_READERS: dict[str, Callable[[_Source], Corpus]] = {
    "csv": _read_csv,
    "tsv": _read_tsv,
    "jsonl": _read_jsonl,
    "zhang": _read_zhang,
    "tang": _read_tang,
    "fasttext": _read_fasttext,
    "lines": _read_lines,
}


# --------------------------------------------------------------------------- trees: directories and archives


@dataclass
class _Tree:
    """Files of a directory or an archive by relative POSIX path; archive contents are held in memory."""

    name: str
    paths: list[str]
    folders: set[str] = field(default_factory=set)
    root: Path | None = None  # a directory: files are read on demand
    data: dict[str, bytes] = field(default_factory=dict)  # an archive: read in one pass
    skipped_links: list[str] = field(default_factory=list)  # archive links whose target is not in it: "name -> target"

    def read(self, member: str, limit: int = -1) -> bytes:
        """The member's bytes: on disk at most ``limit`` of them; from an archive all (already in memory)."""
        return _read_bytes(self.root / member, limit) if self.root is not None else self.data[member]

    def opener(self, member: str) -> Callable[[], ContextManager[Any]]:
        if self.root is not None:
            path = self.root / member
            return lambda: _open_file(path)
        return lambda: io.BytesIO(self.data[member])

    def where(self, member: str) -> str:
        return str(self.root / member) if self.root is not None else f"{self.name}:{member}"


def _member_path(name: str) -> str | None:
    """Normalised member path, or None for hidden files and macOS resource forks."""
    parts = [p for p in name.replace("\\", "/").split("/") if p and p != "."]
    if not parts or any(p.startswith(".") or p == "__MACOSX" for p in parts):
        return None
    return _shown("/".join(parts))


_NOT_UTF8 = re.compile("[\ud800-\udfff]")


def _shown(name: str) -> str:
    """``name`` fit for a label, an id or a JSON file: the bytes of a file or member name that were not UTF-8
    (kept by os and tarfile as surrogate escapes, which no file can hold) read as Latin-1, as they are in a
    document; a folder ``pos\\xff`` gave the class 'pos\\udcff', and training failed writing labels.json."""
    if name.isascii():
        return name
    return _NOT_UTF8.sub(lambda m: chr(ord(m[0]) - 0xDC00) if "\udc80" <= m[0] <= "\udcff" else "\ufffd", name)


def _open_tree(path: Path, keep_data: bool = True) -> _Tree:
    return _directory_tree(path) if path.is_dir() else _archive_tree(path, keep_data)


def walk(root: str | os.PathLike) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk`` that follows symbolic links to folders outside ``root`` (data often lives elsewhere:
    train/pos -> /scratch/pos), once per route and never into a folder already on the way down. A link
    to a folder inside ``root`` is not followed: its documents are read where they are, not a second
    time under another label. Prune ``subfolders`` in place as with os.walk."""
    top = os.path.realpath(root)
    chains = {os.fspath(root): frozenset([top])}  # real folders on the way down to each folder
    for folder, subfolders, files in os.walk(root, followlinks=True):
        chain = chains.pop(folder, frozenset())
        kept = []
        for d in subfolders:
            full = os.path.join(folder, d)
            real = os.path.realpath(full)
            inside = real == top or real.startswith(top.rstrip(os.sep) + os.sep)
            if real not in chain and not (inside and os.path.islink(full)):
                kept.append(d)
                chains[full] = chain | {real}
        subfolders[:] = kept
        yield folder, subfolders, files


def _directory_tree(root: Path) -> _Tree:
    """Files under ``root``, linked folders included (``walk``), hidden ones left out."""
    paths, folders = [], set()
    for folder, subfolders, files in walk(root):
        subfolders[:] = sorted(d for d in subfolders if _member_path(d) is not None)
        relative = Path(folder).relative_to(root).as_posix()
        prefix = "" if relative == "." else relative + "/"
        folders.update(prefix + d for d in subfolders)
        paths.extend(prefix + f for f in sorted(files) if _member_path(f) is not None)
    return _Tree(str(root), paths, folders, root=root)


def _archive_tree(path: Path, keep_data: bool = True) -> _Tree:
    """Every regular file of a tar or zip archive, read in one sequential pass in archive order;
    hard and symbolic links to files or folders inside the archive read as their targets."""
    data: dict[str, bytes] = {}
    folders: set[str] = set()
    links: dict[str, str] = {}
    member = "(first member)"
    try:
        if path.name.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                # the central directory gives every size before anything is read; reading stops at them
                unpacking = _Unpacking(path)
                for info in archive.infolist():
                    if _member_path(info.filename) is not None and not info.is_dir():
                        unpacking.before(info.filename, info.file_size, info.compress_size)
                for info in archive.infolist():
                    member = info.filename
                    name = _member_path(info.filename)
                    if name is None:
                        continue
                    if info.is_dir():
                        folders.add(name)
                    elif (info.external_attr >> 16) & 0o170000 == 0o120000:  # a symbolic link: its target is the content
                        links[name] = _link_target(name, archive.read(info).decode("utf-8", "replace"), symbolic=True)
                    else:
                        data[name] = archive.read(info) if keep_data else b""
        else:
            try:
                for member, kind, content, target in _plain_tar_members(path):
                    _add_tar_member(member, kind, content, target, data, folders, links, keep_data)
            except _NotPlainTar:  # pax sizes, sparse files, base-256 numbers: tarfile's job
                data.clear()
                folders.clear()
                links.clear()
                # stream mode: one pass, no seeking
                with open(path, "rb") as raw, tarfile.open(fileobj=raw, mode="r|*") as archive:
                    unpacking = _Unpacking(path, raw.tell)
                    for info in archive:
                        member = info.name
                        kind = (b"5" if info.isdir() else b"0" if info.isfile() else b"1" if info.islnk()
                                else b"2" if info.issym() else b"?")
                        unpacking.before(member, info.size)
                        file = archive.extractfile(info) if kind == b"0" and keep_data else None
                        _add_tar_member(member, kind, file.read() if file else b"", info.linkname, data, folders,
                                        links, keep_data)
                        unpacking.after(member)
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, OSError,
            RuntimeError, NotImplementedError, UnicodeDecodeError) as error:  # (a zip name flagged UTF-8 that is not)
        raise DataError(f"{path}: corrupt or unreadable archive at member {member!r} ({error})") from None
    skipped = _resolve_links(links, data, folders)
    return _Tree(str(path), sorted(data), folders, data=data if keep_data else {}, skipped_links=skipped)


def _add_tar_member(member: str, kind: bytes, content: bytes, target: str, data: dict[str, bytes], folders: set[str],
                    links: dict[str, str], keep_data: bool) -> None:
    name = _member_path(member)
    if name is None:
        return
    if kind == b"5":
        folders.add(name)
    elif kind in (b"0", b"\0", b"7"):
        data[name] = content if keep_data else b""
    elif kind in (b"1", b"2"):
        links[name] = _link_target(name, target, symbolic=kind == b"2")


def _link_target(name: str, target: str, symbolic: bool) -> str:
    """A link's target as a member path: a hard link names a member, a symbolic one a path from the
    link's folder; "" when it leaves the archive (absolute, or above its root)."""
    if symbolic:
        if target.startswith("/"):
            return ""
        target = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
        if target == ".." or target.startswith("../"):
            return ""
    return _member_path(target) or ""


def _resolve_links(links: dict[str, str], data: dict[str, bytes], folders: set[str]) -> list[str]:
    """Give each link its target's content (a file) or files (a folder); returns "name -> target" of
    those whose target is not in the archive. Links to links resolve in later rounds; a folder link
    waits while resolvable links inside its target are pending, and links waiting on each other go
    one at a time. A link to its own folder or one above it is skipped, as ``walk`` skips it on disk:
    following it would read the folder's documents a second time under a new label."""
    looping = {n for n, t in links.items()
               if t and _encloses(_real_path(t, links), _real_path(posixpath.dirname(n), links))}
    pending = {n: t for n, t in links.items() if n not in looping}
    while pending:
        present = set(folders) | {posixpath.dirname(p) for p in data}
        for folder in list(present):
            while folder:
                folder = posixpath.dirname(folder)
                present.add(folder)
        resolvable = {n for n, t in pending.items() if t and (t in data or t in present)}
        done: dict[str, dict[str, bytes]] = {}
        waiting = []
        for name in sorted(resolvable):
            target = pending[name]
            if target in data:
                done[name] = {name: data[target]}
            elif any(other != name and other.startswith(target + "/") for other in resolvable):
                waiting.append(name)  # files may still arrive in that folder through other links
            else:
                done[name] = _folder_files(name, target, data)
        if not done and waiting:  # links waiting on each other: release one, then look again
            done = {waiting[0]: _folder_files(waiting[0], pending[waiting[0]], data)}
        if not done:
            break
        for name, files in done.items():
            if name not in files:  # a folder link, not a file
                folders.add(name)
            data.update(files)
            del pending[name]
    return sorted([f"{name} -> {links[name] or '(outside the archive)'}" for name in pending]
                  + [f"{name} -> {links[name]} (a folder the link is in)" for name in looping])


def _real_path(path: str, links: dict[str, str]) -> str | None:
    """``path`` with every link on its way replaced by its target (None: links in a cycle, or leaving the archive)."""
    for _ in range(len(links) + 1):
        prefix = path
        while prefix and prefix not in links:
            prefix = posixpath.dirname(prefix)
        if not prefix:
            return path
        if not links[prefix]:
            return None
        path = links[prefix] + path[len(prefix):]
    return None


def _encloses(folder: str | None, path: str | None) -> bool:
    """Whether ``folder`` is ``path`` or one of its ancestors."""
    return folder is not None and path is not None and (folder == path or path.startswith(folder + "/"))


def _folder_files(name: str, target: str, data: dict[str, bytes]) -> dict[str, bytes]:
    """The files under folder ``target``, as seen under link ``name``."""
    return {name + p[len(target):]: v for p, v in data.items() if p.startswith(target + "/")}


class _NotPlainTar(Exception):
    """The archive uses a tar feature the fast reader leaves to :mod:`tarfile`."""


_TAR_OPENERS = {b"\x1f\x8b": gzip.open, b"BZh": bz2.open, b"\xfd7zXZ\x00": lzma.open}


class _Unpacking:
    """The size checks on an archive read into memory, each member's from its header before it is read."""

    def __init__(self, path: Path, position: Callable[[], int] | None = None):
        self.path, self.position = path, position  # position: compressed bytes consumed so far
        self.packed = path.stat().st_size
        self.unpacked = 0
        self.most = setting("DOCATTN_MAX_MEMBER_BYTES", MAX_MEMBER_BYTES)
        self.ratio = setting("DOCATTN_MAX_COMPRESSION_RATIO", MAX_COMPRESSION_RATIO)

    def before(self, member: str, size: int, packed: int | None = None) -> None:
        """Refuse ``member`` (``size`` bytes unpacked; ``packed``: compressed, when known) unread."""
        self.unpacked += size
        # messages are built only to be raised: IMDB has 50k members
        if packed is not None and size > RATIO_FLOOR and size > self.ratio * packed:
            check_ratio(f"{self.path}: member {member!r}", size, packed, self.ratio)
        # no member takes more of the archive than all of it
        if self.unpacked > RATIO_FLOOR and self.unpacked > self.ratio * self.packed:
            check_ratio(f"{self.path} (up to member {member!r})", self.unpacked, self.packed, self.ratio)
        if size > self.most:
            raise DataError(f"{self.path}: member {member!r} is {size:,} bytes, over the {self.most:,}-byte limit "
                            "for an archive member read into memory; unpack the archive and read the folder "
                            "(files on disk are read in bounded memory), or raise DOCATTN_MAX_MEMBER_BYTES")

    def after(self, member: str) -> None:
        """Refuse the rest when what was read so far unpacked from too few compressed bytes (many small bombs)."""
        if self.position is not None and self.unpacked > RATIO_FLOOR and self.unpacked > self.ratio * self.position():
            check_ratio(f"{self.path} (up to member {member!r})", self.unpacked, self.position(), self.ratio)


def check_ratio(what: str, unpacked: int, packed: int, ratio: int | None = None) -> None:
    """A DataError when ``unpacked`` bytes over RATIO_FLOOR came from ``packed`` compressed ones at more than
    ``ratio`` ($DOCATTN_MAX_COMPRESSION_RATIO) to one: text compresses about 3:1, a compression bomb about 1000:1."""
    if unpacked <= RATIO_FLOOR:
        return
    ratio = ratio or setting("DOCATTN_MAX_COMPRESSION_RATIO", MAX_COMPRESSION_RATIO)
    if unpacked > ratio * max(packed, 1):
        raise DataError(f"{what} unpacks to {unpacked:,} bytes from {packed:,} ({unpacked // max(packed, 1):,}:1), "
                        f"over the {ratio}:1 limit: a compression bomb? Refused unread; if the archive is trusted, "
                        "raise DOCATTN_MAX_COMPRESSION_RATIO")


def _plain_tar_members(path: Path) -> Iterator[tuple[str, bytes, bytes, str]]:
    """(name, type flag, content, link target) of each member of a ustar/GNU/pax tar, optionally compressed.

    About 3x faster than ``tarfile`` on 50k small files (IMDB), whose time goes to header
    parsing; anything beyond plain files, folders, long names and pax paths raises _NotPlainTar.
    """
    with open(path, "rb") as raw:
        magic = raw.read(6)
        raw.seek(0)
        opener = next((o for m, o in _TAR_OPENERS.items() if magic.startswith(m)), None)
        with opener(raw, "rb") if opener else contextlib.nullcontext(raw) as stream:
            yield from _plain_tar_stream(stream, _Unpacking(path, raw.tell))


def _plain_tar_stream(stream: IO, unpacking: _Unpacking) -> Iterator[tuple[str, bytes, bytes, str]]:
    long_name: bytes | None = None
    name = "(first member)"
    while True:
        header = stream.read(512)
        if not header or header == _ZERO_BLOCK:
            return
        if len(header) < 512:
            raise EOFError(f"archive ends inside the header after {name!r}")
        if header[124] & 0x80 or _octal(header[148:156]) != sum(header) - sum(header[148:156]) + 256:
            raise _NotPlainTar  # base-256 size or a bad checksum: let tarfile decide
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
            raise _NotPlainTar
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
        raise _NotPlainTar from None


def _pax_path(records: bytes) -> bytes | None:
    """The ``path`` of a pax extended header; a pax ``size`` (huge files) is left to tarfile."""
    path, position = None, 0
    while position < len(records):
        space = records.find(b" ", position)
        if space < 0:
            raise _NotPlainTar
        length = int(records[position:space]) if records[position:space].isdigit() else 0
        if length <= 0:
            raise _NotPlainTar
        key, _, value = records[space + 1 : position + length - 1].partition(b"=")
        if key == b"path":
            path = value
        elif key in (b"size", b"linkpath"):  # a huge file, or a link target past the header's 100 bytes
            raise _NotPlainTar
        position += length
    return path


# --------------------------------------------------------------------------- folder-per-label


def _folder_documents(tree: _Tree, unlabelled: bool = False) -> list[tuple[str, str, str]]:
    """(member, label, split) of every document: a file in a label folder, at any depth below it.

    The label folder is the one right under the split folder, or under the folder that the leaf
    folders (those without subfolders) of split-less documents share (so deeper trees keep their top
    label folders); the split is the nearest ancestor named train/test/dev/valid or ending in
    -train/-test, else "all". Files outside label folders (README, imdb.vocab, urls_*.txt,
    labeledBow.feat beside them) and in folders named like a split are not documents; nor are those
    of ``unsup`` unless ``unlabelled`` asks for them.
    """
    folders = set()  # folders holding files: an empty subfolder makes no label folder's files look like a README
    for path in tree.paths:
        parent = posixpath.dirname(path)
        while parent and parent not in folders:
            folders.add(parent)
            parent = posixpath.dirname(parent)
    has_subfolders = {posixpath.dirname(folder) for folder in folders}
    found = []
    for path in sorted(tree.paths):
        parent = posixpath.dirname(path)
        if not parent:
            continue
        parts = parent.split("/")
        if (parts[-1] in _IGNORED_FOLDERS and not unlabelled) or parts[-1].lower() in _SPLIT_ALIASES:
            continue
        at = next((i for i in range(len(parts) - 2, -1, -1) if _split_name(parts[i])), None)
        found.append((path, parts, at, parent in has_subfolders))
    # the label is the folder right under the split folder (or under the folder all split-less leaf
    # folders share), so pos/batch1/*.txt and neg/batch1/*.txt are labelled pos and neg, not batch1
    loose = [parts for _, parts, at, beside in found if at is None and not beside]
    shared = posixpath.commonpath(["/".join(p) for p in loose]) if loose else ""
    common = len(shared.split("/")) if shared else 0
    label_folders = {"/".join(p[:common + 1]) for p in loose}
    documents = []
    for path, parts, at, beside in found:
        if at is not None:
            depth, split = at + 2, _split_name(parts[at])
        else:
            depth, split = min(common + 1, len(parts)), "all"
            # a file beside subfolders is a document only inside a label folder (pos/1.txt beside pos/extra/),
            # not beside the label folders themselves (a README)
            if beside and "/".join(parts[:depth]) not in label_folders:
                continue
        label = _shown(parts[depth - 1])  # a folder on disk: its raw name (an archive's is shown already)
        if label in _IGNORED_FOLDERS and not unlabelled:
            continue
        documents.append((path, label, split))
    return documents


def _read_folder(tree: _Tree, split: str | None, single: bool, on_empty: str, errors: str) -> dict[str, Corpus]:
    documents = _folder_documents(tree)
    if not documents:
        raise DataError(f"no documents in {tree.name} (expected files in label folders, e.g. "
                        "train/pos/1.txt or <topic>/001.txt)")
    classes = sorted({label for _, label, _ in documents})
    if all(_INTEGER.fullmatch(c) for c in classes):  # folders 1..10 in numeric order (names kept as written)
        classes.sort(key=int)
    selected = _select_splits(_ordered_splits(s for _, _, s in documents), split, single, tree.name)
    result = {}
    for name in selected:
        docs = _Documents(tree.name, on_empty)
        for member, label, doc_split in documents:
            if doc_split != name:
                continue
            _add_file(docs, tree, member, errors, label)
        result[name] = docs.corpus(labeled=True, classes=list(classes))
    return result


def _add_file(docs: _Documents, tree: _Tree, member: str, errors: str, label: Hashable = None) -> None:
    """One file of a folder tree as a document, decoded on its own."""
    # each file has its own encoding: 20 Newsgroups has Latin-1 posts among UTF-8 ones
    most = 4 * docs.max_chars  # bytes enough for the characters kept, in any encoding read
    raw = tree.read(member, most + 1)
    cut = len(raw) > most
    text = _clean(_decode_document(raw[:most] if cut else raw, tree.where(member), errors, docs.stats, cut))
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    docs.add(tree.where(member), _shown(member), text, label, cut=cut)


def _read_folder_texts(tree: _Tree, on_empty: str, errors: str) -> Corpus:
    """Every document of a folder tree's training split (or of all of it), unlabelled folders included."""
    documents = _folder_documents(tree, unlabelled=True)
    splits = {s for _, _, s in documents}
    name = "train" if "train" in splits else "all"
    docs = _Documents(tree.name, on_empty)
    for member, _, doc_split in documents:
        if doc_split == name:
            _add_file(docs, tree, member, errors)
    hint = "" if name in splits else f" (no training split; splits: {', '.join(_ordered_splits(splits))})"
    return docs.corpus(labeled=False, hint=hint)


def _group_sources(tree: _Tree, members: dict[str, str], options: dict[str, Any], what: str) -> dict[str, _Source]:
    """Split -> source from {member: split}; two files for one split is ambiguous."""
    by_split: dict[str, list[str]] = {}
    for member, split in members.items():
        by_split.setdefault(split, []).append(member)
    sources = {}
    for split in _ordered_splits(by_split):
        found = sorted(by_split[split])
        if len(found) > 1:
            raise DataError(f"{tree.name}: several {what} files for split {split!r} ({', '.join(found)}); "
                            "read one file at a time")
        sources[split] = _Source(tree.where(found[0]), tree.opener(found[0]), options)
    return sources


def _zhang_sources(tree: _Tree, options: dict[str, Any]) -> dict[str, _Source]:
    members = {p: _ZHANG_FILES[posixpath.basename(p)] for p in tree.paths if posixpath.basename(p) in _ZHANG_FILES}
    folders = {posixpath.dirname(p) for p in members}
    if not members:
        raise DataError(f"{tree.name}: no train.csv or test.csv (expected the Zhang et al. 2015 layout)")
    if len(folders) > 1:
        raise DataError(f"{tree.name}: Zhang et al. CSVs in several folders ({', '.join(sorted(folders))}); "
                        "point at one of them")
    sources = _group_sources(tree, members, options, "Zhang CSV")
    classes_member = posixpath.join(folders.pop(), "classes.txt")
    if classes_member in tree.paths:
        classes = _read_classes(tree.read(classes_member, _CLASSES_BYTES + 1), tree.where(classes_member))
        for source in sources.values():
            source.classes, source.classes_name = classes, tree.where(classes_member)
    return sources


def _tang_sources(tree: _Tree, options: dict[str, Any]) -> dict[str, _Source]:
    members = {}
    for path in tree.paths:
        if path.endswith(".ss"):
            stem = posixpath.basename(path)[: -len(".ss")]
            members[path] = _split_name(stem.rsplit(".", 1)[-1]) or "all"
    if not members:
        raise DataError(f"{tree.name}: no .ss files (expected *.train.ss, *.dev.ss, *.test.ss)")
    return _group_sources(tree, members, options, ".ss")
