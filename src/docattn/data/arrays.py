"""Encoded documents as padded NumPy arrays, without torch: what a batch holds, under the read limits.

``data/batching.py`` wraps these arrays in torch tensors for training and inference; an exported ONNX
graph reads them as they are (``docattn.onnx``). A batch reads at most ``max_batch_words`` words and, for
self-attention models, ``max_batch_pairs`` word pairs; one document past a budget is read up to it.

    hierarchical: words (S, W) int64, word_mask (S, W) bool, sentence_index (B, L) int64, sentence_mask (B, L) bool
    flat:         tokens (B, T) int64, mask (B, T) bool
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from docattn.data.encoding import EncodedCorpus, ragged_ranges


def pad_rows(tokens: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, max_len) ids and mask of token spans ``tokens[start:start+length]``; padding is id 0."""
    width = max(int(lengths.max()) if len(lengths) else 1, 1)
    cols = np.arange(width)
    mask = cols[None, :] < lengths[:, None]
    pos = np.where(mask, starts[:, None] + cols[None, :], 0)
    return np.where(mask, np.asarray(tokens)[pos], 0).astype(np.int64), mask


def word_cap(max_words: int | None, max_batch_words: int | None, max_batch_pairs: int | None) -> int | None:
    """The most words of one sentence (or flat document) that are read: no sequence may pass a budget alone."""
    caps = [x for x in (max_words, max_batch_words, max_batch_pairs and math.isqrt(max_batch_pairs)) if x]
    return min(caps) if caps else None


SIZES_BLOCK = 65_536  # documents read_sizes measures at a time: its temporaries are per sentence


def read_sizes(corpus: EncodedCorpus, limits: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per document: the sentences it is read to, its longest sentence read, and its cost (n, 2): the words read
    and the word pairs a self-attention over them compares (each sentence's words, then the document's
    sentences). A document past ``max_batch_words`` or ``max_batch_pairs`` keeps the first sentences that fit.
    Measured a block of documents at a time, so the memory beyond the (n,) results is bounded by the block."""
    d_off, s_off = corpus.document_offsets, corpus.sentence_offsets
    parts = []
    for a in range(0, max(len(corpus), 1), SIZES_BLOCK):
        b = min(a + SIZES_BLOCK, len(corpus))
        first, last = int(d_off[a]), int(d_off[b])
        lengths = np.diff(np.asarray(s_off[first : last + 1]))
        parts.append(_block_sizes(lengths, np.asarray(d_off[a : b + 1]) - first, limits))
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def _block_sizes(lengths: np.ndarray, doc_offsets: np.ndarray, limits: dict) -> tuple:
    """``read_sizes`` of consecutive documents: their sentences' ``lengths`` and ``doc_offsets`` into them."""
    n_docs = len(doc_offsets) - 1
    cap = word_cap(limits.get("max_words"), limits.get("max_batch_words"), limits.get("max_batch_pairs"))
    lengths = lengths if cap is None else np.minimum(lengths, cap)
    sent_doc = np.repeat(np.arange(n_docs), np.diff(doc_offsets))
    rank = np.arange(len(sent_doc)) - doc_offsets[sent_doc]
    keep = rank < limits["max_sentences"] if limits.get("max_sentences") else np.ones(len(sent_doc), dtype=bool)
    for budget, cost in (
        (limits.get("max_batch_words"), lengths),
        (limits.get("max_batch_pairs"), lengths**2 + 2 * rank + 1),
    ):
        if budget:  # cost + 2 rank + 1: the sentence-level pairs grow from rank^2 to (rank + 1)^2
            kept = np.where(keep, cost, 0)
            before = np.cumsum(kept) - kept  # cost of the block before each sentence
            within = before - before[doc_offsets[:-1]][sent_doc] + kept  # ... of its document, with it
            keep &= (within <= budget) | (rank == 0)
    n_sent = np.bincount(sent_doc, weights=keep, minlength=n_docs).astype(np.int64)
    width = np.zeros(n_docs, dtype=np.int64)
    np.maximum.at(width, sent_doc[keep], lengths[keep])
    read = np.where(keep, lengths, 0)
    words = np.bincount(sent_doc, weights=read, minlength=n_docs)
    pairs = np.bincount(sent_doc, weights=read.astype(np.float64) ** 2, minlength=n_docs) + n_sent**2
    return n_sent, width, np.stack([words, pairs], axis=1).astype(np.int64)


def _may_pass_a_budget(corpus: EncodedCorpus, docs: np.ndarray, limits: dict) -> bool:
    """Whether a document could pass a batch budget alone: n words compare at most 2 n^2 pairs (their
    sentences' words and the sentences themselves), so most batches skip the exact count."""
    words, pairs = limits.get("max_batch_words"), limits.get("max_batch_pairs")
    if not (words or pairs):
        return False
    starts = corpus.sentence_offsets[corpus.document_offsets[docs]]
    longest = int((corpus.sentence_offsets[corpus.document_offsets[docs + 1]] - starts).max(initial=0))
    return bool((words and longest > words) or (pairs and 2 * longest**2 > pairs))


def hierarchical_arrays(corpus: EncodedCorpus, documents: Sequence[int], limits: dict) -> dict[str, np.ndarray]:
    """The documents as one hierarchical batch: every sentence read is a row of ``words``."""
    docs = np.asarray(documents, dtype=np.int64)
    # the batch's own counts and lengths: corpus.sentence_counts / sentence_lengths would diff the whole corpus
    n_sent = corpus.document_offsets[docs + 1] - corpus.document_offsets[docs]
    if limits.get("max_sentences"):
        n_sent = np.minimum(n_sent, limits["max_sentences"])
    if _may_pass_a_budget(corpus, docs, limits):  # a document past a budget is read up to it
        n_sent = np.minimum(n_sent, read_sizes(corpus.subset(docs), limits)[0])
    rows = ragged_ranges(corpus.document_offsets[docs], n_sent)  # sentence ids, document order
    lengths = corpus.sentence_offsets[rows + 1] - corpus.sentence_offsets[rows]
    if cap := word_cap(limits.get("max_words"), limits.get("max_batch_words"), limits.get("max_batch_pairs")):
        lengths = np.minimum(lengths, cap)
    words, word_mask = pad_rows(corpus.tokens, corpus.sentence_offsets[rows], lengths)
    first_row = np.cumsum(n_sent) - n_sent
    cols = np.arange(int(n_sent.max()))
    sentence_mask = cols[None, :] < n_sent[:, None]
    sentence_index = np.where(sentence_mask, first_row[:, None] + cols[None, :], 0).astype(np.int64)
    return {"words": words, "word_mask": word_mask, "sentence_index": sentence_index, "sentence_mask": sentence_mask}


def flat_arrays(corpus: EncodedCorpus, documents: Sequence[int], limits: dict) -> dict[str, np.ndarray]:
    """The documents as single token sequences, each cut to the words a flat model reads."""
    docs = np.asarray(documents, dtype=np.int64)
    starts = corpus.sentence_offsets[corpus.document_offsets[docs]]
    lengths = corpus.sentence_offsets[corpus.document_offsets[docs + 1]] - starts
    if cap := word_cap(limits.get("max_tokens"), limits.get("max_batch_words"), limits.get("max_batch_pairs")):
        lengths = np.minimum(lengths, cap)
    tokens, mask = pad_rows(corpus.tokens, starts, lengths)
    return {"tokens": tokens, "mask": mask}
