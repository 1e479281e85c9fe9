"""Word vectors for the embedding layer: word2vec trained on the training split, or GloVe/word2vec files."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from docattn.data.encoding import EncodedCorpus
from docattn.data.text import PAD, SPECIAL_TOKENS, Vocabulary
from docattn.errors import ConfigError, DataError


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
    start: np.ndarray | None = None,
) -> np.ndarray:
    """(len(vocab), dim) matrix from gensim word2vec on the training sentences: CBOW (fast) or
    ``skipgram`` (slower; Mikolov et al. found it better for rare words and small corpora).

    Sentences are fed as id strings, so the vectors line up with the vocabulary by id; PAD is 0
    and words word2vec did not keep get small random vectors. ``extra``: more text encoded with
    the same vocabulary (unlabelled reviews, say), read after the training sentences.
    ``workers``: gensim threads, by default the cores this process may use, at most 8; with 1 the
    vectors are the same for the same seed in every run (several threads update in a varying order).
    ``start``: a (len(vocab), dim) matrix of pre-trained vectors that word2vec starts from instead of its
    small random ones, so a word the corpus rarely shows keeps its general meaning and a frequent one moves
    to the corpus's.
    """
    import os

    from gensim.models import Word2Vec

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = workers or min(8, cores)
    sentences = _IdSentences([corpus] if extra is None else [corpus, extra], len(vocab))
    model = Word2Vec(
        vector_size=dim,
        window=window,
        min_count=min_count,
        epochs=epochs,
        seed=seed,
        workers=workers,
        sg=int(skipgram),
        hashfxn=_stable_hash,  # Python's str hash changes per process: vectors would start elsewhere every run
    )
    model.build_vocab(sentences)
    keys = np.asarray(model.wv.index_to_key, dtype=np.int64)
    if start is not None:
        if start.shape != (len(vocab), dim):
            raise ValueError(f"start vectors are {start.shape}, expected {(len(vocab), dim)}")
        model.wv.vectors[:] = start[keys]
    model.train(sentences, total_examples=model.corpus_count, epochs=model.epochs)
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, 0.1, (len(vocab), dim)).astype(np.float32)
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


def _coverage(found: np.ndarray, vocab: Vocabulary, corpus: EncodedCorpus | None) -> Coverage:
    """How many of the vocabulary's words have a vector, and (given the training split) the share of running tokens."""
    token_share = float("nan")
    if corpus is not None and len(corpus.tokens):
        counts = np.bincount(np.asarray(corpus.tokens), minlength=len(vocab))
        token_share = float(counts[found].sum() / counts.sum())
    return Coverage(int(found.sum()), len(vocab) - len(SPECIAL_TOKENS), token_share)


def load_vectors(
    path: str | Path, vocab: Vocabulary, corpus: EncodedCorpus | None = None, seed: int = 0
) -> tuple[np.ndarray, Coverage]:
    """Matrix for ``vocab`` from a vector file: GloVe text (no header), word2vec / fastText text
    (``.vec``, with a header), word2vec binary (``.bin``); any of them gzipped (``.gz``).

    Words missing from the file get small random vectors; also returns the coverage, where
    ``corpus`` (the training split) gives the share of running tokens covered.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: embedding file not found")
    if path.is_dir():
        raise DataError(f"{path}: is a folder, not a vector file")
    if path.name.endswith((".bin", ".bin.gz")):
        vectors, dim = _read_binary(path, vocab)
    else:
        vectors, dim = _read_text(path, vocab)
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, 0.1, (len(vocab), dim)).astype(np.float32)
    found = np.zeros(len(vocab), dtype=bool)
    for i, vector in vectors.items():
        matrix[i] = vector
        found[i] = True
    matrix[PAD] = 0.0
    return matrix, _coverage(found, vocab, corpus)


def _read_binary(path: Path, vocab: Vocabulary) -> tuple[dict[int, np.ndarray], int]:
    """word2vec's binary format through gensim (which reads ``.gz`` itself)."""
    import struct

    from gensim.models import KeyedVectors

    try:
        kv = KeyedVectors.load_word2vec_format(str(path), binary=True, unicode_errors="replace")
    except (ValueError, UnicodeDecodeError, EOFError, OSError, struct.error) as err:
        raise DataError(f"{path}: not a word2vec binary vector file ({err})") from None
    vectors = {
        i: kv.vectors[j] for w, j in kv.key_to_index.items() if (i := vocab.index.get(w, 0)) >= len(SPECIAL_TOKENS)
    }
    bad = [vocab.tokens[i] for i, v in vectors.items() if not np.isfinite(v).all()]
    if bad:
        raise DataError(f"{path}: the vectors of {len(bad)} word(s) hold NaN or infinite values, e.g. {bad[0]!r}")
    return vectors, int(kv.vector_size)


