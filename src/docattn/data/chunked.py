"""Preparation in chunks: memory set by the chunk size, not by the corpus, and the same arrays as one chunk.

Two passes over each input, each one chunk of documents at a time, and one over the written arrays:

1. labels only: a compact code per document, from which the validation and test documents are drawn
   exactly as ``stratified_split`` / ``held_out_split`` draw them from the whole list of labels;
2. every document's text split into sentences, tokenized and encoded with a vocabulary of its chunk's own
   words (the tokenizer's trainer and encoder, in Rust), the training documents' words counted, and the
   arrays appended, chunk after chunk, to each split's arrays: in memory, or to ``.npy`` files written in
   place (``NpyAppender``), under ids ``WordIds`` gives each word met;
3. from the counts, the vocabulary ``Vocabulary.build`` gives (word counts do not depend on the order they
   arrive in), and every token rewritten to its id there (``_remap_file``), which is numpy only.

Splitting, counting and encoding run in ``workers`` processes when asked, one core each (their tokenizer on
one thread), so they use every core without crowding it; chunks are cut into one piece per worker and come
back in input order. Workers receive texts and settings and return words and arrays, never pickled objects of
ours.
"""

from __future__ import annotations

import io
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from docattn.data.corpus import Corpus, LabelMap
from docattn.data.encoding import EncodedCorpus, encode_ids
from docattn.data.text import SEP, SPECIAL_TOKENS, UNK, TextConfig, Vocabulary, distinct_words, documents_to_strings
from docattn.errors import DataError, DocattnError

ChunkSource = Callable[[], Iterator[Corpus]]  # a fresh pass over one input's documents, chunk by chunk
TRAIN, VALID, TEST = 0, 1, 2
SPLIT_NAMES = ("train", "valid", "test")


def corpus_chunks(corpus: Corpus, size: int) -> ChunkSource:
    """An in-memory corpus as a chunk source (the Python API's ``prepare``)."""

    def chunks() -> Iterator[Corpus]:
        for start in range(0, len(corpus), size):
            yield corpus.subset(range(start, min(start + size, len(corpus))))

    return chunks


@dataclass
class LabelScan:
    """Pass 1 of one input: its labels as codes into ``values`` (or, multi-label, as tuples), and what the
    whole read says of them."""

    documents: int = 0
    values: list = field(default_factory=list)  # distinct labels, first seen first
    codes: np.ndarray | None = None  # (documents,) index into values; None for unlabelled or multi-label input
    rows: list[tuple] | None = None  # multi-label: each document's labels
    labelled: bool = True
    classes: list | None = None
    source: str = ""

    @property
    def multi_label(self) -> bool:
        return self.rows is not None

    def strata(self, documents: np.ndarray) -> np.ndarray | list:
        """What the splits stratify on, for these documents: label codes in the order of their text, or the
        rarest label of each multi-label document among these documents."""
        if self.multi_label:
            from docattn.data.splits import label_set_strata

            return label_set_strata([self.rows[i] for i in documents])
        by_text = np.unique(np.asarray([str(v) for v in self.values]), return_inverse=True)[1].reshape(-1)
        return by_text[self.codes[documents]]

    def labels_of(self, documents: np.ndarray) -> list:
        """What a label map is built from: these documents' label sets (multi-label), else their distinct labels."""
        if self.multi_label:
            return [self.rows[i] for i in documents]
        return [self.values[c] for c in np.unique(self.codes[documents])]


