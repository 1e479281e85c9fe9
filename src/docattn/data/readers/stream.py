"""Documents in chunks as they are read: memory bounded by the chunk size, not by the input, and the first
chunk out before the input ends.

``iter_chunks(path, chunk_size)`` runs the ordinary reader of ``path`` (any format :func:`read_corpus` reads,
"-" for stdin) in a thread; every ``chunk_size`` documents it hands a :class:`Corpus` to a small queue the
caller iterates over. Ids, stats, the empty-document policy and every check are the reader's own, so the
chunks joined are the corpus ``read_corpus`` gives, and bad input is the same one-line DataError, raised in
the caller when it reaches that point of the input::

    chunks = iter_chunks("reviews.csv", 1000, text_columns=["review"], ignore_labels=True)
    for corpus in chunks:  # len(corpus) <= 1000, in input order
        ...
    chunks.stats  # the whole read's counts (skipped_empty, cut_documents, ...), once the loop has ended

Stdin, or a pipe, also hands over what it has whenever its writer pauses, so an interactive or endless pipe
gets its documents line by line. Parquet and Arrow tables stream by record batch. Some inputs are held
whole, or start late: an archive (.tar.gz, .zip: its members are read into memory in one pass before the first
document; unpack it to stream it), a folder tree read ``multi_label`` (copies of a file under several label
folders merge into documents read before them: one chunk), TSV on stdin (kept whole, to be read twice) and a
CSV's first 200 rows (its header is sniffed from them).

What only the whole source settles is left to the end: a chunk's labels are as read (a JSON label keeps its
type, "7" in a CSV stays a string), and once the loop has ended ``chunks.integer_labels`` says the reader
would have made them ints (see ``integer_labels``), ``chunks.multi_label`` and ``chunks.classes`` are the
corpus's. Stopping early (``break``, then ``chunks.close()`` or the end of a ``with`` block) stops the reader.
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import select
import stat
import sys
import threading
from collections.abc import Hashable, Iterator
from typing import Any, NamedTuple

from docattn.data.corpus import Corpus
from docattn.data.readers import base
from docattn.data.readers.base import STDIN, _integer_labels

__all__ = ["DEFAULT_CHUNK", "Chunks", "integer_labels", "iter_chunks", "pick"]

# documents per chunk: length buckets within it batch as well as over a whole corpus (benchmarks/predict_stream.py)
DEFAULT_CHUNK = 4096
_QUEUED = 2  # chunks waiting for the caller: the reader reads ahead, never far
_PAUSE = 0.05  # seconds a pipe's writer is silent before the documents read so far go out


def iter_chunks(
    path: str | os.PathLike,
    chunk_size: int = DEFAULT_CHUNK,
    split: str | tuple[str, ...] | None = None,
    format: str | None = None,
    **options: Any,
) -> Chunks:
    """The documents of one split of ``path`` as Corpus chunks of at most ``chunk_size``, in input order.

    ``split``: a split name as :func:`read_corpus` takes it; a tuple of names, the first of them the source
    has (("test", "all"): the test split, else a source without splits, as ``docattn predict`` reads); None,
    the source's only split. ``format`` and ``options`` as :func:`read_splits` takes them.
    """
    if not isinstance(chunk_size, int) or chunk_size < 1:
        from docattn.errors import ConfigError

        raise ConfigError(f"chunk_size must be a whole number of documents, at least 1; got {chunk_size!r}")
    if options.get("multi_label") and str(path) != STDIN:
        from docattn.data.readers import detect_format

        if (format or detect_format(path)) == "folder":  # copies merge into documents read before them
            chunk_size = sys.maxsize
    return Chunks(path, chunk_size, split, format, options)


def integer_labels(labels: list[Hashable]) -> list[Hashable]:
    """Labels gathered from every chunk as the reader gives them when it sees them all, where
    ``chunks.integer_labels`` says so: ints when every one is an integer (1, 2, ..., 10 sort in that order)."""
    return _integer_labels(labels)


def pick(
    path: str | os.PathLike,
    n: int,
    seed: int | None = None,
    chunk_size: int = DEFAULT_CHUNK,
    split: str | tuple[str, ...] | None = None,
    format: str | None = None,
    **options: Any,
) -> Corpus:
    """``n`` documents of one split of ``path``, in input order, holding no more than ``n`` and a chunk: the first
    ``n`` (``seed`` None), or ``n`` drawn at random by ``seed``, the very documents
    ``np.random.default_rng(seed).choice(len(corpus), n, replace=False)`` draws from the whole corpus. A draw
    counts the documents first, so it reads the source twice; stdin, which cannot be read twice, is read whole.
    Either way the source is read to its end, which settles its labels (see :func:`iter_chunks`)."""
    import numpy as np

    def read(size: int = chunk_size) -> Chunks:
        return iter_chunks(path, size, split, format, **options)

    if seed is not None and str(path) == STDIN:
        with read(sys.maxsize) as chunks:
            whole = list(chunks)  # one chunk, or none (then the reader has raised)
        total = len(whole[0])
        wanted = np.arange(total) if n >= total else np.sort(np.random.default_rng(seed).choice(total, n, False))
        return _joined([whole[0].subset(wanted.tolist())], chunks, _label_values(whole[0].labels))
    if seed is None:
        wanted = np.arange(n)
    else:
        with read() as chunks:
            total = sum(len(chunk) for chunk in chunks)
        wanted = np.arange(total) if n >= total else np.sort(np.random.default_rng(seed).choice(total, n, False))
    parts, values, start = [], set(), 0
    with read() as chunks:
        for chunk in chunks:
            local = wanted[(wanted >= start) & (wanted < start + len(chunk))] - start
            if len(local):
                parts.append(chunk.subset(local.tolist()))
            values |= _label_values(chunk.labels)
            start += len(chunk)
    return _joined(parts, chunks, values)


def _label_values(labels: list[Hashable] | None) -> set:
    """Every label value once (a document's tuple of labels gives each): enough to settle integer labels."""
    values: set = set()
    for y in labels or ():
        if isinstance(y, tuple):
            values.update(y)
        else:
            values.add(y)
    return values


def _joined(parts: list[Corpus], chunks: Chunks, values: set) -> Corpus:
    """``parts`` of one read as one corpus, with what the whole read settled: its stats, classes, multi-label,
    and integer labels where every label ``values`` holds is an integer."""
    labels = None
    if any(part.labels is not None for part in parts):
        labels = [y for part in parts for y in (part.labels or [None] * len(part))]
        probe = list(values)
        if chunks.integer_labels and _integer_labels(probe) is not probe:
            labels = _integer_labels(labels)
    sentences = None
    if any(part.sentences is not None for part in parts):
        sentences = [s for part in parts for s in (part.sentences or [None] * len(part))]
    rationales = None
    if parts and all(part.rationales is not None for part in parts):
        rationales = [r for part in parts for r in part.rationales]
    return Corpus(
        texts=[t for part in parts for t in part.texts],
        labels=labels,
        sentences=sentences,
        ids=[i for part in parts for i in part.ids],
        source=parts[0].source if parts else "",
        classes=chunks.classes,
        stats=chunks.stats,
        rationales=rationales,
        multi_label=chunks.multi_label,
    )


class Chunks(Iterator[Corpus]):
    """The chunks of one read (see :func:`iter_chunks`); after the last one, ``stats``, ``classes``,
    ``multi_label`` and ``integer_labels`` describe the whole corpus, and ``documents`` counts it."""

    def __init__(self, path, chunk_size: int, split, format: str | None, options: dict[str, Any]):
        self.stats: dict[str, Any] = {}
        self.classes: list[Hashable] | None = None
        self.multi_label = bool(options.get("multi_label"))
        self.integer_labels = False
        self.documents = 0
        self._done = False
        # the thread holds the hand-over, never this object, so an iterator dropped unclosed is collected (__del__)
        self._handover = _Handover()
        args = (self._handover, path, chunk_size, split, format, options)
        self._thread = threading.Thread(target=_read, args=args, name="docattn-reader", daemon=True)
        self._thread.start()

    def __next__(self) -> Corpus:
        if self._done:
            raise StopIteration
        item = self._handover.queue.get()
        if isinstance(item, Corpus):
            self.documents += len(item)
            return item
        self._done = True
        self._thread.join()
        if isinstance(item, _Last):
            self.stats, self.classes, self.multi_label, self.integer_labels = item
            raise StopIteration
        raise item

    def close(self) -> None:
        """Stop the reader, if it is still reading (a reader waiting on stdin stops when stdin gives or ends)."""
        self._done = True
        self._handover.stop.set()
        while True:  # make room, so a reader waiting to hand a chunk over sees the stop
            try:
                self._handover.queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=1.0)

    def __enter__(self) -> Chunks:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self._handover.stop.set()


