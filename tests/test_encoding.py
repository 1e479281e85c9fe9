"""Ragged encoding, the on-disk cache and batching."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from docattn.data.batching import BucketBatchSampler, bucket_keys, flat_batch, hierarchical_batch
from docattn.data.corpus import Corpus
from docattn.data.encoding import EncodedCorpus, cached, encode_ids, ragged_ranges
from docattn.data.prepare import DataSettings, prepare, prepare_paths
from docattn.data.text import SEP, UNK
from docattn.errors import DataError


def test_encode_ids_splits_sentences_and_fills_empty_documents():
    docs = [[5, 6, SEP, 7, SEP], [], [SEP, SEP], [8, SEP, SEP, 9]]
    tokens, sent_off, doc_off = encode_ids(docs)
    assert tokens.tolist() == [5, 6, 7, UNK, UNK, 8, 9]
    assert sent_off.tolist() == [0, 2, 3, 4, 5, 6, 7]
    assert doc_off.tolist() == [0, 2, 3, 4, 6]


def test_ragged_ranges():
    assert ragged_ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist() == [5, 6, 9, 10, 11]


def _toy(n=50, seed=0):
    rng = np.random.default_rng(seed)
    docs = [
        sum(([*rng.integers(3, 30, rng.integers(1, 15))] + [SEP] for _ in range(rng.integers(1, 9))), [])
        for _ in range(n)
    ]
    tok, so, do = encode_ids(docs)
    return EncodedCorpus(tok, so, do, rng.integers(0, 3, n)), docs


def test_hierarchical_batch_matches_naive_layout():
    enc, docs = _toy()
    batch = hierarchical_batch(enc, [3, 1, 7], max_sentences=4, max_words=6)
    for b, d in enumerate([3, 1, 7]):
        sents = [s for s in np.split(np.array([t for t in docs[d]]), np.flatnonzero(np.array(docs[d]) == SEP) + 1)]
        sents = [s[s != SEP] for s in sents if len(s[s != SEP])][:4]
        assert int(batch.sentence_mask[b].sum()) == len(sents)
        for i, s in enumerate(sents):
            row = batch.sentence_index[b, i]
            n = int(batch.word_mask[row].sum())
            assert batch.words[row, :n].tolist() == s[:6].tolist()
            assert torch.all(batch.words[row, n:] == 0)
    assert batch.words.shape[1] <= 6 and batch.sentence_index.shape[1] <= 4


def test_a_zero_limit_means_no_limit():
    enc, _ = _toy()
    docs = list(range(len(enc)))
    whole, zero = hierarchical_batch(enc, docs), hierarchical_batch(enc, docs, max_sentences=0, max_words=0)
    assert torch.equal(whole.words, zero.words) and torch.equal(whole.sentence_index, zero.sentence_index)
    assert torch.equal(flat_batch(enc, docs).tokens, flat_batch(enc, docs, max_tokens=0).tokens)


def test_flat_batch_truncates_and_masks():
    enc, docs = _toy()
    batch = flat_batch(enc, [0, 2], max_tokens=10)
    for b, d in enumerate([0, 2]):
        words = [t for t in docs[d] if t != SEP][:10]
        assert batch.tokens[b, : len(words)].tolist() == words
        assert int(batch.mask[b].sum()) == len(words)


@pytest.mark.parametrize("world", [1, 2, 3])
def test_sampler_yields_every_document_exactly_once(world):
    enc, _ = _toy(n=103)
    seen = []
    for rank in range(world):
        sampler = BucketBatchSampler(bucket_keys(enc, "hierarchical"), 8, seed=1, num_replicas=world, rank=rank)
        sampler.set_epoch(2)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        seen += [d for b in batches for d in b]
    counts = np.bincount(seen, minlength=103)
    assert (counts >= 1).all()
    if world == 1:
        assert (counts == 1).all()
    else:  # padding repeats at most one batch per rank
        assert counts.sum() - 103 <= 8 * (world - 1)


@pytest.mark.parametrize("n, world", [(180, 8), (5, 4), (1, 3)])
def test_sampler_gives_every_rank_a_batch_when_batches_are_fewer_than_ranks(n, world):
    """DDP hangs if one rank steps fewer times than another: 180 documents in batches of 64 on 8 ranks."""
    keys = np.arange(n)[:, None]
    lengths = [len(list(BucketBatchSampler(keys, 64, num_replicas=world, rank=r))) for r in range(world)]
    assert lengths == [len(BucketBatchSampler(keys, 64, num_replicas=world, rank=0))] * world == [1] * world


def test_sampler_buckets_by_length_and_reshuffles():
    enc, _ = _toy(n=200)
    s = BucketBatchSampler(bucket_keys(enc, "hierarchical"), 16, seed=0)
    first = list(s)
    spread = np.mean([np.ptp(enc.sentence_counts[b]) for b in first])
    assert spread <= 1.0  # sorted by sentence count, batches hold similar documents
    s.set_epoch(1)
    assert list(s) != first


def test_subset_round_trip():
    enc, _ = _toy()
    sub = enc.subset([4, 2])
    assert (
        sub.tokens.tolist()
        == np.concatenate(
            [
                enc.tokens[
                    enc.sentence_offsets[enc.document_offsets[d]] : enc.sentence_offsets[enc.document_offsets[d + 1]]
                ]
                for d in (4, 2)
            ]
        ).tolist()
    )


def test_cache_is_atomic_and_reused(tmp_path):
    calls = []

    def build(folder):
        calls.append(1)
        (folder / "x.txt").write_text("done")

    a = cached("k1", build, tmp_path)
    b = cached("k1", build, tmp_path)
    assert a == b and len(calls) == 1 and (a / "x.txt").read_text() == "done"

    def crash(folder):
        (folder / "half.txt").write_text("partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cached("k2", crash, tmp_path)
    assert not (tmp_path / "k2").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["k1"]  # no temporary leftovers


def test_a_process_that_loses_the_rename_race_uses_the_winners_entry(tmp_path, monkeypatch):
    """Two runs sharing a cache: the other one renamed its entry in between our check and our rename."""
    from docattn.data import encoding

    rename = os.replace

    def racing(src, dst):
        if Path(dst).name == "k" and not Path(dst).exists():
            other = Path(tmp_path / ".other")
            other.mkdir()
            (other / "x.txt").write_text("theirs")
            (other / "COMPLETE").write_text("ok")
            rename(other, dst)  # the other process wins...
        return rename(src, dst)  # ...so ours fails: Directory not empty

    monkeypatch.setattr(encoding.os, "replace", racing)
    entry = cached("k", lambda folder: (folder / "x.txt").write_text("ours"), tmp_path)
    assert (entry / "x.txt").read_text() == "theirs" and sorted(p.name for p in tmp_path.iterdir()) == ["k"]


def test_cache_entries_get_the_permissions_of_a_plain_mkdir(tmp_path):
    """mkdtemp's 0700 locked the rest of a team out of a shared cache."""
    import os

    old = os.umask(0o022)
    try:
        entry = cached("k", lambda folder: (folder / "x.txt").write_text("done"), tmp_path)
    finally:
        os.umask(old)
    assert entry.stat().st_mode & 0o777 == 0o755
    shared = tmp_path / "team"
    shared.mkdir()
    shared.chmod(0o2775)  # a team folder: new folders inherit its group through the setgid bit
    if shared.stat().st_mode & 0o2000:  # some filesystems refuse setgid
        entry = cached("k", lambda folder: (folder / "x.txt").write_text("done"), shared)
        assert entry.stat().st_mode & 0o2000