def scan_labels(source: ChunkSource) -> LabelScan:
    """Pass 1: every label of an input, kept as one small integer per document (multi-label: a tuple)."""
    scan, seen, segments = LabelScan(), {}, []
    for chunk in source():
        if not scan.documents:
            scan.source, scan.classes = chunk.source, chunk.classes
        scan.documents += len(chunk)
        if chunk.labels is None:
            scan.labelled = False
        elif chunk.multi_label:
            segments.append([tuple(y) for y in chunk.labels])
        else:  # a label's type is part of its key, so 1 and True stay two strata, as their texts are
            keys = [(type(y), y) for y in chunk.labels]
            segments.append(np.fromiter((seen.setdefault(k, len(seen)) for k in keys), np.int64, len(keys)))
    scan.values = [y for _, y in seen]
    if any(isinstance(part, list) for part in segments):  # chunks read before a label set showed up: sets of one
        scan.rows = [row for p in segments for row in (p if isinstance(p, list) else ((scan.values[c],) for c in p))]
    else:
        scan.codes = np.concatenate(segments) if segments else np.zeros(0, dtype=np.int64)
    if isinstance(source, FileChunks):  # a corpus in memory has its labels settled already
        source.settle(scan)
    return scan


def draw_parts(scan: LabelScan, settings, has_valid: bool) -> np.ndarray:
    """(documents,) int8: the split (TRAIN, VALID, TEST) of each document of the training input, drawn as
    ``prepare`` draws them from whole corpora: first the test documents, then validation from the rest."""
    from docattn.data.splits import held_out_split_codes, stratified_split_codes

    parts = np.full(scan.documents, TRAIN, dtype=np.int8)
    train = np.arange(scan.documents)
    if settings.test_fraction is not None or settings.cv_folds is not None:
        strata = _codes(scan.strata(train))
        tr, te = held_out_split_codes(
            strata, settings.test_fraction, settings.cv_folds, settings.cv_fold, settings.split_seed
        )
        parts[te], train = TEST, tr
    if not has_valid:
        _, va = stratified_split_codes(_codes(scan.strata(train)), settings.valid_fraction, settings.split_seed)
        parts[train[va]] = VALID
    return parts


def _codes(strata) -> np.ndarray:
    if isinstance(strata, np.ndarray):
        return strata
    from docattn.data.splits import label_codes

    return label_codes(strata)


# --------------------------------------------------------------------------- arrays written a chunk at a time

_HEADER = 128  # bytes of the header np.save writes for a 1-D or 2-D array of any size that fits on a disk


class NpyAppender:
    """An ``.npy`` file grown a chunk at a time: room for the header first, the header np.save would write
    once the length is known, so the file is byte for byte what ``np.save`` gives for the whole array."""

    def __init__(self, path: Path, dtype, row_shape: tuple = ()):
        self.path, self.dtype, self.row_shape, self.rows = Path(path), np.dtype(dtype), tuple(row_shape), 0
        self.file = open(self.path, "wb")  # noqa: SIM115 - open across appends, closed by close()
        self.file.write(b"\0" * _HEADER)

    def append(self, array: np.ndarray) -> None:
        np.ascontiguousarray(array, dtype=self.dtype).tofile(self.file)
        self.rows += len(array)

    def close(self) -> None:
        header = io.BytesIO()
        shape = (self.rows, *self.row_shape)
        descr = np.lib.format.dtype_to_descr(self.dtype)
        np.lib.format.write_array_header_1_0(header, {"descr": descr, "fortran_order": False, "shape": shape})
        if len(header.getvalue()) != _HEADER:  # a shape beyond any disk: say so rather than write a bad file
            raise DataError(f"{self.path}: an array of shape {shape} is too large for this cache")
        self.file.seek(0)
        self.file.write(header.getvalue())
        self.file.close()


class _MemoryAppender:
    def __init__(self, dtype, row_shape: tuple = ()):
        self.dtype, self.row_shape, self.parts = np.dtype(dtype), tuple(row_shape), []

    def append(self, array: np.ndarray) -> None:
        self.parts.append(np.asarray(array, dtype=self.dtype))

    def close(self) -> np.ndarray:
        return np.concatenate(self.parts) if self.parts else np.zeros((0, *self.row_shape), dtype=self.dtype)


