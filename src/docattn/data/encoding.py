"""Encoded corpora as compact ragged arrays, and their on-disk cache.

A corpus is encoded once into four arrays: ``tokens`` (every word id, documents and sentences
in order), ``sentence_offsets`` (where each sentence starts in ``tokens``), ``document_offsets``
(where each document starts in the sentence list) and ``labels``. The cache stores them as
``.npy`` files reloaded memory-mapped; a cache entry is written in a temporary folder and
renamed into place, so a killed run never leaves a half-written entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from docattn.data.corpus import Corpus, LabelMap
from docattn.data.text import SEP, UNK, Vocabulary, documents_to_strings
from docattn.errors import DataError

ARRAYS = ("tokens", "sentence_offsets", "document_offsets", "labels")


@dataclass
class EncodedCorpus:
    """Ragged token ids of a split; document d spans sentences document_offsets[d:d+2]."""

    tokens: np.ndarray  # (n_tokens,) int32
    sentence_offsets: np.ndarray  # (n_sentences + 1,) int64
    document_offsets: np.ndarray  # (n_documents + 1,) int64
    labels: np.ndarray  # (n_documents,) int64, -1 where unlabelled; multi-label: (n_documents, n_classes) 0/1 int8

    @property
    def multi_label(self) -> bool:
        return np.ndim(self.labels) == 2

    @property
    def labelled(self) -> bool:
        """Whether every document has its label(s): what scoring a split needs."""
        return self.multi_label or bool((np.asarray(self.labels) >= 0).all())

    def __len__(self) -> int:
        return len(self.document_offsets) - 1

    @property
    def sentence_lengths(self) -> np.ndarray:
        return np.diff(self.sentence_offsets)

    @property
    def sentence_counts(self) -> np.ndarray:
        """Sentences per document."""
        return np.diff(self.document_offsets)

    @property
    def token_counts(self) -> np.ndarray:
        """Words per document."""
        return np.diff(self.sentence_offsets[self.document_offsets])

    @property
    def max_sentence_lengths(self) -> np.ndarray:
        """Longest sentence of each document (every document has at least one sentence)."""
        return np.maximum.reduceat(self.sentence_lengths, self.document_offsets[:-1])

    def subset(self, documents: Sequence[int] | np.ndarray) -> EncodedCorpus:
        """A new corpus of the given documents, in that order (vectorized gather)."""
        docs = np.asarray(documents, dtype=np.int64)
        # the chosen documents' counts only: sentence_counts / sentence_lengths diff the whole corpus
        s_start, s_count = self.document_offsets[docs], self.document_offsets[docs + 1] - self.document_offsets[docs]
        sent = ragged_ranges(s_start, s_count)
        t_start, t_count = self.sentence_offsets[sent], self.sentence_offsets[sent + 1] - self.sentence_offsets[sent]
        toks = self.tokens[ragged_ranges(t_start, t_count)]
        return EncodedCorpus(
            tokens=np.ascontiguousarray(toks, dtype=np.int32),
            sentence_offsets=_offsets(t_count),
            document_offsets=_offsets(s_count),
            labels=np.asarray(self.labels)[docs].astype(self.labels.dtype),
        )

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name in ARRAYS:
            np.save(folder / f"{name}.npy", getattr(self, name))

    @classmethod
    def load(cls, folder: str | Path, mmap: bool = True, check: bool = True) -> EncodedCorpus:
        """The arrays ``save`` wrote; ``check``: refuse ones that do not agree (reads every token once)."""
        folder = Path(folder)
        try:
            arrays = {n: np.load(folder / f"{n}.npy", mmap_mode="r" if mmap else None) for n in ARRAYS}
        except (FileNotFoundError, ValueError, OSError) as err:
            raise DataError(f"{folder}: encoded corpus is missing or corrupt ({err})") from None
        enc = cls(**arrays)
        problem = enc.problem() if check else None
        if problem:
            raise DataError(f"{folder}: encoded corpus is corrupt ({problem})")
        return enc

    def problem(self, vocab_size: int | None = None, num_classes: int | None = None) -> str | None:
        """What makes these arrays unusable (offsets that do not run 0..n in order, ids past the vocabulary,
        labels past the classes), or None; a batch would otherwise fail with an IndexError mid-training."""
        s, d = np.asarray(self.sentence_offsets), np.asarray(self.document_offsets)
        if len(s) == 0 or len(d) == 0 or s[0] != 0 or d[0] != 0 or s[-1] != len(self.tokens) or d[-1] != len(s) - 1:
            return "the arrays do not agree: a truncated cache?"
        if (np.diff(s) < 0).any() or (np.diff(d) < 0).any():
            return "offsets run backwards"
        if len(self.tokens) and (
            int(np.min(self.tokens)) < 0 or (vocab_size is not None and int(np.max(self.tokens)) >= vocab_size)
        ):
            return f"token ids outside the vocabulary of {vocab_size}"
        if self.multi_label:
            labels = np.asarray(self.labels)
            if len(labels) != len(d) - 1 or (num_classes is not None and labels.shape[1] != num_classes):
                return f"a label matrix that is not one row per document of {num_classes} classes"
            if labels.size and (int(labels.min()) < 0 or int(labels.max()) > 1):
                return "a label matrix that is not 0/1"
            return None
        if len(self.labels) != len(d) - 1 or (
            num_classes is not None
            and len(self.labels)
            and (int(np.min(self.labels)) < -1 or int(np.max(self.labels)) >= num_classes)
        ):
            return f"labels that are not one per document in -1..{num_classes}"
        return None


def ragged_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of range(s, s + c) for every (s, c), without a Python loop."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.cumsum(counts) - counts  # where each range begins in the output
    return np.repeat(np.asarray(starts, dtype=np.int64) - first, counts) + np.arange(total, dtype=np.int64)


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def encode_ids(doc_ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split each document's ids at SEP into non-empty sentences; empty documents get one UNK.

    Returns (tokens, sentence_offsets, document_offsets). Vectorized over all tokens.
    """
    doc_len = np.fromiter((len(d) for d in doc_ids), dtype=np.int64, count=len(doc_ids))
    # chain iterates in C: a generator over every token took twice as long
    ids = np.fromiter(itertools.chain.from_iterable(doc_ids), dtype=np.int32, count=int(doc_len.sum()))
    n_docs = len(doc_ids)
    doc_of = np.repeat(np.arange(n_docs), doc_len)
    is_word = ids != SEP
    # a document with no word at all becomes the single word UNK, so every model sees >= 1 token
    words_per_doc = np.bincount(doc_of[is_word], minlength=n_docs)
    empty = np.flatnonzero(words_per_doc == 0)
    if len(empty):
        at = _offsets(doc_len)[empty]
        ids = np.insert(ids, at, UNK)
        doc_len[empty] += 1
        doc_of = np.repeat(np.arange(n_docs), doc_len)
        is_word = ids != SEP
    # a sentence starts at each document start and after each SEP
    starts = np.zeros(len(ids), dtype=bool)
    starts[_offsets(doc_len)[:-1][doc_len > 0]] = True
    starts[1:] |= ids[:-1] == SEP
    sent_of = np.cumsum(starts) - 1  # sentence id of every token, empty sentences included
    tokens = ids[is_word]
    sent_of_word = sent_of[is_word]
    # keep sentences that have words; they appear in order, so run lengths give their sizes
    new_sentence = np.ones(len(tokens), dtype=bool)
    new_sentence[1:] = sent_of_word[1:] != sent_of_word[:-1]
    first_word = np.flatnonzero(new_sentence)
    sent_len = np.diff(np.append(first_word, len(tokens)))
    sent_doc = doc_of[is_word][first_word]
    sentences_per_doc = np.bincount(sent_doc, minlength=n_docs)
    return tokens.astype(np.int32), _offsets(sent_len), _offsets(sentences_per_doc)


