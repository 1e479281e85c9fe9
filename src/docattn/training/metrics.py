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
