"""What a model promises, declared once: its layout, the two kinds of model, and what its attentions mean.

Every registered model is one of two kinds:
  ``NeuralModel``   trained batch by batch by the training engine; ``forward(batch)`` on a
                    ``HierarchicalBatch`` or a ``FlatBatch``, as its ``layout`` says;
  ``OneShotModel``  fitted in one call on an ``EncodedCorpus`` (the tf-idf baselines, the fastText
                    library), layout "bag"; it keeps its own arrays and answers ``forward`` too.
Code above ``models/`` asks ``is_one_shot(model)`` and ``is_hierarchical(model)`` instead of probing
``hasattr(model, "fit_encoded")`` or comparing layout strings. A model lists the entries of its
``ModelOutput.attentions`` as ``AttentionKind`` records (``model.attention_kinds()``), so explanations
read a record's level and kind instead of key substrings. Torch-free: the command line imports it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from docattn.models.output import ModelOutput

HIERARCHICAL = "hierarchical"  # documents -> sentences -> words: forward takes a HierarchicalBatch
FLAT = "flat"  # each document one token sequence: forward takes a FlatBatch
BAG = "bag"  # a OneShotModel: fitted on an EncodedCorpus, forward takes a FlatBatch
LAYOUTS = (HIERARCHICAL, FLAT, BAG)
Layout = Literal["hierarchical", "flat", "bag"]


@dataclass(frozen=True)
class AttentionKind:
    """One entry of ``ModelOutput.attentions``: its key, what its last axis weighs, its shape and meaning.

    ``kind`` says how its numbers add up: "pooling" is one distribution per sequence (what an
    explanation shows: sums to 1 over real positions, 0 on padding); "heads" is one such distribution
    per head or learned query; "self" holds self-attention matrices, each real query's row a
    distribution over real keys, padded rows and keys 0. ``computed`` is False for what mean- or
    max-pooling takes from each position (an attribution, not weights the model computes).
    """

    key: str  # its key in ModelOutput.attentions
    level: Literal["word", "sentence", "token"]  # a sentence's words, a document's sentences, a flat document's tokens
    kind: Literal["pooling", "heads", "self"]
    shape: str  # B documents, L sentences, W words, T tokens, S sentences of the batch, h heads, m queries, N layers
    meaning: str
    computed: bool = True

    @property
    def dims(self) -> tuple[str, ...]:
        """The axis names of ``shape``: "(B, h, T, T)" -> ("B", "h", "T", "T")."""
        return tuple(d.strip() for d in self.shape.strip("()").split(","))


def pooling_kinds(levels: tuple[str, ...], pooling: str) -> tuple[AttentionKind, ...]:
    """The "pooling" records of a model that pools each level by ``pooling``: "attention", "mean" or "max"."""
    shapes = {"word": "(B, L, W)", "sentence": "(B, L)", "token": "(B, T)"}
    meaning = {
        "attention": "the attention weights that pool this level",
        "mean": "mean pooling's uniform share, 1/n for each of n real positions",
        "max": "the share of the pooled features whose maximum each position provides",
    }[pooling]
    return tuple(
        AttentionKind(level, level, "pooling", shapes[level], meaning, pooling == "attention") for level in levels
    )


@runtime_checkable
class NeuralModel(Protocol):
    """A model the training engine trains batch by batch (an ``nn.Module``).

    One the engine trains (not a bag model, which answers ``forward`` too) also has ``classifier``, its
    output layer ``nn.Linear(features, num_classes)``: logits are ``classifier(document vector)``, and
    multi-label training starts its biases at the class priors and may refit it (training/refit.py); and
    ``embedding``, the ``nn.Embedding`` of its word ids, which training fills with word vectors and gradient
    explanations differentiate at (``word_embedding``).
    A hierarchical one also has ``encode_words(words, word_mask, need_weights)``: its word level on every
    sentence padded to one width, the reference path that an ONNX export traces."""

    layout: str  # HIERARCHICAL or FLAT: the batches ``forward`` takes
    num_classes: int

    def forward(self, batch, return_attention: bool = False) -> ModelOutput:
        """Logits (B, num_classes); with ``return_attention`` the weights that ``attention_kinds`` lists."""
        ...

    def hparams(self) -> dict:
        """The hyper-parameters that rebuild this model (saved in a run's config.json)."""
        ...

    def attention_kinds(self) -> tuple[AttentionKind, ...]:
        """The entries ``forward(batch, return_attention=True)`` returns in ``attentions``."""
        ...


@runtime_checkable
class OneShotModel(Protocol):
    """A model fitted in one call on an encoded corpus, outside the training engine (layout BAG)."""

    layout: str
    num_classes: int
    weighs_classes: bool  # whether fit_encoded honours class_weights
    # whether a multi-label fit is one penalised logistic regression per class: the auto recipe then weighs
    # each class's positives up (training/recipe.py), or the penalty leaves a rare class predicted nowhere
    penalised_per_class: bool

    def fit_encoded(self, enc, vocab=None, seed: int = 0, class_weights=None) -> OneShotModel:
        """Fit on a labelled ``EncodedCorpus``; returns the model."""
        ...

    def predict_proba_encoded(self, enc) -> np.ndarray:
        """(documents, num_classes) probabilities of an ``EncodedCorpus``."""
        ...

    def hparams(self) -> dict:
        """The hyper-parameters that rebuild this model (saved in a run's config.json)."""
        ...

    def n_parameters(self) -> int | None:
        """Fitted coefficients, for cost tables (None before fitting)."""
        ...

    def save_artifacts(self, run_dir) -> Path:
        """Write the fitted state into a run folder."""
        ...

    def load_artifacts(self, run_dir) -> OneShotModel:
        """Read the state ``save_artifacts`` wrote; returns the model."""
        ...


def is_one_shot(model) -> bool:
    """Whether ``model`` is fitted in one call (``fit_encoded``) rather than trained by the engine."""
    return isinstance(model, OneShotModel)


def word_embedding(model):
    """The ``nn.Embedding`` that a model trained by the engine reads its word ids through; None for a one-shot model."""
    return None if is_one_shot(model) else model.embedding


def layout_of(x: object) -> str:
    """The layout of a model, a ``ModelSpec``, a batch, or a layout string itself."""
    layout = x if isinstance(x, str) else getattr(x, "layout", None)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return layout


def is_hierarchical(x: object) -> bool:
    """Whether ``x`` (model, spec, batch or layout) reads documents as sentences of words."""
    return layout_of(x) == HIERARCHICAL


def is_flat(x: object) -> bool:
    """Whether ``x`` (model, spec, batch or layout) reads each document as one token sequence."""
    return layout_of(x) == FLAT


def is_bag(x: object) -> bool:
    """Whether ``x`` (model, spec or layout) is a bag-of-words model fitted in one call."""
    return layout_of(x) == BAG
