"""Is a single-label run's output layer what costs it macro-F1 on imbalanced data? Refit it and see.

    python benchmarks/refit_single.py RUN [RUN ...] --data TRAIN --test TEST [--name refit_single]

Each RUN is a kept single-label run folder (``benchmark --runs``). Its data are prepared again with the run's
own settings (the same seeded split). The vectors its output layer reads for the training documents are
fixed, and the layer is refit as one multinomial logistic regression on them (Kang et al., "Decoupling
Representation and Classifier for Long-Tailed Recognition", ICLR 2020), at two penalties and three class
weightings: none, the square root of "balanced" (the neural loss's default on imbalanced data) and
"balanced". Validation and test accuracy and macro-F1 are recorded for the trained layer and every refit,
with each class's test F1, so that a gain shows where it comes from. Results:
benchmarks/results/<name>.json with the command and the machine.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

PENALTIES = (1.0, 0.1)  # scikit-learn's default C, and ten times the penalty: vectors that fit training
WEIGHTINGS = ("none", "sqrt_balanced", "balanced")


def scores(X: dict, Y: dict, weight: np.ndarray, bias: np.ndarray) -> dict:
    from sklearn.metrics import f1_score

    out, predicted = {}, {}
    for split in ("train", "valid", "test"):
        predicted[split] = (X[split] @ weight.T + bias).argmax(1)
        out[split] = {
            "accuracy": round(100 * float((predicted[split] == Y[split]).mean()), 2),
            "macro_f1": round(100 * float(f1_score(Y[split], predicted[split], average="macro")), 2),
        }
    per_class = f1_score(Y["test"], predicted["test"], average=None, labels=range(len(bias)))
    out["test_f1_per_class"] = [round(100 * float(f), 1) for f in per_class]
    return out


def refit(clf, X: np.ndarray, y: np.ndarray, C: float, weighting: str) -> tuple[np.ndarray, np.ndarray]:
    from dataclasses import replace

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    from docattn.training.recipe import class_weights

    n_classes = len(clf.labels.classes)
    # the weights the neural loss would take under that class_weight, by the package's own definition
    by_class = (
        None
        if weighting == "none"
        else class_weights(replace(clf.train_config, class_weight=weighting), y, clf.labels.classes)
    )
    class_weight = None if by_class is None else {c: float(by_class[c]) for c in range(n_classes)}
    with warnings.catch_warnings():  # short of lbfgs's tolerance after 2,000 steps still ranks the classes
        warnings.simplefilter("ignore", ConvergenceWarning)
        lr = LogisticRegression(C=C, max_iter=2000, class_weight=class_weight).fit(X, y)
    weight, bias = np.zeros((n_classes, X.shape[1])), np.full(n_classes, -1e9)  # a class absent from training: never
    weight[lr.classes_], bias[lr.classes_] = lr.coef_, lr.intercept_
    return weight, bias


def probe(run: Path, train_path: str, test_path: str) -> dict:
    from docattn.benchmark import PathData
    from docattn.classifier import DocumentClassifier
    from docattn.training.inference import document_vectors

    clf = DocumentClassifier.load(run)
    if clf.labels.multi_label:
        raise SystemExit(f"{run}: multi-label; benchmarks/refit_paired.py refits such a run")
    data = PathData(train_path, test_path)(clf.data_settings)
    splits = {s: data.splits[s] for s in ("train", "valid", "test")}
    X = {s: document_vectors(clf.model, c, limits=clf.limits).astype(np.float64) for s, c in splits.items()}
    Y = {s: np.asarray(c.labels) for s, c in splits.items()}
    head = clf.model.classifier
    trained = [p.detach().cpu().numpy().astype(np.float64) for p in (head.weight, head.bias)]
    n_classes = len(trained[1])
    record = {
        "run": str(run),
        "classes": [str(c) for c in clf.labels.classes],
        "train_counts": np.bincount(Y["train"], minlength=n_classes).tolist(),
        "trained": scores(X, Y, *trained),
        "refit": {
            f"C={C} {weighting}": scores(X, Y, *refit(clf, X["train"], Y["train"], C, weighting))
            for C in PENALTIES
            for weighting in WEIGHTINGS
        },
    }
    brief = {k: (v["test"]["accuracy"], v["test"]["macro_f1"]) for k, v in record["refit"].items()}
    print(f"{run}: test (accuracy, macro-F1) trained {record['trained']['test']}, refit {brief}", flush=True)
    return record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--data", required=True, help="the training data the runs were trained on")
    ap.add_argument("--test", required=True, help="their test data")
    ap.add_argument("--name", default="refit_single")
    args = ap.parse_args()
    write_result(args.name, {"trials": [probe(run, args.data, args.test) for run in args.runs]}, quiet=True)


if __name__ == "__main__":
    main()
