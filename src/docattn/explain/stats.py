"""Attention statistics over a data set, under the names the CLI and older code import.

The pure metrics live in ``explain.metrics`` (NumPy in, numbers out), the model-driving collection
in ``explain.collect``, and what each attention key is in ``explain.attention_keys``.
"""

from __future__ import annotations

from docattn.explain.collect import (
    attention_batches,
    attention_statistics,
    attention_summary,
    document_matrices,
    document_word_mask,
    is_matrix,
    key_mask,
    model_device,
    surface_token_lists,
    surface_tokens,
    unlabelled,
    word_attention_distribution,
)
from docattn.explain.metrics import (
    BANDWIDTHS,
    QUANTILES,
    AttentionSummary,
    band_masks,
    diagonality,
    entropy,
    gini,
    summarize,
    zero_share,
)

_Summary = AttentionSummary  # the name it had here

__all__ = [
    "BANDWIDTHS",
    "QUANTILES",
    "AttentionSummary",
    "attention_batches",
    "attention_statistics",
    "attention_summary",
    "band_masks",
    "diagonality",
    "document_matrices",
    "document_word_mask",
    "entropy",
    "gini",
    "is_matrix",
    "key_mask",
    "model_device",
    "summarize",
    "surface_token_lists",
    "surface_tokens",
    "unlabelled",
    "word_attention_distribution",
    "zero_share",
]