def _open_text(path: Path):
    """Text lines of a vector file, gunzipped when it starts with gzip's magic bytes."""
    import gzip

    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":  # utf-8-sig: a BOM would otherwise hide the header or glue itself to the first word
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace", newline="\n")
    return open(path, encoding="utf-8-sig", errors="replace", newline="\n")


def _read_text(path: Path, vocab: Vocabulary) -> tuple[dict[int, np.ndarray], int]:
    """GloVe or word2vec text vectors, keeping only the vocabulary's words, read line by line.

    Streaming keeps memory at the vocabulary's size (gensim would hold all 2.2 million GloVe-840B
    vectors) and copes with GloVe-840B's keys that contain spaces: a line's last ``dim`` fields are
    its vector and everything before them its key. Such keys never match a token, so they are skipped.
    A line with fewer than ``dim`` values is an error naming it.
    """
    vectors: dict[int, np.ndarray] = {}  # vocabulary id -> vector; the special tokens never take one
    dim, header, first_vector = 0, False, True
    try:
        with _open_text(path) as f:
            for number, line in enumerate(f, start=1):
                line = line.rstrip("\r\n ")
                if number == 1:
                    fields = line.split(" ")
                    if len(fields) == 2 and all(x.isdigit() for x in fields):
                        dim, header = int(fields[1]), True  # word2vec / fastText header: count and dimension
                        if dim < 1:
                            raise DataError(f"{path}:1: the header gives {dim} dimensions")
                        continue
                    dim = len(fields) - 1
                    if dim < 1 or not _floats(fields[1:]):
                        raise DataError(
                            f"{path}:1: not a GloVe/word2vec vector file (expected a word and its numbers, "
                            f"or a 'count dimension' header; got {line[:60]!r})"
                        )
                if not line:
                    continue
                spaces = line.count(" ")
                if spaces < dim or (header and first_vector and spaces > dim and _floats(line.split(" ")[1:])):
                    raise DataError(
                        f"{path}:{number}: {spaces} values, expected {dim} "
                        f"({'as the header says' if header else 'as on the first line'})"
                    )
                first_vector = False
                word, _, rest = line.partition(" ")
                index = vocab.index.get(word, 0)
                if spaces > dim or index < len(SPECIAL_TOKENS):
                    continue  # a key with spaces, or a word the vocabulary does not have
                try:
                    vector = np.array(rest.split(" "), dtype=np.float32)
                except ValueError:
                    raise DataError(f"{path}:{number}: the values of {word!r} are not all numbers") from None
                if not np.isfinite(vector).all():  # a NaN would spread through the whole model at its first step
                    raise DataError(f"{path}:{number}: the vector of {word!r} holds NaN or infinite values")
                vectors.setdefault(index, vector)
    except (OSError, EOFError) as err:
        raise DataError(f"{path}: cannot read it ({err})") from None
    if dim == 0:
        raise DataError(f"{path}: empty vector file")
    return vectors, dim


def _floats(fields: list[str]) -> bool:
    try:
        np.array(fields, dtype=np.float32)
    except ValueError:
        return False
    return True


PACKAGED = {
    "wordllama": "the wordllama package's 256-d token table (Llama 2 tokens, trained for averaged sentence embeddings)"
}
PACKAGED_DIMS = {"wordllama": 256}
BESIDE = "word2vec+"  # "word2vec+wordllama": word2vec's vectors and a packaged table's, side by side


def trains_word2vec(source: str) -> bool:
    """Whether the embeddings named ``source`` include word2vec trained on the corpus."""
    return source == "word2vec" or (source.startswith(BESIDE) and source[len(BESIDE) :] in PACKAGED)


def packaged_beside(source: str) -> str | None:
    """The packaged table ``source`` sets beside word2vec ("word2vec+wordllama" -> "wordllama"), else None."""
    if not source.startswith(BESIDE):
        return None
    name = source[len(BESIDE) :]
    if name not in PACKAGED:
        raise ConfigError(f"embeddings {source!r}: no packaged vectors {name!r}; available: {', '.join(PACKAGED)}")
    return name


