"""Explanations by signed word contributions toward a class (linear, gradient x input, integrated gradients),
written in the schema attention explanations have, so the report and the JSON read them alike.

Each word gets a signed ``contribution`` (logit units; positive pushes toward the target class) and a
``weight``, its share of the document's total |contribution|, so weights are non-negative and sum to 1
as attention does. Hierarchical models get attention's two levels: a sentence's ``weight`` is its words'
share of the document's |contribution|, and ``word_weights`` are shares within the sentence, so HAN's
shading rule applies unchanged.
"""

from __future__ import annotations

import numpy as np

from docattn.data.encoding import EncodedCorpus
from docattn.errors import DocattnError
from docattn.explain.linear import linear_contributions
from docattn.explain.methods import INTEGRATED_GRADIENTS, LINEAR, resolve_target
from docattn.explain.scores import gradient_scores, predicted, probabilities
from docattn.explain.tokens import fit_length, fit_to_limits, surface_sentences


def token_contributions(clf, enc: EncodedCorpus, method: str, target: np.ndarray, ig_steps: int = 20, batch_size=64):
    """(contributions (n_tokens,), bias (n_documents,) or None) of ``method`` toward each document's target."""
    if method == LINEAR:
        return linear_contributions(clf, enc, target, batch_size)
    steps = ig_steps if method == INTEGRATED_GRADIENTS else None
    scores = gradient_scores(clf, enc, target, steps, min(batch_size, 32))
    if scores is None:
        raise DocattnError(
            f"model {clf.model_name!r} does not read its words through its embedding alone: {method} cannot "
            "attribute its decision to them"
        )
    return np.nan_to_num(scores), None


def _shares(enc: EncodedCorpus, contributions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """|contribution| shares: of each token in its document, of each token in its sentence, of each sentence in
    its document (0 where there is nothing to share)."""
    size = np.abs(contributions)
    sentence_of = np.repeat(np.arange(len(enc.sentence_lengths)), enc.sentence_lengths)
    document_of = np.repeat(np.arange(len(enc)), enc.sentence_counts)  # of each sentence
    in_sentence = np.bincount(sentence_of, weights=size, minlength=len(document_of))
    in_document = np.bincount(document_of, weights=in_sentence, minlength=len(enc))
    with np.errstate(invalid="ignore", divide="ignore"):
        of_document = np.nan_to_num(size / in_document[document_of][sentence_of])
        of_sentence = np.nan_to_num(size / in_sentence[sentence_of])
        sentence_share = np.nan_to_num(in_sentence / in_document[document_of])
    return of_document, of_sentence, sentence_share


def contribution_items(clf, corpus, method: str, target=None, ig_steps: int = 20, batch_size: int = 64) -> list[dict]:
    """``explain``'s items for a signed ``method``, toward ``target`` (class index(es); None: the prediction)."""
    from docattn.data.text import documents_to_strings

    model, classes = clf.model, clf.labels.classes
    # only the words the model reads: the contributions line up with the first words of each document
    enc = fit_to_limits(clf.encode(corpus.without_labels()), model.layout, clf.limits)
    probs = probabilities(clf, enc, batch_size)
    target = resolve_target(target, len(enc), len(classes), probs.argmax(1))
    shown = predicted(clf.labels, probs)
    contributions, bias = token_contributions(clf, enc, method, target, ig_steps, batch_size)
    of_document, of_sentence, sentence_share = _shares(enc, contributions)
    hierarchical = model.layout == "hierarchical"
    cuts = enc.sentence_offsets[1:-1]
    per_sentence = [np.split(a, cuts) for a in (contributions, of_sentence if hierarchical else of_document)]
    strings = documents_to_strings(corpus.texts, corpus.sentences, clf.vocab.text_config)
    items = []
    for d in range(len(enc)):
        first, last = int(enc.document_offsets[d]), int(enc.document_offsets[d + 1])
        signed, shares = (p[first:last] for p in per_sentence)
        item = {
            "id": corpus.ids[d],
            "prediction": shown[d],
            "probabilities": {c: float(p) for c, p in zip(classes, probs[d])},
            "label": corpus.labels[d] if corpus.labels is not None else None,
            "layout": model.layout,
            "method": method,
            "target": classes[int(target[d])],
            "bias": None if bias is None else float(bias[d]),
            "logit": None if bias is None else float(bias[d] + sum(s.sum() for s in signed)),
        }
        sentences = surface_sentences(clf.vocab, strings[d])
        if hierarchical:
            item["sentences_read"], item["sentence_count"] = last - first, len(sentences)
            item["sentences"] = [
                {
                    "tokens": toks,
                    "weight": float(sentence_share[first + i]),
                    "word_weights": fit_length(shares[i], len(toks)),
                    "word_contributions": fit_length(signed[i], len(toks)),
                    "words_read": min(len(toks), len(signed[i])),
                }
                for i, toks in enumerate(sentences[: last - first])
            ]
        else:
            tokens = [t for s in sentences for t in s]
            read = np.concatenate(signed) if signed else np.zeros(0)
            item["tokens"] = tokens
            item["token_weights"] = fit_length(np.concatenate(shares) if shares else np.zeros(0), len(tokens))
            item["token_contributions"] = fit_length(read, len(tokens))
            item["tokens_read"] = min(len(tokens), len(read))
        items.append(item)
    return items
