"""Encoded batches as plain NumPy arrays: what an exported graph reads, built without torch by
``data/arrays.py``, the same code ``data/batching.py`` wraps in tensors.

    hierarchical: words (S, W) int64, word_mask (S, W) bool, sentence_index (B, L) int64, sentence_mask (B, L) bool
    flat:         tokens (B, T) int64, mask (B, T) bool
"""

from __future__ import annotations

import numpy as np

from docattn.data.arrays import flat_arrays, hierarchical_arrays
from docattn.data.encoding import EncodedCorpus

HIERARCHICAL_INPUTS = ("words", "word_mask", "sentence_index", "sentence_mask")
FLAT_INPUTS = ("tokens", "mask")


def batch_arrays(corpus: EncodedCorpus, documents, layout: str, limits: dict) -> dict[str, np.ndarray]:
    """The graph inputs of ``documents`` for a model of ``layout`` ("hierarchical" or "flat")."""
    if layout == "hierarchical":
        return hierarchical_arrays(corpus, documents, limits)
    return flat_arrays(corpus, documents, limits)


def length_batches(corpus: EncodedCorpus, layout: str, batch_size: int) -> list[np.ndarray]:
    """Documents in batches of similar size (less padding), every document once; results go back by index.

    Hierarchical: by longest sentence first, since a graph pads every sentence of a batch to that width,
    and the word level is most of the work; then by sentence count."""
    hierarchical = layout == "hierarchical"
    keys = (corpus.sentence_counts, corpus.max_sentence_lengths) if hierarchical else (corpus.token_counts,)
    order = np.lexsort(keys)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