class _Last(NamedTuple):
    """What the reader settles once it has read everything, sent after the last chunk."""

    stats: dict[str, Any]
    classes: list[Hashable] | None
    multi_label: bool
    integer_labels: bool


class _Handover:
    """The reader thread's side: a short queue of chunks (then a _Last or an error), and the caller's stop."""

    def __init__(self):
        self.queue: queue.Queue = queue.Queue(_QUEUED)
        self.stop = threading.Event()

    def put(self, item: Any) -> None:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        raise _Stopped


def _read(handover: _Handover, path, chunk_size: int, split, format: str | None, options: dict[str, Any]) -> None:
    """The reader of ``path``, run in its own thread, handing chunks over as :class:`base._Documents` fills them."""
    from docattn.data.readers import _finish
    from docattn.data.readers import _read as read_splits

    prefer = split if isinstance(split, tuple) else ()
    stream = base._Stream(lambda chunk: handover.put(_finish({"": chunk}, options)[""]), chunk_size, prefer)
    base._streaming.current = stream
    try:
        with _stalls_handed_off(path, stream):
            one = None if prefer else split
            last = next(iter(read_splits(path, format, options, split=one, single=not prefer).values()))
        last = _finish({"": last}, options)[""]
        settled = _Last(last.stats, last.classes, last.multi_label, stream.integer_labels)
        if len(last):
            last.stats = dict(last.stats)
            handover.put(last)
        handover.put(settled)
    except _Stopped:
        pass
    except Exception as error:  # the caller raises it, as if it had read the input itself
        with contextlib.suppress(_Stopped):
            handover.put(error)
    finally:
        base._streaming.current = None