class SplitWriter:
    """One split's encoded arrays, appended chunk after chunk; offsets shifted by what came before, so the
    result is what ``encode_ids`` gives for all the split's documents at once."""

    def __init__(self, folder: Path | None, label_width: int | None):
        labels = (np.int8, (label_width,)) if label_width else (np.int64, ())  # multi-label: a 0/1 matrix
        kinds = {"tokens": (np.int32, ()), "sentence_offsets": (np.int64, ()), "document_offsets": (np.int64, ())}
        kinds["labels"] = labels
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.arrays = folder, {}
        for name, (dtype, row) in kinds.items():
            on_disk = folder is not None
            self.arrays[name] = (
                NpyAppender(folder / f"{name}.npy", dtype, row) if on_disk else _MemoryAppender(dtype, row)
            )
        self.arrays["sentence_offsets"].append(np.zeros(1))
        self.arrays["document_offsets"].append(np.zeros(1))
        self.tokens = self.sentences = self.documents = 0

    def add(self, encoded: tuple[np.ndarray, np.ndarray, np.ndarray], labels: np.ndarray) -> None:
        tokens, sentence_offsets, document_offsets = encoded
        self.arrays["tokens"].append(tokens)
        self.arrays["sentence_offsets"].append(sentence_offsets[1:] + self.tokens)
        self.arrays["document_offsets"].append(document_offsets[1:] + self.sentences)
        self.arrays["labels"].append(labels)
        self.tokens += len(tokens)
        self.sentences += len(sentence_offsets) - 1
        self.documents += len(document_offsets) - 1

    def close(self) -> EncodedCorpus | None:
        """The split's arrays in memory; None when they went to files (loading them is the caller's choice)."""
        arrays = {name: a.close() for name, a in self.arrays.items()}
        return EncodedCorpus(**arrays) if self.folder is None else None


# --------------------------------------------------------------------------- worker processes


_ENCODE_BATCH = 1000  # documents the tokenizer encodes at once


def _process_chunk(job: tuple) -> tuple:
    """A chunk's documents encoded with a vocabulary of their own words: (words, counts, tokens,
    sentence_offsets, document_offsets), token id ``3 + i`` being ``words[i]`` (0-2 the special tokens) and
    ``counts[id]`` how often the tokenizer met it, the SEP character included (as its trainer counts it)."""
    texts, sentences, text_json = job
    config = TextConfig.from_json(text_json)
    strings = documents_to_strings(texts, sentences, config)
    words = distinct_words(strings, config)
    local = Vocabulary(SPECIAL_TOKENS + words, config, min_count=1)
    parts, met = SplitWriter(None, None), 0  # joins the batches; labels come later
    for start in range(0, len(strings), _ENCODE_BATCH):  # the tokenizer's encodings take ~100 bytes a token
        ids = local.encode_strings(strings[start : start + _ENCODE_BATCH])
        met += sum(map(len, ids))
        parts.add(encode_ids(ids), np.zeros(0))
    encoded = parts.close()
    counts = np.bincount(encoded.tokens, minlength=len(local))
    # every word is in the chunk's vocabulary, so each UNK is one encode_ids gave an empty document, not a word;
    # the SEPs it dropped are what the tokenizer met beyond the words
    counts[SEP] = met - (len(encoded.tokens) - counts[UNK])
    counts[UNK] = 0
    return words, counts, encoded.tokens, encoded.sentence_offsets, encoded.document_offsets