def encode_corpus(
    corpus: Corpus, vocab: Vocabulary, label_map: LabelMap | None, stats: dict | None = None
) -> EncodedCorpus:
    """Tokenize and encode raw documents with a fixed vocabulary (labels via ``label_map``); a multi-label
    corpus drops labels unseen in training, counted in ``stats["unseen_labels"]``."""
    if len(corpus) == 0:
        raise DataError(f"{corpus.source or 'input'}: no documents to encode")
    strings = documents_to_strings(corpus.texts, corpus.sentences, vocab.text_config)
    tokens, sent_off, doc_off = encode_ids(vocab.encode_strings(strings))
    return EncodedCorpus(tokens, sent_off, doc_off, encode_labels(corpus, label_map, stats))


def encode_labels(corpus: Corpus, label_map: LabelMap | None, stats: dict | None = None) -> np.ndarray:
    """The label array of ``corpus``: class indices, -1 where unlabelled, or a multi-label 0/1 matrix."""
    if corpus.labels is not None and label_map is not None and label_map.multi_label:
        # one label per document is a set of one for a multi-label model
        rows = corpus.labels if corpus.multi_label else [(y,) for y in corpus.labels]
        labels, unseen = label_map.encode_sets(rows)
        if stats is not None and unseen:
            stats["unseen_labels"] = stats.get("unseen_labels", 0) + unseen
        return labels
    if corpus.labels is not None and label_map is not None:
        if corpus.multi_label:
            raise DataError(
                f"{corpus.source or 'input'}: documents with sets of labels for a single-label model; "
                "train a multi-label model on such data"
            )
        return np.asarray(label_map.encode(corpus.labels, corpus.source, corpus.ids), dtype=np.int64)
    return np.full(len(corpus), -1, dtype=np.int64)


