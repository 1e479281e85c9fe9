"""Chunked preparation gives the arrays, vocabulary and splits of one-shot preparation, whatever the chunk
size and the number of worker processes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from docattn.data import synthetic
from docattn.data.corpus import Corpus, LabelMap
from docattn.data.encoding import encode_corpus
from docattn.data.prepare import DataSettings, prepare
from docattn.data.splits import held_out_split, label_set_strata, stratified_split
from docattn.data.text import Vocabulary, documents_to_strings

ARRAYS = ("tokens", "sentence_offsets", "document_offsets", "labels")


def one_shot(train: Corpus, valid=None, test=None, settings=None):
    """The reference: ``prepare`` as it was before chunks (whole corpora through each step at once)."""
    settings = settings or DataSettings()

    def strata(c):
        return label_set_strata(c.labels) if c.multi_label else c.labels

    if settings.test_fraction is not None or settings.cv_folds is not None:
        s = settings
        tr, te = held_out_split(strata(train), s.test_fraction, s.cv_folds, s.cv_fold, s.split_seed)
        train, test = train.subset(tr), train.subset(te)
    if valid is None:
        tr, va = stratified_split(strata(train), settings.valid_fraction, settings.split_seed)
        train, valid = train.subset(tr), train.subset(va)
    label_map = LabelMap.from_labels(train.labels, train.classes, train.multi_label)
    strings = documents_to_strings(train.texts, train.sentences, settings.text)
    vocab = Vocabulary.build(strings, settings.text, settings.min_count, settings.max_vocab)
    dropped: dict = {}
    splits = {"train": encode_corpus(train, vocab, label_map), "valid": encode_corpus(valid, vocab, label_map, dropped)}
    if test is not None:
        splits["test"] = encode_corpus(test, vocab, label_map, dropped)
    return vocab, label_map, splits, dropped


def _corpus(n: int = 90) -> Corpus:
    """Synthetic reviews, with an empty document, a one-word one and pre-split sentences among them."""
    base = synthetic.make_splits(n_train=n, n_test=10, seed=3)["train"]
    texts, labels = list(base.texts), list(base.labels)
    texts[4], texts[11] = "", "Fine."
    sentences = [None] * len(texts)
    sentences[7] = ["A pre-split sentence.", "And another one!"]
    return Corpus(texts=texts, labels=labels, sentences=sentences, source="toy")


def _same(a, b) -> None:
    vocab, labels, splits, dropped = a
    assert vocab.tokens == b.vocab.tokens
    assert labels.classes == b.labels.classes
    assert list(splits) == list(b.splits)
    for name, enc in splits.items():
        for array in ARRAYS:
            x, y = getattr(enc, array), getattr(b.splits[name], array)
            assert x.dtype == y.dtype and x.shape == y.shape, (name, array)
            assert x.tobytes() == y.tobytes(), (name, array)
    assert {k: v for k, v in b.info.items() if k in dropped} == dropped


@pytest.mark.parametrize("chunk, workers", [(1, 1), (7, 1), (1000, 1), (7, 2)])
def test_chunks_and_workers_give_the_one_shot_arrays(chunk, workers):
    corpus = _corpus()
    settings = DataSettings(min_count=2, prepare_chunk=chunk, prepare_workers=workers)
    _same(one_shot(corpus, settings=settings), prepare(corpus, settings=settings))


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_test_fraction_max_vocab_and_given_splits(chunk):
    corpus = _corpus()
    held = DataSettings(min_count=1, max_vocab=40, test_fraction=0.2, split_seed=4, prepare_chunk=chunk)
    _same(one_shot(corpus, settings=held), prepare(corpus, settings=held))
    folds = DataSettings(cv_folds=3, cv_fold=2, prepare_chunk=chunk)
    _same(one_shot(corpus, settings=folds), prepare(corpus, settings=folds))
    valid, test = corpus.subset(range(60, 75)), corpus.subset(range(75, 90))
    test = dataclasses.replace(test, labels=None)  # an unlabelled test split encodes as -1
    train, given = corpus.subset(range(60)), DataSettings(prepare_chunk=chunk)
    _same(one_shot(train, valid, test, given), prepare(train, valid, test, given))


@pytest.mark.parametrize("chunk", [1, 7])
def test_multi_label_and_mixed_label_types(chunk):
    corpus = _corpus(60)
    rng = np.random.default_rng(0)
    sets = [tuple(sorted({str(y), *rng.choice(["x", "y", "z"], rng.integers(0, 2)).tolist()})) for y in corpus.labels]
    multi = dataclasses.replace(corpus, labels=sets, multi_label=True)
    settings = DataSettings(min_count=1, prepare_chunk=chunk, test_fraction=0.25)
    _same(one_shot(multi, settings=settings), prepare(multi, settings=settings))
    # 1 and 1.0 are one class to the label map but two strata, as their texts differ
    mixed = dataclasses.replace(corpus, labels=[1 if i % 3 else 1.0 for i in range(len(corpus))])
    mixed = dataclasses.replace(mixed, labels=[y if i % 5 else 2 for i, y in enumerate(mixed.labels)])
    settings = DataSettings(min_count=1, prepare_chunk=chunk)
    _same(one_shot(mixed, settings=settings), prepare(mixed, settings=settings))


def test_split_membership_is_unchanged():
    corpus = _corpus()
    corpus.ids = [f"doc{i}" for i in range(len(corpus))]
    settings = DataSettings(test_fraction=0.3, prepare_chunk=7)
    reference = one_shot(corpus, settings=settings)[2]
    chunked = prepare(corpus, settings=settings).splits
    for name in ("train", "valid", "test"):
        assert len(chunked[name]) == len(reference[name])
        assert np.array_equal(chunked[name].labels, reference[name].labels)


def test_cache_files_are_what_np_save_writes(tmp_path):
    import csv

    from docattn.data.prepare import prepare_paths

    corpus = _corpus()
    with open(tmp_path / "train.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label"), *zip(corpus.texts, corpus.labels)])
    settings = DataSettings(min_count=2, prepare_chunk=7)
    data = prepare_paths(tmp_path / "train.csv", settings=settings, cache_dir=tmp_path / "cache")
    whole = prepare_paths(tmp_path / "train.csv", settings=DataSettings(min_count=2), use_cache=False)
    folder = tmp_path / "cache" / data.info["cache"].rsplit("/", 1)[-1]
    for name, enc in whole.splits.items():
        for array in ARRAYS:
            np.save(tmp_path / "expected.npy", getattr(enc, array))
            assert (folder / name / f"{array}.npy").read_bytes() == (tmp_path / "expected.npy").read_bytes()
