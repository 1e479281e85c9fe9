"""Word vectors for the embedding layer: word2vec trained on the training split, or GloVe/word2vec files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from docattn.data.encoding import EncodedCorpus
from docattn.data.text import PAD, Vocabulary
from docattn.errors import DataError


@dataclass
class Coverage:
    """How much of the vocabulary, and of the running text, has a pre-trained vector."""

    words_found: int
    vocab_size: int
    token_share: float

    @property
    def vocab_share(self) -> float:
        return self.words_found / max(self.vocab_size, 1)

    def __str__(self) -> str:
        return f"{self.words_found}/{self.vocab_size} words ({self.vocab_share:.1%}), {self.token_share:.1%} of tokens"


def _stable_hash(text: str) -> int:
    """The same integer for the same string in every process (gensim seeds each word's start vector with it)."""
    import zlib

    return zlib.crc32(text.encode("utf-8"))


def train_word2vec(
    corpus: EncodedCorpus,
    vocab: Vocabulary,
    dim: int = 200,
    window: int = 5,
    min_count: int = 1,
    epochs: int = 5,
    seed: int = 0,
    workers: int | None = None,
    skipgram: bool = False,
    extra: EncodedCorpus | None = None,
) -> np.ndarray:
    """(len(vocab), dim) matrix from gensim word2vec on the training sentences: CBOW (fast) or
    ``skipgram`` (slower; Mikolov et al. found it better for rare words and small corpora).

    Sentences are fed as id strings, so the vectors line up with the vocabulary by id; PAD is 0
    and words word2vec did not keep get small random vectors. ``extra``: more text encoded with
    the same vocabulary (unlabelled reviews, say), read after the training sentences.
    ``workers``: gensim threads, by default the cores this process may use, at most 8; with 1 the
    vectors are the same for the same seed in every run (several threads update in a varying order).
    """
    import os

    from gensim.models import Word2Vec

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = workers or min(8, cores)
    model = Word2Vec(
        sentences=_IdSentences([corpus] if extra is None else [corpus, extra], len(vocab)),
        vector_size=dim,
        window=window,
        min_count=min_count,
        epochs=epochs,
        seed=seed,
        workers=workers,
        sg=int(skipgram),
        hashfxn=_stable_hash,  # Python's str hash changes per process: vectors would start elsewhere every run
    )
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, 0.1, (len(vocab), dim)).astype(np.float32)
    keys = np.asarray(model.wv.index_to_key, dtype=np.int64)
    matrix[keys] = model.wv.vectors
    matrix[PAD] = 0.0
    return matrix


class _IdSentences:
    """Sentences of encoded corpora as lists of id strings, built afresh on each of word2vec's
    passes so a large corpus is never held in memory as Python strings."""

    def __init__(self, corpora: list[EncodedCorpus], vocab_size: int):
        self.corpora = corpora
        self.names = np.array([str(i) for i in range(vocab_size)], dtype=object)

    def __iter__(self):
        for corpus in self.corpora:
            tokens, offsets = np.asarray(corpus.tokens), np.asarray(corpus.sentence_offsets)
            for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
                yield self.names[tokens[start:end]].tolist()


def load_vectors(path: str | Path, vocab: Vocabulary, corpus: EncodedCorpus | None = None, seed: int = 0) -> tuple[np.ndarray, Coverage]:
    """Matrix for ``vocab`` from a GloVe text file (no header), word2vec text or binary file.

    Words missing from the file get small random vectors; also returns the coverage, where
    ``corpus`` (the training split) gives the share of running tokens covered.
    """
    from gensim.models import KeyedVectors

    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: embedding file not found")
    binary = path.suffix == ".bin"
    try:
        if binary:
            kv = KeyedVectors.load_word2vec_format(str(path), binary=True, unicode_errors="replace")
        else:
            with open(path, encoding="utf-8", errors="replace") as f:
                first = f.readline().split()
            glove = not (len(first) == 2 and all(x.isdigit() for x in first))
            kv = KeyedVectors.load_word2vec_format(str(path), binary=False, no_header=glove, unicode_errors="replace")
    except (ValueError, UnicodeDecodeError, EOFError) as err:
        raise DataError(f"{path}: not a GloVe/word2vec vector file ({err})") from None
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, 0.1, (len(vocab), kv.vector_size)).astype(np.float32)
    found = np.zeros(len(vocab), dtype=bool)
    for i, word in enumerate(vocab.tokens[3:], start=3):
        idx = kv.key_to_index.get(word)
        if idx is not None:
            matrix[i] = kv.vectors[idx]
            found[i] = True
    matrix[PAD] = 0.0
    token_share = float("nan")
    if corpus is not None and len(corpus.tokens):
        counts = np.bincount(np.asarray(corpus.tokens), minlength=len(vocab))
        token_share = float(counts[found].sum() / counts.sum())
    return matrix, Coverage(int(found.sum()), len(vocab) - 3, token_share)