# --------------------------------------------------------------------------- cache


def default_cache_dir() -> Path:
    """``$DOCATTN_CACHE`` or ``~/.cache/docattn/encoded``."""
    return Path(os.environ.get("DOCATTN_CACHE", Path.home() / ".cache" / "docattn" / "encoded"))


def fingerprint_path(path: str | Path) -> str:
    """Content hash of a file (and of a classes.txt beside it, which names a Zhang CSV's classes);
    for a folder, a hash of every file's path, size and mtime."""
    path = Path(path)
    h = hashlib.sha256()
    if path.is_file():
        classes = path.parent / "classes.txt"
        for part in (path, classes) if classes.is_file() and classes != path else (path,):
            with open(part, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
    elif path.is_dir():
        from docattn.data.readers import walk

        files = sorted(Path(folder, name) for folder, _, names in walk(path) for name in names)
        for p in files:
            if p.is_file():  # following links, as the reader does
                st = p.stat()
                h.update(f"{p.relative_to(path)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "replace"))
    else:
        from docattn.data.readers import _existing

        _existing(path)  # names what it is: missing, or a device, a pipe, a socket
        raise DataError(f"{path}: no such file or folder")
    return h.hexdigest()


def cache_key(settings: dict) -> str:
    """Stable key of every setting that changes an encoding."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:24]


def temp_dir(parent: Path, prefix: str, suffix: str = "") -> Path:
    """A fresh folder in ``parent`` to fill and rename into place, with the permissions a plain
    ``mkdir`` gives (mkdtemp's 0700 would lock the rest of a team out of a shared cache or data folder)."""
    import secrets

    while True:
        tmp = Path(parent) / f"{prefix}{secrets.token_hex(8)}{suffix}"
        try:
            tmp.mkdir()  # the umask applies and a setgid parent's group is inherited, as with any mkdir
            return tmp
        except FileExistsError:
            continue


def _sweep_abandoned(root: Path) -> None:
    """Remove the half-built entries of builds whose process is gone (killed with -9: no finally ran).
    A build's folder is ".KEY.PID.RANDOM"; one of a live process is left alone."""
    for folder in root.glob(".*.*.*"):
        parts = folder.name.split(".")
        if len(parts) != 4 or not parts[2].isdigit() or not folder.is_dir():
            continue
        try:
            os.kill(int(parts[2]), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (PermissionError, OverflowError):  # another user's live process, or no pid at all
            pass


def cached(key: str, build: Callable[[Path], None], root: str | Path | None = None) -> Path:
    """Folder of cache entry ``key``; ``build(tmp_folder)`` fills it on a miss, then it is renamed in.

    The rename is atomic, so concurrent or killed runs never expose a partial entry. One process builds an
    entry at a time, under a lock file beside it: the others (a distributed run's ranks, say) wait, then
    load what it built instead of building it again.
    """
    root = Path(root) if root is not None else default_cache_dir()
    final = root / key
    if (final / "COMPLETE").exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    with _build_lock(root / f".{key}.lock"):
        if (final / "COMPLETE").exists():  # built by the process that held the lock before this one
            return final
        return _build(key, build, root, final)


@contextlib.contextmanager
def _build_lock(path: Path):
    """An exclusive lock on ``path``, released when the holder ends however it ends (kill -9 included); where
    the file system has no locks, every process builds for itself, as before. The file goes with the build: a
    process waiting on it then finds the entry complete, and one arriving later never needs it."""
    try:
        import fcntl

        handle = open(path, "a+b")  # noqa: SIM115  (held open for the lock's lifetime)
    except (ImportError, OSError):
        yield
        return
    with handle:
        with contextlib.suppress(OSError):  # a file system without locks: build as if the lock were held
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def _build(key: str, build: Callable[[Path], None], root: Path, final: Path) -> Path:
    _sweep_abandoned(root)
    tmp = temp_dir(root, prefix=f".{key}.{os.getpid()}.")
    try:
        build(tmp)
        (tmp / "COMPLETE").write_text("ok")
        if final.exists():  # an incomplete leftover, or another process finished first
            if (final / "COMPLETE").exists():
                return final
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:  # another process renamed its entry in between: the same content, use it
            if not (final / "COMPLETE").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