def _one_tokenizer_thread() -> None:
    """A worker's start: its tokenizer runs on one thread (unless the user set TOKENIZERS_PARALLELISM), since
    the workers already take a core each and the tokenizer's own threads would only crowd them."""
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class ChunkPool:
    """``_process_chunk`` over jobs in ``workers`` processes (0: in this one), results in job order, with at
    most two jobs per worker waiting, so a long input is never read ahead into memory."""

    def __init__(self, workers: int, chunk: int):
        self.workers, self.chunk, self.executor = max(int(workers), 0), chunk, None
        if self.workers:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            # spawn: a forked child would inherit the tokenizer's thread pool, which deadlocks or runs serially
            context = multiprocessing.get_context("spawn")
            self.executor = ProcessPoolExecutor(self.workers, mp_context=context, initializer=_one_tokenizer_thread)

    @property
    def piece(self) -> int:
        """Documents per job: a chunk split among the workers, so an input of one chunk keeps them all busy."""
        return max(1, -(-self.chunk // max(self.workers, 1)))

    def map(self, tagged_jobs: Iterable[tuple]) -> Iterator[tuple]:
        """(tag, result) for each (tag, job); tags stay in this process."""
        if self.executor is None:
            for tag, job in tagged_jobs:
                yield tag, _process_chunk(job)
            return
        from concurrent.futures.process import BrokenProcessPool

        waiting: deque = deque()
        try:
            for tag, job in tagged_jobs:
                waiting.append((tag, self.executor.submit(_process_chunk, job)))
                if len(waiting) >= 2 * self.workers:  # two chunks' worth of pieces at most
                    tag, future = waiting.popleft()
                    yield tag, future.result()
            while waiting:
                tag, future = waiting.popleft()
                yield tag, future.result()
        except BrokenProcessPool:  # killed by the system (out of memory, most often): one line, not a traceback
            raise DocattnError(
                f"a preparation worker process died; try a smaller prepare_chunk (now {self.chunk}) or "
                "prepare_workers=0"
            ) from None

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(cancel_futures=True)

    def __enter__(self) -> ChunkPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _jobs(chunk: Corpus, parts: np.ndarray, text_json: dict, piece: int):
    """Jobs of at most ``piece`` documents of one split each, in order, tagged with the split and documents;
    the writers append them in this order, so the pieces give the arrays the chunk would."""
    for split in (TRAIN, VALID, TEST):
        picked = np.flatnonzero(parts == split)
        for start in range(0, len(picked), piece):
            rows = picked[start : start + piece]
            sub = chunk if len(rows) == len(chunk) else chunk.subset(rows.tolist())
            yield (split, sub), (sub.texts, sub.sentences, text_json)


# --------------------------------------------------------------------------- the passes


def prepare_chunked(
    inputs: dict[str, ChunkSource], settings, folder: Path | None = None
) -> tuple[Vocabulary, LabelMap, dict[str, EncodedCorpus], dict]:
    """(vocabulary, label map, encoded splits, info) of the inputs "train" and optionally "valid" and "test";
    with ``folder`` the splits' arrays are written there (and the splits returned are None), else kept in memory."""
    t0 = time.perf_counter()
    scan = scan_labels(inputs["train"])
    if scan.documents == 0:
        raise DataError(f"{scan.source or 'training data'}: no documents")
    if not scan.labelled:
        raise DataError(f"{scan.source or 'training data'}: documents have no labels")
    # labels checked against the source's classes under the user's own document numbers, before splits
    LabelMap.from_labels(scan.labels_of(np.arange(scan.documents)), scan.classes, scan.multi_label)
    if "test" in inputs and (settings.test_fraction is not None or settings.cv_folds is not None):
        raise DataError(
            f"{_source_name(inputs['test']) or 'the test data'}: the data has a test split of its own, so "
            "test_fraction / cv_folds (--test-fraction, --cv) would test on other documents; drop one"
        )
    parts = draw_parts(scan, settings, "valid" in inputs)
    training = np.flatnonzero(parts == TRAIN)
    label_map = LabelMap.from_labels(scan.labels_of(training), scan.classes, scan.multi_label)
    names = ["train", "valid"] + (["test"] if "test" in inputs or (parts == TEST).any() else [])
    width = len(label_map) if label_map.multi_label else None
    writers = {name: SplitWriter(folder / name if folder is not None else None, width) for name in names}
    with ChunkPool(settings.prepare_workers, settings.prepare_chunk) as pool:
        words, dropped = encode_inputs(inputs, parts, settings.text, label_map, pool, writers)
    for name, writer in writers.items():
        if writer.documents == 0:
            raise DataError(f"{_source_name(inputs.get(name, inputs['train'])) or 'input'}: no documents to encode")
    vocab = Vocabulary.from_counts(words.words, words.counts, settings.text, settings.min_count, settings.max_vocab)
    lookup = words.lookup(vocab)
    splits = {name: writer.close() for name, writer in writers.items()}
    for name, encoded in splits.items():
        if encoded is not None:
            encoded.tokens = lookup[encoded.tokens]
        else:
            _remap_file(folder / name / "tokens.npy", lookup)
    info = {
        "documents": {name: writer.documents for name, writer in writers.items()},
        "vocab_size": len(vocab),
        "seconds": round(time.perf_counter() - t0, 2),
        **dropped,
    }
    return vocab, label_map, splits, info


def _source_name(source: ChunkSource) -> str:
    chunks = source()
    first = next(chunks, None)
    getattr(chunks, "close", lambda: None)()
    return first.source if first is not None else ""


class WordIds:
    """Every word met so far under an id of its own (the special tokens first, then in the order met), and how
    often the training documents hold each: what chunks are encoded with until the vocabulary is known."""

    def __init__(self):
        self.index = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
        self.counts = np.zeros(1 << 16, dtype=np.int64)

    @property
    def words(self) -> list[str]:
        return list(self.index)

    def add(self, words: list[str], counts: np.ndarray, training: bool) -> np.ndarray:
        """(chunk ids,) int32: the id here of each id a chunk was encoded with (``_process_chunk``: the special
        tokens, then ``words``); the chunk's ``counts`` are added where ``training``."""
        index = self.index
        ids = np.fromiter((index.setdefault(w, len(index)) for w in words), dtype=np.int32, count=len(words))
        ids = np.concatenate([np.arange(len(SPECIAL_TOKENS), dtype=np.int32), ids])
        if len(index) > len(self.counts):
            self.counts = np.concatenate([self.counts, np.zeros(max(len(index), len(self.counts)), np.int64)])
        if training:
            self.counts[ids] += counts  # ids are distinct, so a fancy-indexed add counts each once
        return ids

    def lookup(self, vocab: Vocabulary) -> np.ndarray:
        """(words met,) int32: each word's id in ``vocab``, UNK for the words it left out."""
        return np.fromiter((vocab.index.get(w, UNK) for w in self.index), dtype=np.int32, count=len(self.index))


def encode_inputs(inputs, parts, text: TextConfig, label_map: LabelMap, pool: ChunkPool, writers: dict):
    """Pass 2: every document encoded, with the ids of ``WordIds``, and appended to its split's writer, the
    training documents' words counted on the way; returns (the WordIds, what encoding dropped: multi-label
    classes unseen in training). ``_remap_file`` then gives the words their vocabulary's ids."""
    from docattn.data.encoding import encode_labels

    text_json, dropped, words = text.to_json(), {}, WordIds()

    def tagged():
        for name, source in inputs.items():
            start = 0
            for chunk in source():
                if name == "valid" and chunk.labels is None:
                    raise DataError(
                        f"{chunk.source or 'validation data'}: documents have no labels; validation needs them "
                        "to choose the best weights"
                    )
                fixed = np.full(len(chunk), VALID if name == "valid" else TEST, dtype=np.int8)
                chunk_parts = parts[start : start + len(chunk)] if name == "train" else fixed
                start += len(chunk)
                yield from _jobs(chunk, chunk_parts, text_json, pool.piece)

    for (split, sub), (chunk_words, counts, tokens, *offsets) in pool.map(tagged()):
        ids = words.add(chunk_words, counts, training=split == TRAIN)
        labels = encode_labels(sub, label_map, dropped if split != TRAIN else None)
        writers[SPLIT_NAMES[split]].add((ids[tokens], *offsets), labels)
    return words, dropped


_REMAP = 1 << 22  # tokens rewritten at a time in a cache file


def _remap_file(path: Path, lookup: np.ndarray) -> None:
    """Pass 3: the word ids of a ``tokens.npy`` that ``NpyAppender`` wrote replaced by ``lookup``'s, in place, a
    slice at a time. Read and written, not memory-mapped: the mapped pages of a whole cache would count in the
    process's resident memory, which then grew with the corpus."""
    with open(path, "r+b") as f:
        f.seek(_HEADER)
        while True:
            at = f.tell()
            part = np.fromfile(f, dtype=np.int32, count=_REMAP)
            if not len(part):
                break
            f.seek(at)
            lookup[part].astype(np.int32, copy=False).tofile(f)


# --------------------------------------------------------------------------- inputs from files


def input_chunks(train_path, valid_path, test_path, reader_options: dict | None, size: int):
    """({"train": source, ...}, skipped): chunk sources of the inputs ``read_inputs`` reads, and a function
    giving each split's reader counts (skipped empty documents...) once the sources have been read.
    One-split files are streamed; folders, archives and stdin are read whole, then cut into chunks."""
    options = dict(reader_options or {})
    paths = {"train": train_path, "valid": valid_path, "test": test_path}
    if all(p is None or _streamable(p, options) for p in paths.values()):
        files = {name: FileChunks(p, size, options) for name, p in paths.items() if p is not None}
        return files, lambda: {name: f.stats for name, f in files.items() if f.stats}
    corpora = read_inputs(train_path, valid_path, test_path, reader_options)
    sources = {name: corpus_chunks(corpus, size) for name, corpus in corpora.items()}
    return sources, lambda: {k: c.stats for k, c in corpora.items() if c.stats}


_STREAMED = ("csv", "tsv", "jsonl", "zhang", "tang", "fasttext", "lines")  # formats of one-split files


def _streamable(path, options: dict) -> bool:
    from docattn.data.readers import detect_format
    from docattn.data.readers.detection import _is_archive

    path = Path(path)
    if str(path) == "-" or not path.is_file() or _is_archive(path):
        return False  # stdin cannot be read twice; archives and folders may hold several splits
    return (options.get("format") or detect_format(path)) in _STREAMED


class FileChunks:
    """A one-split file as a chunk source, read afresh a chunk at a time on every pass (readers/stream.py);
    once the first pass has seen every label, later passes give the labels a whole read would (ints...)."""

    def __init__(self, path, size: int, options: dict):
        self.path, self.size, self.options = path, size, options
        self.stats, self.relabel, self.whole = {}, None, None

    def __call__(self) -> Iterator[Corpus]:
        from docattn.data.readers.stream import iter_chunks

        with iter_chunks(self.path, self.size, **self.options) as chunks:
            for chunk in chunks:
                if self.relabel is not None and chunk.labels is not None:
                    chunk.labels = self.relabel(chunk.labels)
                yield chunk
            self.whole, self.stats = chunks, chunks.stats

    def settle(self, scan: LabelScan) -> None:
        """What only the whole read knows: the classes, and whether labels that are all integers become ints."""
        from docattn.data.readers.stream import integer_labels

        scan.classes = self.whole.classes
        if not self.whole.integer_labels or not scan.labelled:
            return
        flat = list(dict.fromkeys(y for row in scan.rows for y in row)) if scan.multi_label else scan.values
        converted = integer_labels(flat)
        if converted is flat:
            return
        to = dict(zip(flat, converted))
        self.relabel = lambda labels: [tuple(to[x] for x in y) if isinstance(y, tuple) else to[y] for y in labels]
        if scan.multi_label:
            scan.rows = self.relabel(scan.rows)
        else:
            scan.values = self.relabel(scan.values)


def read_inputs(train_path, valid_path=None, test_path=None, reader_options: dict | None = None) -> dict[str, Corpus]:
    """Train/valid/test corpora from paths; a source holding several splits fills the missing ones."""
    from docattn.data.readers import read_splits

    opts = reader_options or {}
    found = read_splits(train_path, **opts)
    if "train" in found:
        out = dict(found)
    elif "all" in found:
        out = {"train": found["all"]}
    else:
        raise DataError(f"{train_path}: no training split (found {sorted(found)})")
    for name, path in (("valid", valid_path), ("test", test_path)):
        if path is not None:
            split = read_splits(path, **opts)
            if name not in split and "all" not in split:  # never another split: a source's train is no validation data
                raise DataError(
                    f"{path} holds the splits {sorted(split)} but no {name} split; give --{name} a file or "
                    f"folder of {name} documents only"
                )
            out[name] = split.get(name) or split["all"]
    return out
