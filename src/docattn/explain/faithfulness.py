"""Faithfulness of token rankings (ERASER, DeYoung et al. 2020): comprehensiveness, sufficiency, AOPC.

For each document and a ranking of its words, the top k% words (k in ``PERCENTS``, at least one
word) are

- removed: comprehensiveness = p(y | x) - p(y | x without them), high is faithful;
- kept alone: sufficiency = p(y | x) - p(y | only them), low is faithful;

where y is the class the model predicts on the whole document. AOPC is the mean over the k
values. Rankings compared on the same documents:

- "attention": the model's own weights; hierarchical models use HAN's word score
  sqrt(p_sentence) * p_word;
- "random": uniform random scores (seeded);
- "gradient_x_input": gradient of the predicted class's logit w.r.t. the word embeddings,
  times the embeddings, summed over the embedding axis;
- "integrated_gradients": the same along the straight path from the PAD embedding (the
  all-padding baseline) to the document's embeddings, midpoint Riemann sum (Captum's
  ``LayerIntegratedGradients(model, model.embedding)`` with ``method="riemann_middle"``
  computes the same numbers; here it is done by hand so hierarchical batches, whose rows are
  sentences, are attributed in one batched pass per step);
- "linear": each word's exact contribution to the predicted class's logit, for linear models
  (tf-idf baselines, fastText; ``explain.linear``), highest first.

By default every ranking the model has is compared, and random. Bag-of-words models are scored the
same way: their probabilities come from ``predict_proba_encoded`` on the shortened documents.

Removal works on the encoded corpus: a removed word is deleted and its sentence closes up (what
the model would read had the word never been there); a sentence left empty is dropped and a
document left empty becomes a single <unk> word. Documents are first cut to the run's limits
(max_sentences, max_words, max_tokens), so only words the model reads are ranked.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from docattn.data.encoding import EncodedCorpus
from docattn.errors import DocattnError
from docattn.explain.linear import linear_contributions
from docattn.explain.scores import attention_scores, gradient_scores, probabilities
from docattn.explain.tokens import compact, document_starts, fit_to_limits, token_documents

PERCENTS = (1, 5, 10, 20, 50)
METHODS = ("attention", "linear", "random", "gradient_x_input", "integrated_gradients")


def top_fraction(enc: EncodedCorpus, scores: np.ndarray, percent: float) -> np.ndarray:
    """Per token: is it among the ceil(percent% of n) highest-scored words of its document (at least one)?"""
    doc = token_documents(enc)
    n = enc.token_counts
    k = np.maximum(np.ceil(n * percent / 100.0 - 1e-9), 1).astype(np.int64)  # (n_documents,)
    s = np.where(np.isnan(scores), -np.inf, scores)
    order = np.lexsort((-s, doc))  # by document, then best score first (ties: earlier word first)
    rank = np.empty(len(doc), dtype=np.int64)
    rank[order] = np.arange(len(doc)) - document_starts(enc)[doc[order]]
    return rank < k[doc]


def _check_options(methods: Sequence[str], percents: Sequence[float], ig_steps: int) -> None:
    from docattn.errors import ConfigError

    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ConfigError(f"unknown ranking methods {sorted(unknown)}; choose from {', '.join(METHODS)}")
    if ig_steps < 1:
        raise ConfigError(f"ig_steps must be at least 1; got {ig_steps}")
    bad = [k for k in percents if not 0 < k <= 100]
    if bad or not percents:
        raise ConfigError(f"percents must be shares of a document's words in (0, 100]; got {list(percents)}")


def model_rankings(model) -> list[str]:
    """The rankings ``faithfulness`` compares by default: every method the model has, and random."""
    from docattn.explain.methods import model_methods

    have = set(model_methods(model)) | {"random"}
    return [m for m in METHODS if m in have]


def _ranking(clf, enc: EncodedCorpus, method: str, pred: np.ndarray, batch_size: int, ig_steps: int, seed: int):
    """(scores per token, None) for ``method``, or (None, why) where the model has no such ranking."""
    from docattn.explain.methods import model_methods

    if method == "random":
        return np.random.default_rng(seed).random(len(enc.tokens)), None
    if method not in model_methods(clf.model):
        return None, f"model {clf.model_name!r} has no {method} explanation"
    if method == "attention":
        scores = attention_scores(clf, enc, batch_size)
        return scores, None if scores is not None else f"model {clf.model_name!r} returns no word/token attention"
    if method == "linear":
        try:
            return linear_contributions(clf, enc, pred, batch_size)[0], None
        except DocattnError as err:  # fasttext-lib trained with a loss whose logits are not linear
            return None, str(err)
    steps = ig_steps if method == "integrated_gradients" else None
    scores = gradient_scores(clf, enc, pred, steps, batch_size)
    return scores, None if scores is not None else f"model {clf.model_name!r} has no differentiable word embedding"


def faithfulness(
    clf,
    corpus,
    n: int | None = None,
    methods: Sequence[str] | None = None,
    percents: Sequence[float] = PERCENTS,
    batch_size: int = 32,
    ig_steps: int = 20,
    seed: int = 0,
) -> dict:
    """ERASER comprehensiveness and sufficiency at each k% and their AOPC, per ranking method.

    ``corpus``: a ``Corpus`` or a list of texts; ``n`` keeps its first n documents. ``methods`` None
    compares every ranking the model has, and random (``model_rankings``); methods a model cannot
    support are listed with ``"available": False`` and the reason.
    """
    from docattn.data.corpus import Corpus, to_corpus
    from docattn.errors import DataError
    from docattn.explain.collect import unlabelled

    methods = model_rankings(clf.model) if methods is None else list(methods)
    _check_options(methods, percents, ig_steps)
    corpus = corpus if isinstance(corpus, Corpus) else to_corpus(corpus)
    if n:
        corpus = corpus.subset(range(min(n, len(corpus))))
    layout = clf.model.layout
    enc = fit_to_limits(clf.encode(unlabelled(corpus)), layout, clf.limits)  # y is the prediction: no labels needed
    rows = np.arange(len(enc))
    full = probabilities(clf, enc, batch_size)
    pred = full.argmax(1)
    p_full = full[rows, pred]
    result = {
        "model": clf.model_name,
        "documents": len(enc),
        "percents": list(percents),
        "mean_words": float(enc.token_counts.mean()) if len(enc) else 0.0,
        "methods": {},
    }
    if corpus.labels is not None:
        try:
            gold = np.asarray(clf.labels.encode(corpus.labels, "faithfulness data"))
            result["accuracy"] = float((pred == gold).mean())
        except DataError:
            pass  # labels the model was not trained on: no accuracy, the rest stands
    for method in methods:
        t0 = time.perf_counter()
        scores, why = _ranking(clf, enc, method, pred, batch_size, ig_steps, seed)
        if scores is None:
            result["methods"][method] = {"available": False, "reason": why}
            continue
        ranking_s = time.perf_counter() - t0
        comp, suff = {}, {}
        for p in percents:
            top = top_fraction(enc, scores, p)
            comp[str(p)] = float(np.mean(p_full - probabilities(clf, compact(enc, ~top), batch_size)[rows, pred]))
            suff[str(p)] = float(np.mean(p_full - probabilities(clf, compact(enc, top), batch_size)[rows, pred]))
        result["methods"][method] = {
            "available": True,
            "comprehensiveness": comp,
            "sufficiency": suff,
            "aopc_comprehensiveness": float(np.mean(list(comp.values()))),
            "aopc_sufficiency": float(np.mean(list(suff.values()))),
            "ranking_seconds": ranking_s,
            "seconds": time.perf_counter() - t0,
        }
    return result