def _write_jsonl(path, n, seed):
    import json

    from docattn.data import synthetic

    corpus = synthetic.make_corpus(n_docs=n, seed=seed)
    with open(path, "w") as f:
        for t, y in zip(corpus.texts, corpus.labels):
            f.write(json.dumps({"text": t, "label": y}) + "\n")


def test_prepare_paths_second_run_does_not_tokenize(tmp_path, monkeypatch):
    _write_jsonl(tmp_path / "train.jsonl", 300, 0)
    _write_jsonl(tmp_path / "test.jsonl", 100, 1)
    settings = DataSettings(min_count=2)
    first = prepare_paths(
        tmp_path / "train.jsonl", None, tmp_path / "test.jsonl", settings, cache_dir=tmp_path / "cache"
    )
    import docattn.data.text as text

    def boom(*a, **k):
        raise AssertionError("tokenized again")

    monkeypatch.setattr(text.Vocabulary, "encode_strings", boom)
    monkeypatch.setattr(text.Vocabulary, "build", boom)
    second = prepare_paths(
        tmp_path / "train.jsonl", None, tmp_path / "test.jsonl", settings, cache_dir=tmp_path / "cache"
    )
    assert isinstance(second.splits["train"].tokens, np.memmap)
    for k in first.splits:
        assert np.array_equal(first.splits[k].tokens, second.splits[k].tokens)
    assert second.vocab.tokens == first.vocab.tokens and second.labels.classes == first.labels.classes
    # a different setting is a different cache entry
    monkeypatch.undo()
    third = prepare_paths(
        tmp_path / "train.jsonl", None, tmp_path / "test.jsonl", DataSettings(min_count=3), cache_dir=tmp_path / "cache"
    )
    assert third.info["cache"] != second.info["cache"]


