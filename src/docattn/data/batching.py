"""Length-bucketed batches with padding to each batch's own maxima, built with NumPy only.

Two layouts. Hierarchical: every sentence of the batch is one row of ``words``
``(n_sentences, max_words)``; ``sentence_index`` ``(batch, max_sentences)`` says which rows make
each document, so a word encoder runs once over all sentences and a sentence encoder once over
all documents. Flat: ``tokens`` ``(batch, max_tokens)``. Padding is id 0 and masked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Iterator, Sequence

import numpy as np
import torch

from docattn.data.encoding import EncodedCorpus, ragged_ranges


@dataclass
class HierarchicalBatch:
    words: torch.Tensor  # (S, W) long: word ids of every sentence in the batch
    word_mask: torch.Tensor  # (S, W) bool: True on real words
    sentence_index: torch.Tensor  # (B, L) long: row of ``words`` for sentence l of document b
    sentence_mask: torch.Tensor  # (B, L) bool: True on real sentences
    sentence_doc: torch.Tensor  # (S,) long: document of each sentence row
    labels: torch.Tensor  # (B,) long, -1 when unlabelled
    documents: torch.Tensor  # (B,) long: index of each document in its corpus

    layout = "hierarchical"

    def to(self, device) -> "HierarchicalBatch":
        return type(self)(**{f.name: getattr(self, f.name).to(device, non_blocking=True) for f in fields(self)})

    def pin_memory(self) -> "HierarchicalBatch":
        """Page-locked copies (DataLoader's ``pin_memory``), so the copy to a GPU runs asynchronously."""
        return type(self)(**{f.name: getattr(self, f.name).pin_memory() for f in fields(self)})

    def __len__(self) -> int:
        return self.sentence_index.shape[0]


@dataclass
class FlatBatch:
    tokens: torch.Tensor  # (B, T) long
    mask: torch.Tensor  # (B, T) bool
    labels: torch.Tensor  # (B,) long
    documents: torch.Tensor  # (B,) long

    layout = "flat"

    def to(self, device) -> "FlatBatch":
        return type(self)(**{f.name: getattr(self, f.name).to(device, non_blocking=True) for f in fields(self)})

    def pin_memory(self) -> "FlatBatch":
        """Page-locked copies (DataLoader's ``pin_memory``), so the copy to a GPU runs asynchronously."""
        return type(self)(**{f.name: getattr(self, f.name).pin_memory() for f in fields(self)})

    def __len__(self) -> int:
        return self.tokens.shape[0]


def _pad_rows(tokens: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, max_len) ids and mask of token spans ``tokens[start:start+length]``."""
    width = max(int(lengths.max()) if len(lengths) else 1, 1)
    cols = np.arange(width)
    mask = cols[None, :] < lengths[:, None]
    pos = np.where(mask, starts[:, None] + cols[None, :], 0)
    return np.where(mask, tokens[pos], 0), mask


def hierarchical_batch(
    corpus: EncodedCorpus,
    documents: Sequence[int],
    max_sentences: int | None = None,
    max_words: int | None = None,
) -> HierarchicalBatch:
    """Gather documents into one hierarchical batch, keeping the first sentences/words."""
    docs = np.asarray(documents, dtype=np.int64)
    n_sent = corpus.sentence_counts[docs]
    if max_sentences:
        n_sent = np.minimum(n_sent, max_sentences)
    rows = ragged_ranges(corpus.document_offsets[docs], n_sent)  # sentence ids, document order
    lengths = corpus.sentence_lengths[rows]
    if max_words:
        lengths = np.minimum(lengths, max_words)
    words, word_mask = _pad_rows(corpus.tokens, corpus.sentence_offsets[rows], lengths)
    first_row = np.cumsum(n_sent) - n_sent
    cols = np.arange(int(n_sent.max()))
    sentence_mask = cols[None, :] < n_sent[:, None]
    sentence_index = np.where(sentence_mask, first_row[:, None] + cols[None, :], 0)
    return HierarchicalBatch(
        words=torch.from_numpy(words.astype(np.int64)),
        word_mask=torch.from_numpy(word_mask),
        sentence_index=torch.from_numpy(sentence_index),
        sentence_mask=torch.from_numpy(sentence_mask),
        sentence_doc=torch.from_numpy(np.repeat(np.arange(len(docs)), n_sent)),
        labels=torch.from_numpy(np.asarray(corpus.labels[docs], dtype=np.int64)),
        documents=torch.from_numpy(docs),
    )


def flat_batch(corpus: EncodedCorpus, documents: Sequence[int], max_tokens: int | None = None) -> FlatBatch:
    """Gather documents as single token sequences, keeping the first ``max_tokens`` words."""
    docs = np.asarray(documents, dtype=np.int64)
    starts = corpus.sentence_offsets[corpus.document_offsets[docs]]
    lengths = corpus.sentence_offsets[corpus.document_offsets[docs + 1]] - starts
    if max_tokens:
        lengths = np.minimum(lengths, max_tokens)
    tokens, mask = _pad_rows(corpus.tokens, starts, lengths)
    return FlatBatch(
        tokens=torch.from_numpy(tokens.astype(np.int64)),
        mask=torch.from_numpy(mask),
        labels=torch.from_numpy(np.asarray(corpus.labels[docs], dtype=np.int64)),
        documents=torch.from_numpy(docs),
    )


class BucketBatchSampler(torch.utils.data.Sampler):
    """Batches of documents of similar size, in shuffled order, each document once per epoch.

    Documents are sorted by (sentence count, longest sentence) for hierarchical models or by
    length for flat ones, with random tie-breaking that changes every epoch, cut into batches,
    and the batches shuffled. With ``num_replicas > 1`` (DDP) the batch list is padded by
    repeating its first batches so every rank gets the same number, and rank r takes every
    r-th batch: each document is seen by exactly one rank, a few by two in the padding.
    """

    def __init__(
        self,
        sort_keys: np.ndarray,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ):
        self.sort_keys = np.asarray(sort_keys, dtype=np.float64).reshape(len(sort_keys), -1)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _all_batches(self) -> list[np.ndarray]:
        n = len(self.sort_keys)
        rng = np.random.default_rng((self.seed, self.epoch))
        tie = rng.random(n) if self.shuffle else np.arange(n)
        # lexsort: last key is primary -> sort by the first key column, then the next, then tie
        order = np.lexsort((tie, *self.sort_keys.T[::-1]))
        batches = [order[i : i + self.batch_size] for i in range(0, n, self.batch_size)]
        if self.shuffle:
            rng.shuffle(batches)
        if self.num_replicas > 1:
            # every rank must step the same number of times or DDP's collectives hang: repeat
            # batches from the start, cycling when there are fewer batches than ranks
            missing = math.ceil(len(batches) / self.num_replicas) * self.num_replicas - len(batches)
            batches += [batches[i % len(batches)] for i in range(missing)]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self._all_batches()[self.rank :: self.num_replicas]:
            yield batch.tolist()

    def __len__(self) -> int:
        return math.ceil(math.ceil(len(self.sort_keys) / self.batch_size) / self.num_replicas)


def bucket_keys(corpus: EncodedCorpus, layout: str) -> np.ndarray:
    """What documents are bucketed by: (sentences, longest sentence) or token count."""
    if layout == "hierarchical":
        return np.stack([corpus.sentence_counts, corpus.max_sentence_lengths], axis=1)
    return corpus.token_counts[:, None]


def truncated_documents(corpus: EncodedCorpus, layout: str, limits: dict) -> int:
    """How many documents a model reads only in part under ``limits`` (max_sentences / max_words, or max_tokens)."""
    if len(corpus) == 0:
        return 0
    if layout == "hierarchical":
        over = np.zeros(len(corpus), dtype=bool)
        if limits.get("max_sentences"):
            over |= corpus.sentence_counts > limits["max_sentences"]
        if limits.get("max_words"):
            over |= corpus.max_sentence_lengths > limits["max_words"]
        return int(over.sum())
    if layout == "flat" and limits.get("max_tokens"):
        return int((corpus.token_counts > limits["max_tokens"]).sum())
    return 0
