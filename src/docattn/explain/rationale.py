"""Attention against known rationales (the embedded corpus): top sentence accuracy, word AUPRC."""

from __future__ import annotations

import numpy as np


def average_precision(scores: np.ndarray, relevant: np.ndarray) -> float:
    """Area under the precision-recall curve (average precision) of ``scores`` ranking ``relevant``."""
    if relevant.sum() == 0:
        return float("nan")
    order = np.argsort(-scores, kind="stable")
    hits = relevant[order].astype(float)
    precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
    return float((precision * hits).sum() / hits.sum())


def rationale_scores(explanations: list[dict], rationales: list[dict] | None) -> dict:
    """Share of documents whose top-weighted sentence is a deciding one, and mean word-level AUPRC.

    Word scores follow HAN's visualisation rule: sqrt(p_sentence) * p_word.
    """
    if not rationales or not explanations or explanations[0].get("layout") != "hierarchical":
        return {}
    if explanations[0]["sentences"][0]["weight"] is None:
        return {}
    top_hits, aps = [], []
    for item, rat in zip(explanations, rationales):
        sent_w = np.array([s["weight"] for s in item["sentences"]])
        top_hits.append(int(sent_w.argmax()) in set(rat["sentences"]))
        scores, relevant = [], []
        deciding = {tuple(p) for p in rat["words"]}
        for i, s in enumerate(item["sentences"]):
            w = np.sqrt(s["weight"]) * np.asarray(s["word_weights"])
            scores.append(w)
            relevant.append(np.array([(i, j) in deciding for j in range(len(w))]))
        aps.append(average_precision(np.concatenate(scores), np.concatenate(relevant)))
    return {"documents": len(top_hits), "top_sentence_accuracy": float(np.mean(top_hits)), "word_auprc": float(np.nanmean(aps))}