def test_a_damaged_cache_entry_is_rebuilt_and_no_cache_keeps_nothing(tmp_path):
    _write_jsonl(tmp_path / "train.jsonl", 300, 0)
    settings = DataSettings(min_count=2)
    first = prepare_paths(tmp_path / "train.jsonl", settings=settings, cache_dir=tmp_path / "cache")
    expected, classes = np.array(first.splits["train"].tokens), first.labels.classes  # copies: the files change below
    entry = Path(first.info["cache"])
    del first
    tokens = entry / "train" / "tokens.npy"
    tokens.write_bytes(tokens.read_bytes()[: tokens.stat().st_size // 2])  # a disk that filled up, a killed copy
    (entry / "labels.json").write_text("[")
    again = prepare_paths(tmp_path / "train.jsonl", settings=settings, cache_dir=tmp_path / "cache")
    assert np.array_equal(np.asarray(again.splits["train"].tokens), expected) and again.labels.classes == classes
    off = prepare_paths(tmp_path / "train.jsonl", settings=settings, use_cache=False)
    assert "cache" not in off.info and np.array_equal(off.splits["train"].tokens, expected)


def test_prepare_rejects_unseen_test_label_and_empty_input():
    train = Corpus(texts=["good film", "bad film"] * 5, labels=["pos", "neg"] * 5)
    test = Corpus(texts=["ok"], labels=["neutral"], source="test.csv")
    with pytest.raises(DataError, match="unseen in training"):
        prepare(train, None, test, DataSettings(min_count=1))
    with pytest.raises(DataError):
        prepare(Corpus(texts=[], labels=[]), None, None)


def test_validation_split_is_stratified():
    from docattn.data.splits import stratified_split

    labels = ["a"] * 90 + ["b"] * 10
    tr, va = stratified_split(labels, 0.3, seed=0)
    assert len(va) == 30 and sum(labels[i] == "b" for i in va) == 3
    assert set(tr) | set(va) == set(range(100)) and not set(tr) & set(va)
    tr2, va2 = stratified_split(labels, 0.3, seed=0)
    assert np.array_equal(va, va2)


def test_a_classes_file_beside_a_csv_is_part_of_its_fingerprint(tmp_path):
    """A Zhang CSV's class names come from classes.txt beside it: renaming them must not reuse the cache."""
    from docattn.data.encoding import fingerprint_path

    (tmp_path / "train.csv").write_text('"1","a"\n')
    before = fingerprint_path(tmp_path / "train.csv")
    (tmp_path / "classes.txt").write_text("pos\nneg\n")
    named = fingerprint_path(tmp_path / "train.csv")
    (tmp_path / "classes.txt").write_text("POS\nNEG\n")
    assert len({before, named, fingerprint_path(tmp_path / "train.csv")}) == 3
