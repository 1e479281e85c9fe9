"""Batch budgets: a batch reads at most ``max_batch_words`` words and, for self-attention models, compares at
most ``max_batch_pairs`` word pairs; a longer document is read up to the budget, so memory follows settings."""

from __future__ import annotations

import numpy as np
import pytest

from docattn.data.batching import (
    BucketBatchSampler,
    batch_sampler,
    bucket_keys,
    flat_batch,
    hierarchical_batch,
    read_sizes,
    truncated_documents,
)
from docattn.data.encoding import EncodedCorpus, encode_ids
from docattn.data.text import SEP

LIMITS = {"max_sentences": 1000, "max_words": 1000}


def _corpus(sizes: list[list[int]]) -> EncodedCorpus:
    """Documents of sentences of the given lengths (word ids 3, 4, ...)."""
    docs = [sum(([3 + (i % 50) for i in range(n)] + [SEP] for n in sentences), []) for sentences in sizes]
    tokens, sentence_offsets, document_offsets = encode_ids(docs)
    return EncodedCorpus(tokens, sentence_offsets, document_offsets, np.arange(len(sizes)) % 2)


def _mixed(seed: int = 0) -> EncodedCorpus:
    rng = np.random.default_rng(seed)
    sizes = [list(rng.integers(1, 40, rng.integers(1, 12))) for _ in range(300)]
    sizes += [[400] * 30, [900] * 3, [5] * 800]  # long documents: over a small budget alone
    return _corpus(sizes)


def _read_words(enc: EncodedCorpus, docs, limits: dict) -> list[int]:
    batch = hierarchical_batch(
        enc,
        docs,
        limits.get("max_sentences"),
        limits.get("max_words"),
        limits.get("max_batch_words"),
        limits.get("max_batch_pairs"),
    )
    rows = batch.word_mask.sum(1).numpy()
    return [int(rows[batch.sentence_index[b][batch.sentence_mask[b]].numpy()].sum()) for b in range(len(docs))]


@pytest.mark.parametrize(
    "budget",
    [{"max_batch_words": 2_000}, {"max_batch_pairs": 300_000}, {"max_batch_words": 3_000, "max_batch_pairs": 500_000}],
)
def test_no_batch_passes_its_budget_and_every_document_is_read_once(budget):
    enc, limits = _mixed(), {**LIMITS, **budget}
    sampler = batch_sampler(enc, "hierarchical", limits, 64, seed=3)
    _, _, costs = read_sizes(enc, limits)
    batches = list(sampler)
    assert sorted(d for b in batches for d in b) == list(range(len(enc)))
    assert len(batches) == len(sampler) > len(list(batch_sampler(enc, "hierarchical", LIMITS, 64)))
    for docs in batches:
        words = _read_words(enc, docs, limits)
        assert words == costs[docs, 0].tolist()  # what the sampler priced is what the batch reads
        for column, name in enumerate(("max_batch_words", "max_batch_pairs")):
            if limits.get(name):
                assert costs[docs, column].sum() <= limits[name]


def test_the_number_of_batches_is_the_same_every_epoch():
    enc, limits = _mixed(), {**LIMITS, "max_batch_words": 2_000}
    sampler = batch_sampler(enc, "hierarchical", limits, 64, seed=0)
    counts = set()
    for epoch in range(4):
        sampler.set_epoch(epoch)
        counts.add(len(list(sampler)))
    assert counts == {len(sampler)}


def test_a_document_past_the_budget_is_read_up_to_it_and_counted():
    enc = _corpus([[10, 10], [400] * 30, [5] * 800])
    limits = {**LIMITS, "max_batch_words": 2_000}
    assert _read_words(enc, [0, 1, 2], limits) == [20, 2_000, 2_000]  # 5 sentences of 400, 400 sentences of 5
    assert truncated_documents(enc, "hierarchical", limits) == 2
    assert truncated_documents(enc, "hierarchical", LIMITS) == 0
    one = _corpus([[5_000]])  # one sentence longer than the budget keeps the budget's words
    assert _read_words(one, [0], {"max_batch_words": 2_000}) == [2_000]


def test_the_pair_budget_counts_sentence_pairs_too():
    enc = _corpus([[2] * 100])  # 100 sentences of 2 words: 400 word pairs, 10,000 sentence pairs
    (n_sent,), _, ((words, pairs),) = read_sizes(enc, {"max_batch_pairs": 2_500})
    assert (n_sent, words) == (48, 96) and pairs == 48 * 4 + 48**2 <= 2_500 < 49 * 4 + 49**2


def test_flat_documents_are_cut_at_the_budget():
    enc = _corpus([[3_000], [10]])
    assert flat_batch(enc, [0, 1], max_batch_words=1_000).mask.sum(1).tolist() == [1_000, 10]
    assert flat_batch(enc, [0, 1], max_batch_pairs=250_000).mask.sum(1).tolist() == [500, 10]
    assert bucket_keys(enc, "flat", {"max_batch_words": 1_000})[:, 0].tolist() == [1_000, 10]


def test_without_budgets_batches_are_as_before_and_a_loose_budget_cuts_nothing():
    enc = _mixed()
    before = [list(b) for b in BucketBatchSampler(bucket_keys(enc, "hierarchical", LIMITS), 64, seed=2)]
    assert [list(b) for b in batch_sampler(enc, "hierarchical", LIMITS, 64, seed=2)] == before
    loose = [list(b) for b in batch_sampler(enc, "hierarchical", {**LIMITS, "max_batch_words": 10**9}, 64, seed=2)]
    assert [len(b) for b in loose] == [len(b) for b in before]


@pytest.mark.parametrize("block", [1, 7, 64])
def test_sizes_measured_a_block_of_documents_at_a_time_are_the_whole_corpus_sizes(monkeypatch, block):
    from docattn.data import arrays

    enc = _mixed(seed=4)
    for limits in ({**LIMITS, "max_batch_words": 2_000}, {**LIMITS, "max_batch_pairs": 300_000}, LIMITS):
        whole = arrays.read_sizes(enc, limits)
        monkeypatch.setattr(arrays, "SIZES_BLOCK", block)
        parts = arrays.read_sizes(enc, limits)
        monkeypatch.setattr(arrays, "SIZES_BLOCK", 1 << 30)
        assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(whole, parts))
