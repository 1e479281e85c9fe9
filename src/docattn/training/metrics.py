"""Classification metrics from predicted and gold class indices (NumPy only)."""

from __future__ import annotations

import numpy as np


def confusion_matrix(gold: np.ndarray, pred: np.ndarray, n_classes: int) -> np.ndarray:
    """(n_classes, n_classes) counts; row = gold class, column = predicted class."""
    return np.bincount(gold * n_classes + pred, minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def classification_report(gold, pred, classes: list) -> dict:
    """Accuracy, macro-F1, per-class precision/recall/F1/support and the confusion matrix.

    Macro-F1 averages the classes that occur in the gold labels or the predictions, as scikit-learn's
    ``f1_score(average="macro")`` does: a class predicted but never true counts, with F1 0."""
    gold, pred = np.asarray(gold, dtype=np.int64), np.asarray(pred, dtype=np.int64)
    k = len(classes)
    cm = confusion_matrix(gold, pred, k)
    tp = np.diag(cm).astype(float)
    precision = np.divide(tp, cm.sum(0), out=np.zeros(k), where=cm.sum(0) > 0)
    recall = np.divide(tp, cm.sum(1), out=np.zeros(k), where=cm.sum(1) > 0)
    f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros(k), where=(precision + recall) > 0)
    present = (cm.sum(1) + cm.sum(0)) > 0
    return {
        "documents": int(len(gold)),
        "accuracy": float((gold == pred).mean()) if len(gold) else float("nan"),
        "macro_f1": float(f1[present].mean()) if present.any() else float("nan"),
        "per_class": [
            {"class": c, "precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for c, p, r, f, s in zip(classes, precision, recall, f1, cm.sum(1))
        ],
        "confusion_matrix": cm.tolist(),
    }


def macro_f1(gold, pred, n_classes: int) -> float:
    return classification_report(gold, pred, list(range(n_classes)))["macro_f1"]


def multilabel_report(gold, decisions, classes: list) -> dict:
    """Multi-label scores of 0/1 matrices (documents x classes): micro- and macro- precision, recall and F1,
    subset accuracy (``accuracy``: every class of a document right), Hamming loss and a per-class table.

    Macro averages the classes that occur in the gold labels or the decisions, as ``classification_report``."""
    gold, pred = np.asarray(gold, dtype=bool), np.asarray(decisions, dtype=bool)
    tp, predicted, support = (gold & pred).sum(0), pred.sum(0), gold.sum(0)
    precision = np.divide(tp, predicted, out=np.zeros(len(classes)), where=predicted > 0)
    recall = np.divide(tp, support, out=np.zeros(len(classes)), where=support > 0)
    f1 = np.divide(2 * tp, predicted + support, out=np.zeros(len(classes)), where=(predicted + support) > 0)
    present = (predicted + support) > 0
    micro_p = tp.sum() / max(predicted.sum(), 1)
    micro_r = tp.sum() / max(support.sum(), 1)
    nan = float("nan")
    return {
        "documents": int(len(gold)),
        "multi_label": True,
        "accuracy": float((gold == pred).all(1).mean()) if len(gold) else nan,
        "micro_f1": float(2 * tp.sum() / max(predicted.sum() + support.sum(), 1)),
        "micro_precision": float(micro_p),
        "micro_recall": float(micro_r),
        "macro_f1": float(f1[present].mean()) if present.any() else nan,
        "macro_precision": float(precision[present].mean()) if present.any() else nan,
        "macro_recall": float(recall[present].mean()) if present.any() else nan,
        "hamming_loss": float((gold != pred).mean()) if gold.size else nan,
        "per_class": [
            {"class": c, "precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for c, p, r, f, s in zip(classes, precision, recall, f1, support)
        ],
    }


THRESHOLD_GRID = np.round(np.arange(0.05, 0.951, 0.05), 2)
MIN_POSITIVES = 3  # a class's own threshold needs this many validation documents of it; else the global one


def tune_thresholds(gold, probs) -> tuple[np.ndarray, float]:
    """(per-class thresholds, the global threshold) that maximise micro-F1 on validation.

    The global threshold maximises micro-F1 over all classes. Then each class with at least ``MIN_POSITIVES``
    validation documents gets the threshold that maximises micro-F1 with every other class at the global one
    (ties: the one nearest the global). Its own F1 would be the wrong aim: for a class the model cannot tell
    apart, "every document" has the best F1 and floods the output with false positives. Rarer classes keep
    the global threshold, since one or two documents would pick one at random."""
    gold, probs = np.asarray(gold, dtype=bool), np.asarray(probs, dtype=np.float64)
    support = gold.sum(0)
    tp = np.stack([((probs >= t) & gold).sum(0) for t in THRESHOLD_GRID]).astype(np.float64)  # (G, C)
    predicted = np.stack([(probs >= t).sum(0) for t in THRESHOLD_GRID]).astype(np.float64)
    micro = 2 * tp.sum(1) / np.maximum(predicted.sum(1) + support.sum(), 1)
    g = int(np.argmax(micro))
    global_t = float(THRESHOLD_GRID[g])
    # micro-F1 when class c alone moves to threshold t: its counts at t replace its counts at the global one
    tp_all = tp[g].sum() - tp[g][None, :] + tp
    predicted_all = predicted[g].sum() - predicted[g][None, :] + predicted
    moved = 2 * tp_all / np.maximum(predicted_all + support.sum(), 1)
    distance = np.abs(THRESHOLD_GRID - global_t)[:, None].repeat(moved.shape[1], 1)
    best = np.lexsort((distance, -np.round(moved, 12)), axis=0)[0]  # highest micro-F1, then nearest the global
    thresholds = np.where(support >= MIN_POSITIVES, THRESHOLD_GRID[best], global_t)
    return thresholds, global_t
