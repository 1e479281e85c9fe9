"""Length-bucketed batches with padding to each batch's own maxima, built with NumPy only.

Two layouts. Hierarchical: every sentence of the batch is one row of ``words``
``(n_sentences, max_words)``; ``sentence_index`` ``(batch, max_sentences)`` says which rows make
each document, so a word encoder runs once over all sentences and a sentence encoder once over
all documents. Flat: ``tokens`` ``(batch, max_tokens)``. Padding is id 0 and masked.

``max_batch_words`` bounds the words a batch reads, and ``max_batch_pairs`` the word pairs a self-attention
model compares in it, and so its memory: a batch of long documents is cut into smaller ones, and one
document past a budget is read up to it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

import numpy as np
import torch

from docattn.data.arrays import flat_arrays, hierarchical_arrays, read_sizes, word_cap
from docattn.data.encoding import EncodedCorpus


@dataclass
class HierarchicalBatch:
    words: torch.Tensor  # (S, W) long: word ids of every sentence in the batch
    word_mask: torch.Tensor  # (S, W) bool: True on real words
    sentence_index: torch.Tensor  # (B, L) long: row of ``words`` for sentence l of document b
    sentence_mask: torch.Tensor  # (B, L) bool: True on real sentences
    sentence_doc: torch.Tensor  # (S,) long: document of each sentence row
    labels: torch.Tensor  # (B,) long, -1 when unlabelled; multi-label: (B, C) float 0/1
    documents: torch.Tensor  # (B,) long: index of each document in its corpus

    layout = "hierarchical"

    def to(self, device) -> HierarchicalBatch:
        return type(self)(**{f.name: getattr(self, f.name).to(device, non_blocking=True) for f in fields(self)})

    def pin_memory(self) -> HierarchicalBatch:
        """Page-locked copies (DataLoader's ``pin_memory``), so the copy to a GPU runs asynchronously."""
        return type(self)(**{f.name: getattr(self, f.name).pin_memory() for f in fields(self)})

    def __len__(self) -> int:
        return self.sentence_index.shape[0]


@dataclass
class FlatBatch:
    tokens: torch.Tensor  # (B, T) long
    mask: torch.Tensor  # (B, T) bool
    labels: torch.Tensor  # (B,) long; multi-label: (B, C) float 0/1
    documents: torch.Tensor  # (B,) long

    layout = "flat"

    def to(self, device) -> FlatBatch:
        return type(self)(**{f.name: getattr(self, f.name).to(device, non_blocking=True) for f in fields(self)})

    def pin_memory(self) -> FlatBatch:
        """Page-locked copies (DataLoader's ``pin_memory``), so the copy to a GPU runs asynchronously."""
        return type(self)(**{f.name: getattr(self, f.name).pin_memory() for f in fields(self)})

    def __len__(self) -> int:
        return self.tokens.shape[0]


def hierarchical_batch(
    corpus: EncodedCorpus,
    documents: Sequence[int],
    max_sentences: int | None = None,
    max_words: int | None = None,
    max_batch_words: int | None = None,
    max_batch_pairs: int | None = None,
) -> HierarchicalBatch:
    """Gather documents into one hierarchical batch, keeping the first sentences/words."""
    docs = np.asarray(documents, dtype=np.int64)
    limits = {
        "max_sentences": max_sentences,
        "max_words": max_words,
        "max_batch_words": max_batch_words,
        "max_batch_pairs": max_batch_pairs,
    }
    arrays = {name: torch.from_numpy(a) for name, a in hierarchical_arrays(corpus, docs, limits).items()}
    n_sent = arrays["sentence_mask"].sum(1)
    return HierarchicalBatch(
        **arrays,
        sentence_doc=torch.repeat_interleave(torch.arange(len(docs)), n_sent),
        labels=label_tensor(corpus, docs),
        documents=torch.from_numpy(docs),
    )


def flat_batch(
    corpus: EncodedCorpus,
    documents: Sequence[int],
    max_tokens: int | None = None,
    max_batch_words: int | None = None,
    max_batch_pairs: int | None = None,
) -> FlatBatch:
    """Gather documents as single token sequences, keeping the first ``max_tokens`` words."""
    docs = np.asarray(documents, dtype=np.int64)
    limits = {"max_tokens": max_tokens, "max_batch_words": max_batch_words, "max_batch_pairs": max_batch_pairs}
    arrays = flat_arrays(corpus, docs, limits)
    return FlatBatch(
        tokens=torch.from_numpy(arrays["tokens"]),
        mask=torch.from_numpy(arrays["mask"]),
        labels=label_tensor(corpus, docs),
        documents=torch.from_numpy(docs),
    )


def label_tensor(corpus: EncodedCorpus, docs: np.ndarray) -> torch.Tensor:
    """Class indices (long), or for multi-label data 0/1 rows (float: what binary cross-entropy takes)."""
    if corpus.multi_label:
        return torch.from_numpy(np.asarray(corpus.labels[docs], dtype=np.float32))
    return torch.from_numpy(np.asarray(corpus.labels[docs], dtype=np.int64))


class BucketBatchSampler(torch.utils.data.Sampler):
    """Batches of documents of similar size, in shuffled order, each document once per epoch.

    Documents are sorted by (sentence count, longest sentence) for hierarchical models or by
    length for flat ones, with random tie-breaking that changes every epoch, cut into batches,
    and the batches shuffled. With ``num_replicas > 1`` (DDP) the batch list is padded by
    repeating its first batches so every rank gets the same number, and rank r takes every
    r-th batch: each document is seen by exactly one rank, a few by two in the padding.

    With ``costs`` (n, k) and ``budgets`` (k,), a batch whose summed costs would pass a budget is cut into
    smaller ones. Costs then break ties of the keys, so the sorted costs, and the number of batches, are the
    same every epoch.
    """

    def __init__(
        self,
        sort_keys: np.ndarray,
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        costs: np.ndarray | None = None,
        budgets: Sequence[float] | None = None,
    ):
        self.sort_keys = np.asarray(sort_keys, dtype=np.float64).reshape(len(sort_keys), -1)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.costs = None if costs is None else np.asarray(costs, dtype=np.float64).reshape(len(sort_keys), -1)
        self.budgets = None if budgets is None else np.asarray(budgets, dtype=np.float64)
        self.epoch = 0
        self._order_by = self.sort_keys if self.costs is None else np.concatenate([self.sort_keys, self.costs], axis=1)
        self._count = len(self._cut(np.lexsort(self._order_by.T[::-1])))

    def _cut(self, order: np.ndarray) -> list[np.ndarray]:
        """``order`` in batches of ``batch_size``, each cut again where its costs would pass a budget."""
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        if self.costs is None:
            return batches
        out = []
        for batch in batches:
            costs = self.costs[batch]
            if (costs.sum(axis=0) <= self.budgets).all():
                out.append(batch)
                continue
            start, total = 0, np.zeros_like(self.budgets)  # greedy over this batch's documents only
            for i, cost in enumerate(costs):
                if (total + cost > self.budgets).any() and i > start:
                    out.append(batch[start:i])
                    start, total = i, np.zeros_like(self.budgets)
                total += cost
            out.append(batch[start:])
        return out

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _all_batches(self) -> list[np.ndarray]:
        n = len(self.sort_keys)
        rng = np.random.default_rng((self.seed, self.epoch))
        tie = rng.random(n) if self.shuffle else np.arange(n)
        # lexsort: last key is primary -> sort by the first key column, then the next, then tie
        order = np.lexsort((tie, *self._order_by.T[::-1]))
        batches = self._cut(order)
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
        return math.ceil(self._count / self.num_replicas)


_BUDGETS = ("max_batch_words", "max_batch_pairs")


def _read(corpus: EncodedCorpus, layout: str, limits: dict) -> tuple[np.ndarray, np.ndarray]:
    """Bucketing keys ((sentences, longest sentence) or (tokens,)) and costs (words, pairs) per document."""
    if layout == "hierarchical":
        n_sent, width, costs = read_sizes(corpus, limits)
        return np.stack([n_sent, width], axis=1), costs
    counts = corpus.token_counts
    if cap := word_cap(limits.get("max_tokens"), limits.get("max_batch_words"), limits.get("max_batch_pairs")):
        counts = np.minimum(counts, cap)
    return counts[:, None], np.stack([counts, counts.astype(np.float64) ** 2], axis=1)


def bucket_keys(corpus: EncodedCorpus, layout: str, limits: dict | None = None) -> np.ndarray:
    """What documents are bucketed by: (sentences, longest sentence) or token count, as read under ``limits``."""
    return _read(corpus, layout, limits or {})[0]


def batch_sampler(corpus: EncodedCorpus, layout: str, limits: dict, batch_size: int, **options) -> BucketBatchSampler:
    """Length-bucketed batches of ``corpus`` read under ``limits``, none past its word or word-pair budget."""
    keys, costs = _read(corpus, layout, limits)
    if not any(limits.get(name) for name in _BUDGETS):
        return BucketBatchSampler(keys, batch_size, **options)
    budgets = [limits.get(name) or np.inf for name in _BUDGETS]
    return BucketBatchSampler(keys, batch_size, costs=costs, budgets=budgets, **options)


def truncated_documents(corpus: EncodedCorpus, layout: str, limits: dict) -> int:
    """How many documents a model reads only in part under ``limits`` (max_sentences / max_words, or max_tokens)."""
    if len(corpus) == 0:
        return 0
    if layout == "hierarchical":
        n_sent, width = bucket_keys(corpus, layout, limits).T
        return int(((n_sent < corpus.sentence_counts) | (width < corpus.max_sentence_lengths)).sum())
    if layout == "flat":
        return int((bucket_keys(corpus, layout, limits)[:, 0] < corpus.token_counts).sum())
    return 0
