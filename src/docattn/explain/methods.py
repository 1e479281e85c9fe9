"""Which explanation methods a model has, its default, and the class each document is explained toward.

- "attention": the weights the model pools its words (and sentences) with, or what its mean or max pooling
  takes from each position; every model that declares a "pooling" entry in ``attention_kinds()``;
- "linear": each word's exact share of the class's logit, for linear models (the tf-idf baselines nb,
  logreg, logreg-l1; fasttext; fasttext-lib), ``explain.linear``;
- "gradient_x_input" and "integrated_gradients": attributions through a neural model's word embedding
  (``explain.scores.gradient_scores``).

A model's default is its own attention, or "linear" for a linear model. Attention does not depend on the
class; the other methods explain one class per document, the ``target`` (a class index, by default the
predicted class), so that explaining any chosen class, or a label of a multi-label model, is one argument.
"""

from __future__ import annotations

import numpy as np

from docattn.errors import ConfigError, DocattnError
from docattn.models.contract import is_one_shot, word_embedding

ATTENTION, LINEAR = "attention", "linear"
GRADIENT_X_INPUT, INTEGRATED_GRADIENTS = "gradient_x_input", "integrated_gradients"
METHODS = (ATTENTION, LINEAR, GRADIENT_X_INPUT, INTEGRATED_GRADIENTS)
SIGNED = (LINEAR, GRADIENT_X_INPUT, INTEGRATED_GRADIENTS)  # signed contributions toward a target class


def linear_family(model) -> str | None:
    """ "tfidf", "fasttext" or "fasttext-lib" for a model whose logits are linear in its word rows; else None."""
    from docattn.models.baselines import TfidfBaseline
    from docattn.models.fasttext import FastText
    from docattn.models.fasttext_lib import FastTextLib

    for family, cls in (("tfidf", TfidfBaseline), ("fasttext", FastText), ("fasttext-lib", FastTextLib)):
        if isinstance(model, cls):
            return family
    return None


def has_pooling_attention(model) -> bool:
    """Whether the model declares weights over its words that pool them (attention, or mean / max shares)."""
    return not is_one_shot(model) and any(k.kind == "pooling" for k in model.attention_kinds())


def has_word_embedding(model) -> bool:
    """Whether gradients can be taken at the model's word embedding (``embedding_attribution``'s door)."""
    return word_embedding(model) is not None


def model_methods(model) -> tuple[str, ...]:
    """The explanation methods ``model`` has, its default first."""
    methods = [LINEAR] if linear_family(model) else []
    if has_pooling_attention(model):
        methods.append(ATTENTION)
    if has_word_embedding(model):
        methods += [GRADIENT_X_INPUT, INTEGRATED_GRADIENTS]
    return tuple(methods)


def resolve_method(model, model_name: str, method: str | None) -> str:
    """``method``, checked against what the model has; None gives the model's default."""
    if method is not None and method not in METHODS:
        raise ConfigError(f"unknown explanation method {method!r}; choose from {', '.join(METHODS)}")
    have = model_methods(model)
    if not have:
        raise DocattnError(
            f"model {model_name!r} has no explanation method: no attention, no linear head, no embedding"
        )
    if method is None:
        return have[0]
    if method not in have:
        raise ConfigError(
            f"model {model_name!r} has no {method} explanation; its methods: {', '.join(have)} (default {have[0]})"
        )
    return method


def resolve_target(target, n_documents: int, n_classes: int, predicted: np.ndarray) -> np.ndarray:
    """(n_documents,) class index each document is explained toward: ``target`` None (the predicted class),
    one class index for every document, or one per document."""
    if target is None:
        return np.asarray(predicted, dtype=np.int64)
    t = np.asarray(target)
    if t.ndim == 0:
        t = np.full(n_documents, t)
    if t.shape != (n_documents,) or not np.issubdtype(t.dtype, np.integer):
        raise ConfigError(
            f"target must be a class index, or one per document ({n_documents}); got {np.asarray(target).tolist()!r}"
        )
    bad = t[(t < 0) | (t >= n_classes)]
    if len(bad):
        raise ConfigError(f"target {int(bad[0])} is no class index: the model has classes 0..{n_classes - 1}")
    return t.astype(np.int64)