def vector_dim(source: str) -> int | None:
    """The width of the vectors ``source`` names (a packaged table or a vector file), from its first line;
    None where it cannot tell (a missing file, an unknown name: loading it later says why)."""
    if source in PACKAGED_DIMS:
        return PACKAGED_DIMS[source]
    if source.startswith(BESIDE):  # its width is word2vec's plus the table's: the model's own width decides it
        return None
    path = Path(source)
    if not path.is_file():
        return None
    import gzip

    try:
        with open(path, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
        with gzip.open(path, "rb") if gzipped else open(path, "rb") as f:
            first = f.readline(1 << 20).decode("utf-8-sig", errors="replace").rstrip("\r\n ").split(" ")
    except OSError:
        return None
    if len(first) == 2 and all(x.isdigit() for x in first):  # word2vec / fastText header: count and dimension
        return int(first[1]) or None
    return len(first) - 1 if len(first) > 1 and _floats(first[1:]) else None


@functools.lru_cache(maxsize=1)  # a benchmark's seeds and folds read the same table: once per process
def _packaged_table(name: str):
    """(subword tokenizer, token table) of a packaged vector table, read from the package's files."""
    import importlib.util

    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    if name not in PACKAGED:
        raise DataError(f"unknown packaged vectors {name!r}; available: {', '.join(PACKAGED)}")
    spec = importlib.util.find_spec(name)  # the files only: importing the package would pull its own dependencies
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"the {name} vectors need the {name} package, a docattn dependency: pip install {name}")
    root = Path(list(spec.submodule_search_locations)[0])
    try:
        tokenizer = Tokenizer.from_file(str(root / "tokenizers" / "l2_supercat_tokenizer_config.json"))
        table = load_file(str(root / "weights" / "l2_supercat_256.safetensors"))["embedding.weight"].astype(np.float32)
    except (OSError, KeyError, Exception) as err:  # noqa: BLE001 - another release's layout: one clear line
        raise DataError(
            f"the {name} vectors: cannot read them in {root} ({str(err).splitlines()[0][:200]}); "
            "reinstall it (pip install --force-reinstall wordllama)"
        ) from None
    return tokenizer, table


def packaged_vectors(
    name: str, vocab: Vocabulary, corpus: EncodedCorpus | None = None, spread: float | None = None
) -> tuple[np.ndarray, Coverage]:
    """Matrix for ``vocab`` from vectors that a package installs with its weights, so nothing is downloaded:
    ``wordllama`` (a dependency). Each word is split into the table's subword tokens and
    gets their mean, as the table was trained to be used; every word has one. ``spread``: the standard deviation
    the entries are scaled to (None: as shipped)."""
    tokenizer, table = _packaged_table(name)
    words = vocab.tokens[len(SPECIAL_TOKENS) :]
    pieces = tokenizer.encode_batch(words, add_special_tokens=False)
    matrix = np.zeros((len(vocab), table.shape[1]), dtype=np.float32)
    ids = [p.ids for p in pieces]
    lengths = np.array([len(i) for i in ids])
    flat = np.fromiter((t for i in ids for t in i), dtype=np.int64, count=int(lengths.sum()))
    rows = np.repeat(np.arange(len(words)), lengths)
    np.add.at(matrix, len(SPECIAL_TOKENS) + rows, table[flat])  # sum of each word's pieces, then their mean
    matrix[len(SPECIAL_TOKENS) :] /= np.maximum(lengths, 1)[:, None]
    found = np.r_[np.zeros(len(SPECIAL_TOKENS), dtype=bool), lengths > 0]
    if spread is not None and found.any():
        matrix *= spread / float(matrix[found].std())
    matrix[PAD] = 0.0
    return matrix, _coverage(found, vocab, corpus)


def start_vectors(name: str, vocab: Vocabulary, dim: int, spread: float, seed: int = 0) -> tuple[np.ndarray, Coverage]:
    """``dim``-wide starting vectors for word2vec from a packaged table (see ``packaged_vectors``), centred and
    scaled to an entry spread of ``spread``: the table's principal components where it is wider than ``dim``;
    where it is narrower, all of it and random values in the other dimensions (word2vec trains those from them)."""
    matrix, coverage = packaged_vectors(name, vocab)
    words = matrix[len(SPECIAL_TOKENS) :]
    centred = words - words.mean(axis=0)
    if centred.shape[1] > dim:
        _, _, components = np.linalg.svd(centred, full_matrices=False)  # rows: directions of most variance first
        centred = centred @ components[:dim].T
    centred *= spread / max(float(centred.std()), 1e-12)
    out = np.zeros((len(vocab), dim), dtype=np.float32)
    out[len(SPECIAL_TOKENS) :, : centred.shape[1]] = centred
    if centred.shape[1] < dim:
        rng = np.random.default_rng(seed)
        out[len(SPECIAL_TOKENS) :, centred.shape[1] :] = rng.normal(0.0, spread, (len(words), dim - centred.shape[1]))
    return out, coverage
