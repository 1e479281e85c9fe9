"""Encoded batches as plain NumPy arrays: what an exported graph reads, built without torch.

The same layouts and truncation as ``data/batching.py`` (``hierarchical_batch``, ``flat_batch``), which
returns torch tensors and so cannot serve a torch-free predictor; ``tests/test_export.py`` checks the
two agree array for array, budgets included.

    hierarchical: words (S, W) int64, word_mask (S, W) bool, sentence_index (B, L) int64, sentence_mask (B, L) bool
    flat:         tokens (B, T) int64, mask (B, T) bool
"""

from __future__ import annotations

import math

import numpy as np

from docattn.data.encoding import EncodedCorpus, ragged_ranges

HIERARCHICAL_INPUTS = ("words", "word_mask", "sentence_index", "sentence_mask")
FLAT_INPUTS = ("tokens", "mask")


def word_cap(max_words: int | None, max_batch_words: int | None, max_batch_pairs: int | None) -> int | None:
    """The most words of one sentence (or flat document) read: no sequence may pass a budget alone."""
    caps = [x for x in (max_words, max_batch_words, max_batch_pairs and math.isqrt(max_batch_pairs)) if x]
    return min(caps) if caps else None


def sentences_read(corpus: EncodedCorpus, limits: dict) -> np.ndarray:
    """Per document, how many of its first sentences a model reads under ``limits`` (``batching.read_sizes``)."""
    cap = word_cap(limits.get("max_words"), limits.get("max_batch_words"), limits.get("max_batch_pairs"))
    lengths = corpus.sentence_lengths if cap is None else np.minimum(corpus.sentence_lengths, cap)
    sent_doc = np.repeat(np.arange(len(corpus)), corpus.sentence_counts)
    rank = np.arange(len(sent_doc)) - corpus.document_offsets[sent_doc]
    keep = rank < limits["max_sentences"] if limits.get("max_sentences") else np.ones(len(sent_doc), dtype=bool)
    for budget, cost in (
        (limits.get("max_batch_words"), lengths),
        (limits.get("max_batch_pairs"), lengths**2 + 2 * rank + 1),
    ):
        if budget:  # a document past a budget keeps the first sentences that fit (always its first)
            kept = np.where(keep, cost, 0)
            before = np.cumsum(kept) - kept
            within = before - before[corpus.document_offsets[:-1]][sent_doc] + kept
            keep &= (within <= budget) | (rank == 0)
    return np.bincount(sent_doc, weights=keep, minlength=len(corpus)).astype(np.int64)


def _pad_rows(tokens: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, max_len) ids and mask of the spans ``tokens[start:start + length]``; padding is id 0."""
    width = max(int(lengths.max()) if len(lengths) else 1, 1)
    cols = np.arange(width)
    mask = cols[None, :] < lengths[:, None]
    pos = np.where(mask, starts[:, None] + cols[None, :], 0)
    return np.where(mask, np.asarray(tokens)[pos], 0).astype(np.int64), mask


def hierarchical_arrays(corpus: EncodedCorpus, documents, limits: dict) -> dict[str, np.ndarray]:
    """The documents as one hierarchical batch: every read sentence is a row of ``words``."""
    docs = np.asarray(documents, dtype=np.int64)
    n_sent = corpus.sentence_counts[docs]
    if limits.get("max_sentences"):
        n_sent = np.minimum(n_sent, limits["max_sentences"])
    if limits.get("max_batch_words") or limits.get("max_batch_pairs"):
        n_sent = np.minimum(n_sent, sentences_read(corpus.subset(docs), limits))
    rows = ragged_ranges(corpus.document_offsets[docs], n_sent)  # sentence ids, document order
    lengths = corpus.sentence_lengths[rows]
    if cap := word_cap(limits.get("max_words"), limits.get("max_batch_words"), limits.get("max_batch_pairs")):
        lengths = np.minimum(lengths, cap)
    words, word_mask = _pad_rows(corpus.tokens, corpus.sentence_offsets[rows], lengths)
    first_row = np.cumsum(n_sent) - n_sent
    cols = np.arange(int(n_sent.max()))
    sentence_mask = cols[None, :] < n_sent[:, None]
    sentence_index = np.where(sentence_mask, first_row[:, None] + cols[None, :], 0).astype(np.int64)
    return {"words": words, "word_mask": word_mask, "sentence_index": sentence_index, "sentence_mask": sentence_mask}


def flat_arrays(corpus: EncodedCorpus, documents, limits: dict) -> dict[str, np.ndarray]:
    """The documents as single token sequences, each cut to the words a flat model reads."""
    docs = np.asarray(documents, dtype=np.int64)
    starts = corpus.sentence_offsets[corpus.document_offsets[docs]]
    lengths = corpus.sentence_offsets[corpus.document_offsets[docs + 1]] - starts
    if cap := word_cap(limits.get("max_tokens"), limits.get("max_batch_words"), limits.get("max_batch_pairs")):
        lengths = np.minimum(lengths, cap)
    tokens, mask = _pad_rows(corpus.tokens, starts, lengths)
    return {"tokens": tokens, "mask": mask}


def batch_arrays(corpus: EncodedCorpus, documents, layout: str, limits: dict) -> dict[str, np.ndarray]:
    """The graph inputs of ``documents`` for a model of ``layout`` ("hierarchical" or "flat")."""
    if layout == "hierarchical":
        return hierarchical_arrays(corpus, documents, limits)
    return flat_arrays(corpus, documents, limits)


def length_batches(corpus: EncodedCorpus, layout: str, batch_size: int) -> list[np.ndarray]:
    """Documents in batches of similar size (less padding), every document once; results go back by index."""
    hierarchical = layout == "hierarchical"
    keys = (corpus.max_sentence_lengths, corpus.sentence_counts) if hierarchical else (corpus.token_counts,)
    order = np.lexsort(keys)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
