"""A multi-label model's output layer refit on its own document vectors (``refit_output``).

Trained with binary cross-entropy, a class with a handful of positives among thousands of documents gets
an output row that ranks its documents no higher than the rest: on Reuters-21578 han never predicted one of
the 26 classes with 1-4 training documents (average precision 0.13, benchmarks/README.md). After training,
the vectors the model's output layer reads for the training documents stay fixed, and each class's row is
refit as the logistic-regression baseline fits its own: an L2-penalised logistic regression per class, its
positives weighed by its negatives / positives (a representation learned once, its classifier refit with
the classes balanced: Kang et al., "Decoupling Representation and Classifier for Long-Tailed Recognition",
ICLR 2020). The run's results keep the validation scores of the trained and the refit rows, each at
thresholds tuned on validation, so the trade (macro-F1 gained, micro-F1 moved) is on record.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

MAX_DOCUMENTS = 50_000  # past this, a seeded stratified sample of the training split (vectors: documents x features)
C = 1.0  # scikit-learn's default penalty, as the logreg baseline's


def refit_output_layer(
    clf, train, valid, positive_weights: np.ndarray | None, seed: int, at_least_one: bool = False
) -> dict:
    """Refit ``clf.model.classifier`` (multi-label) on the document vectors of ``train``. Returns what was done
    and the validation scores before and after, for the run's results; ``at_least_one``: the run gives every
    document a label (``LabelMap.at_least_one``), so validation is scored so too."""
    from docattn.training.inference import document_vectors

    t0 = time.perf_counter()
    head = clf.model.classifier
    sampled = len(train) > MAX_DOCUMENTS
    if sampled:  # stratified on each document's rarest label: a rare class keeps positives to be refit on
        from docattn.data.splits import capped_sample

        train = train.subset(capped_sample(train.labels, MAX_DOCUMENTS, seed))
    X = document_vectors(clf.model, train, limits=clf.limits).astype(np.float64)  # lbfgs's dtype, converted once
    trained = tuple(p.detach().cpu().numpy().astype(np.float64) for p in (head.weight, head.bias))
    weight, bias, refit = _per_class(X, np.asarray(train.labels, dtype=bool), positive_weights, *trained)
    with torch.no_grad():
        head.weight.copy_(torch.from_numpy(weight).to(head.weight))
        head.bias.copy_(torch.from_numpy(bias).to(head.bias))
    V = document_vectors(clf.model, valid, limits=clf.limits)
    return {
        "classes_refit": refit,
        "documents": len(train),
        "sampled": sampled,
        "valid": {
            "trained": _validation_scores(clf.labels, valid.labels, V, *trained, at_least_one),
            "refit": _validation_scores(clf.labels, valid.labels, V, weight, bias, at_least_one),
        },
        "seconds": round(time.perf_counter() - t0, 2),
    }


def _per_class(X: np.ndarray, Y: np.ndarray, positive_weights, weight: np.ndarray, bias: np.ndarray):
    """(weight, bias, classes refit): each class with positive and negative training documents refit; a class
    without either keeps its trained row (the baseline gives such a class a constant answer)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    weight, bias, refit = weight.copy(), bias.copy(), 0
    for c in range(Y.shape[1]):
        y = Y[:, c]
        if y.all() or not y.any():
            continue
        sample_weight = None if positive_weights is None else np.where(y, positive_weights[c], 1.0)
        # lbfgs on dense vectors, one thread: liblinear is for the baseline's sparse tf-idf columns
        with warnings.catch_warnings():  # a row short of lbfgs's tolerance after 1,000 steps still ranks its class
            warnings.simplefilter("ignore", ConvergenceWarning)
            lr = LogisticRegression(C=C, max_iter=1000).fit(X, y, sample_weight=sample_weight)
        weight[c], bias[c], refit = lr.coef_[0], lr.intercept_[0], refit + 1
    return weight, bias, refit


def _validation_scores(labels, gold, V: np.ndarray, weight, bias, at_least_one: bool) -> dict:
    """Validation micro- and macro-F1 of output rows, decided as the run decides: thresholds tuned on validation
    (``tune_thresholds``), and every document given a label where every training document has one."""
    from scipy.special import expit

    from docattn.training.metrics import multilabel_report, tune_thresholds

    probs = expit(V @ weight.T + bias)
    decider = copy.copy(labels)
    decider.thresholds, _ = tune_thresholds(gold, probs)
    decider.at_least_one = at_least_one
    report = multilabel_report(np.asarray(gold), decider.decide(probs), labels.classes)
    return {"micro_f1": round(float(report["micro_f1"]), 4), "macro_f1": round(float(report["macro_f1"]), 4)}
