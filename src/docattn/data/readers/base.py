"""What every reader shares: the source it reads, the documents it builds, the splits it names."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from docattn.data.corpus import Corpus
from docattn.data.readers.decoding import _decoded_lines, _max_chars, _shown
from docattn.errors import DataError

FORMATS = ("csv", "tsv", "jsonl", "zhang", "tang", "folder", "fasttext", "lines", "parquet", "arrow", "reuters")
STDIN = "-"

_SPLIT_ORDER = ("train", "valid", "test", "all")
_SPLIT_ALIASES = {"train": "train", "dev": "valid", "valid": "valid", "validation": "valid", "test": "test"}
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass
class _Source:
    """One file to read line by line: its display name, how to open it, and the read options."""

    name: str
    open: Callable[[], AbstractContextManager[Any]]
    options: dict[str, Any]
    classes: list[str] | None = None  # Zhang classes.txt, when present
    classes_name: str = ""


def _select_splits(available: Iterable[str], split: str | None, single: bool, path: Any) -> list[str]:
    available = list(available)
    stream = _stream()
    if stream is not None and stream.prefer and split is None:  # the first of the stream's choices the source has
        found = [s for s in stream.prefer if s in available]
        if not found:
            raise DataError(
                f"{path}: no {stream.prefer[0]} split (splits: {', '.join(available)}); "
                "choose one with --split (split= from Python)"
            )
        return found[:1]
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


_SPECIAL_FILES = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


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


class _Stream:
    """Where a reader running for :mod:`docattn.data.readers.stream` hands its documents: every ``chunk_size``
    of them, and whenever its input stalls, ``sink`` gets a Corpus and the reader forgets them."""

    def __init__(self, sink: Callable[[Corpus], None], chunk_size: int, prefer: tuple[str, ...] = ()):
        self.sink, self.chunk_size = sink, chunk_size
        self.prefer = prefer  # splits to read when none is named: the first of these the source has
        self.documents: _Documents | None = None  # the documents being read, handed off when the input stalls
        self.integer_labels = False  # the reader would have made integer-looking labels ints, had it seen them all

    def stalled(self) -> None:
        if self.documents is not None:
            self.documents.hand_off()


_streaming = threading.local()  # .current: the _Stream of the reader running in this thread, if any


def _stream() -> _Stream | None:
    return getattr(_streaming, "current", None)


class _Documents:
    """One split's documents as they are read, applying the empty-document policy.

    In a stream (a reader run by ``stream.iter_chunks``) the documents go out in chunks as they are read,
    and :meth:`corpus` gives only those not handed off yet; ids, stats and checks are the same.
    """

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
        self.stream = _stream()
        self.handed = 0  # documents already handed to the stream
        if self.stream is not None:
            self.stream.documents = self

    def add(
        self,
        where: str,
        doc_id: str,
        text: str,
        label: Hashable = None,
        sentences: list[str] | None = None,
        rationale: Any = None,
        cut: bool = False,
    ) -> None:
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
        if self.stream is not None and len(self.texts) >= self.stream.chunk_size:
            self.hand_off()

    def hand_off(self) -> None:
        """The documents read so far, as one chunk, to the stream; what only the whole source settles (integer
        labels, multi-label, classes) is left to the last chunk, see ``stream.Chunks``."""
        if self.stream is None or not self.texts:
            return
        labeled = any(y is not None for y in self.labels)
        chunk = self._corpus(labeled, None, any(isinstance(y, tuple) for y in self.labels), dict(self.stats))
        self.handed += len(self.texts)
        self.texts, self.labels, self.sentences, self.rationales, self.ids = [], [], [], [], []
        self.stream.sink(chunk)

    def corpus(
        self, labeled: bool, classes: list[Hashable] | None = None, hint: str = "", multi_label: bool = False
    ) -> Corpus:
        """``multi_label``: labels are tuples (bare ones become 1-tuples), as :class:`Corpus` says."""
        if not self.texts and not self.handed:
            raise DataError(f"no documents in {self.source}{hint}")
        return self._corpus(labeled, classes, multi_label, self.stats)

    def _corpus(self, labeled: bool, classes: list[Hashable] | None, multi_label: bool, stats: dict) -> Corpus:
        # documents given as sentences keep them even beside documents given as text (None: the splitter's job)
        has_sentences = any(s is not None for s in self.sentences)
        has_rationales = bool(self.rationales) and all(r is not None for r in self.rationales)
        return Corpus(
            texts=self.texts,
            labels=self.labels if labeled else None,
            sentences=self.sentences if has_sentences else None,
            ids=self.ids,
            source=self.source,
            classes=classes,
            stats=stats,
            rationales=self.rationales if has_rationales else None,
            multi_label=multi_label,
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


def _integer_labels(labels: list) -> list:
    """Labels as ints when every one is an integer, so ratings sort 1, 2, ..., 10 rather than 1, 10, 2;
    kept as written when two spellings would become one number ("01" and "1"). A tuple of labels (a
    multi-label document) is converted label by label, with the others. A stream never sees them all: the
    labels stay as read, and ``stream.Chunks.integer_labels`` says the whole source would convert them."""
    if (stream := _stream()) is not None:
        stream.integer_labels = True
        return labels
    flat = [x for y in labels for x in (y if isinstance(y, tuple) else (y,))]
    if not all(isinstance(x, str) and _INTEGER.fullmatch(x) for x in flat):
        return labels
    spellings = {}
    for label in set(flat):
        spellings.setdefault(int(label), set()).add(label)
    if any(len(s) > 1 for s in spellings.values()):
        return labels
    return [tuple(int(x) for x in y) if isinstance(y, tuple) else int(y) for y in labels]


def _label_set(labels: Iterable[Hashable]) -> tuple:
    """A multi-label document's labels: blanks dropped, strings stripped, each once in first-seen order."""
    kept = (x.strip() if isinstance(x, str) else x for x in labels)
    return tuple(dict.fromkeys(x for x in kept if x is not None and x != ""))