class _Stopped(BaseException):
    """The caller stopped reading: unwinds the reader, closing what it opened (no reader catches it)."""


class _stalls_handed_off:  # noqa: N801 (a context manager used as a function)
    """While a stream reads stdin from a pipe or terminal, stdin is read through :class:`_StallingInput`, so the
    documents read so far go out whenever the writer pauses; a file on stdin, or a test's stdin, is read as is."""

    def __init__(self, path, stream: base._Stream):
        self.path, self.stream, self.saved = path, stream, None

    def __enter__(self) -> None:
        stdin = sys.stdin
        if str(self.path) != STDIN or stdin is None or stdin is not sys.__stdin__:
            return
        try:
            fd = stdin.fileno()
            mode = os.fstat(fd).st_mode
        except (OSError, ValueError, io.UnsupportedOperation):
            return
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)):
            return
        raw = _StallingInput(fd, self.stream.stalled)
        self.saved = stdin
        sys.stdin = io.TextIOWrapper(io.BufferedReader(raw), encoding=stdin.encoding, errors=stdin.errors)

    def __exit__(self, *exc) -> None:
        if self.saved is not None:
            sys.stdin = self.saved


class _StallingInput(io.RawIOBase):
    """A file descriptor's bytes; before a read that would wait for the writer, ``stalled()`` is called."""

    def __init__(self, fd: int, stalled):
        self.fd, self.stalled = fd, stalled

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        # a writer quiet for _PAUSE has paused; a shorter gap (a busy writer descheduled) would make tiny chunks
        try:
            ready = select.select([self.fd], [], [], _PAUSE)[0]
        except (OSError, ValueError):
            ready = True
        if not ready:
            self.stalled()
        return os.readv(self.fd, [b])
