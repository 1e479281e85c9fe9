"""Attention against known rationales (the embedded corpus): top sentence accuracy, precision/recall at k, AUPRC.

The embedded corpus (``docattn.data.synthetic``) stores with each document the sentences that
decide its label and their deciding words (``{"sentences": [i, ...], "words": [[i, j], ...]}``).
Word scores follow HAN's visualisation rule, sqrt(p_sentence) * p_word, for hierarchical
models, and the token weights for flat ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

KS = (1, 2, 3, 5)


def average_precision(scores: np.ndarray, relevant: np.ndarray) -> float:
    """Area under the precision-recall curve (average precision) of ``scores`` ranking ``relevant``."""
    if relevant.sum() == 0:
        return float("nan")
    order = np.argsort(-scores, kind="stable")
    hits = relevant[order].astype(float)
    precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
    return float((precision * hits).sum() / hits.sum())


def precision_recall_at(scores: np.ndarray, relevant: np.ndarray, ks: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Precision and recall of the k highest scores, for each k in ``ks`` (k capped at the number of items)."""
    order = np.argsort(-scores, kind="stable")
    found = np.cumsum(relevant[order].astype(float))  # relevant items among the top 1, 2, ...
    n, r = len(scores), relevant.sum()
    idx = np.minimum(np.asarray(ks), n) - 1
    hits = np.where(idx >= 0, found[np.maximum(idx, 0)] if n else 0.0, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return hits / np.maximum(idx + 1, 1), np.where(r > 0, hits / r, np.nan)


def _document_scores(item: dict, rationale: dict, sentence_lengths: Sequence[int] | None):
    """(word scores, word relevance, sentence scores or None, sentence relevance) of one explained document."""
    deciding = {tuple(p) for p in rationale["words"]}
    if item.get("layout") == "hierarchical":
        sentences = item["sentences"]
        sent_w = np.array([s["weight"] for s in sentences], dtype=np.float64)
        scores = np.concatenate(
            [np.sqrt(max(p, 0.0)) * np.asarray(s["word_weights"], dtype=np.float64) for p, s in zip(sent_w, sentences)]
        )
        lengths = [len(s["tokens"]) for s in sentences]
    else:
        scores = np.asarray(item["token_weights"], dtype=np.float64)
        lengths = list(sentence_lengths) if sentence_lengths is not None else None
        sent_w = None
        if lengths is None or sum(lengths) != len(scores):
            raise ValueError("flat explanations need each document's sentence lengths to place the rationale words")
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int)
    sentence_of = np.repeat(np.arange(len(lengths)), lengths)
    position = np.arange(len(scores)) - starts[sentence_of]
    relevant = np.array([(int(i), int(j)) in deciding for i, j in zip(sentence_of, position)], dtype=bool)
    sent_relevant = np.isin(np.arange(len(lengths)), list(rationale["sentences"]))
    return scores, relevant, sent_w, sent_relevant


def rationale_metrics(
    explanations: list[dict],
    rationales: list[dict] | None,
    ks: Sequence[int] = KS,
    sentence_lengths: list[Sequence[int]] | None = None,
) -> dict:
    """Attention against ground-truth rationales, averaged over documents.

    Returns ``documents``; ``word_auprc`` (average precision of the word scores at finding the
    deciding words), ``word_precision_at_k`` / ``word_recall_at_k`` for each k in ``ks``,
    ``word_r_precision`` (precision at k = the number of deciding words); for hierarchical
    models also ``top_sentence_accuracy`` (the highest-weighted sentence is a deciding one) and
    ``sentence_auprc``. Flat explanations need ``sentence_lengths`` (tokens per sentence of each
    document, e.g. from ``docattn.explain.collect.surface_tokens``). Empty dict when the model
    gives no weights to score.
    """
    if not rationales or not explanations:
        return {}
    first = explanations[0]
    if first.get("layout") == "hierarchical":
        if (
            not first["sentences"]
            or first["sentences"][0]["weight"] is None
            or first["sentences"][0]["word_weights"] is None
        ):
            return {}
    elif first.get("token_weights") is None or sentence_lengths is None:
        return {}
    ks = list(ks)
    aps, sent_aps, top_hits, prec, rec, r_prec = [], [], [], [], [], []
    for d, (item, rat) in enumerate(zip(explanations, rationales)):
        if rat is None:
            continue
        scores, relevant, sent_w, sent_relevant = _document_scores(
            item, rat, sentence_lengths[d] if sentence_lengths else None
        )
        aps.append(average_precision(scores, relevant))
        p, r = precision_recall_at(scores, relevant, ks)
        prec.append(p)
        rec.append(r)
        r_prec.append(precision_recall_at(scores, relevant, [max(int(relevant.sum()), 1)])[0][0])
        if sent_w is not None:
            top_hits.append(bool(sent_relevant[int(sent_w.argmax())]))
            sent_aps.append(average_precision(sent_w, sent_relevant))
    if not aps:
        return {}
    out = {"documents": len(aps)}
    if top_hits:
        out["top_sentence_accuracy"] = float(np.mean(top_hits))
        out["sentence_auprc"] = float(np.nanmean(sent_aps))
    out["word_auprc"] = float(np.nanmean(aps))
    out["word_r_precision"] = float(np.nanmean(r_prec))
    out["word_precision_at_k"] = {str(k): float(v) for k, v in zip(ks, np.nanmean(prec, axis=0))}
    out["word_recall_at_k"] = {str(k): float(v) for k, v in zip(ks, np.nanmean(rec, axis=0))}
    return out


def model_rationales(vocab, corpus) -> list[dict] | None:
    """``corpus.rationales`` with each deciding word's position among the *model's* tokens of its sentence.

    The positions index the space-separated tokens of ``corpus.sentences``; a model whose text
    processing drops tokens (HCAN's cleaning drops "," and others) sees later words at earlier
    positions. Each source token is run through the model's normalizer and pre-tokenizer alone
    (the processing is token-local), and a deciding word the processing drops is left out.
    """
    if corpus.rationales is None or corpus.sentences is None:
        return corpus.rationales
    out = []
    for sentences, rationale in zip(corpus.sentences, corpus.rationales):
        if rationale is None or sentences is None:  # positions index given sentences; without them, none to map
            out.append(rationale if sentences is not None else None)
            continue
        position: dict[tuple[int, int], int] = {}
        for i in {int(i) for i, _ in rationale["words"]}:
            k = 0
            for j, token in enumerate(sentences[i].split(" ")):
                n = len(vocab.tokenize(token))
                if n:
                    position[(i, j)] = k
                k += n
        words = [[int(i), position[(int(i), int(j))]] for i, j in rationale["words"] if (int(i), int(j)) in position]
        out.append({**rationale, "words": words})
    return out


def rationale_scores(explanations: list[dict], rationales: list[dict] | None) -> dict:
    """Share of documents whose top-weighted sentence is a deciding one, and mean word-level AUPRC.

    Word scores follow HAN's visualisation rule: sqrt(p_sentence) * p_word. Hierarchical models
    only (what ``docattn demo`` reports); ``rationale_metrics`` has the full set and flat models.
    """
    if not explanations or explanations[0].get("layout") != "hierarchical":
        return {}
    return rationale_metrics(explanations, rationales)
