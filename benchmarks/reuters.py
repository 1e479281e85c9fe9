"""Reuters-21578 ModApte (90 categories, multi-label): the figures in the run folders of `docattn benchmark`.

`docattn benchmark --runs DIR` keeps each trial's run folder; this reads them back and writes
`<folder>/multilabel.json` beside the benchmark's results.json: per trial the test scores (micro- and macro-F1,
subset accuracy, Hamming loss, precision and recall), the decision thresholds, how long training ran, and where
macro-F1 is lost: F1 and average precision (threshold-free) per class, by the class's training documents.

    docattn benchmark --data ../shared/data/reuters21578/reuters21578.tar.gz --models logreg,han --seeds 1 \\
        --out benchmarks/results/reuters_modapte --runs /tmp/reuters_runs
    python benchmarks/reuters.py benchmarks/results/reuters_modapte /tmp/reuters_runs [MORE_RUNS ...]

The test scores are recomputed from the saved weights and thresholds and checked against the run's own.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

# classes grouped by their documents in the training split (after validation was held out)
BUCKETS = ((0, 0), (1, 4), (5, 9), (10, 29), (30, 99), (100, 10**9))


def load_splits(run: Path, clf) -> dict:
    """The run's encoded train, valid and test splits: from its encoding cache, else encoded again."""
    from docattn.data.encoding import EncodedCorpus

    data = json.loads((run / "config.json").read_text())["results"]["data"]
    cache = Path(data.get("cache") or "/nonexistent")
    if (cache / "COMPLETE").exists():
        return {n: EncodedCorpus.load(cache / n) for n in ("train", "valid", "test")}
    from docattn.data.prepare import prepare_paths

    source = Path(__file__).resolve().parents[1] / "../shared/data/reuters21578/reuters21578.tar.gz"
    return prepare_paths(source.resolve(), None, None, clf.data_settings, {}).splits


def trial_record(run: Path) -> dict:
    from sklearn.metrics import average_precision_score

    from docattn.classifier import DocumentClassifier
    from docattn.training.inference import probabilities
    from docattn.training.metrics import MIN_POSITIVES, multilabel_report

    clf = DocumentClassifier.load(run)
    config = json.loads((run / "config.json").read_text())
    res = config["results"]
    splits = load_splits(run, clf)
    gold = {n: np.asarray(splits[n].labels).astype(bool) for n in splits}
    probs = probabilities(clf.model, splits["test"], 256, clf.limits, True)
    thresholds = np.asarray(clf.labels.thresholds)
    # the run's own decision rule: its thresholds, and (runs since 566f513) no empty answer where every
    # training document had a label
    report = multilabel_report(gold["test"], clf.labels.decide(probs).astype(bool), list(clf.labels.classes))
    saved = res["test"]
    for key in ("micro_f1", "macro_f1", "accuracy", "hamming_loss"):  # the same weights, the same figures
        if abs(report[key] - saved[key]) > 1e-6:
            raise SystemExit(f"{run}: recomputed test {key} {report[key]:.6f} differs from the run's {saved[key]:.6f}")
    f1 = np.array([c["f1"] for c in report["per_class"]])
    n_train, n_valid, n_test = gold["train"].sum(0), gold["valid"].sum(0), gold["test"].sum(0)
    ap = np.array(
        [average_precision_score(gold["test"][:, c], probs[:, c]) if n_test[c] else np.nan for c in range(len(f1))]
    )
    predicted = clf.labels.decide(probs).sum(0)
    by_training = []
    for low, high in BUCKETS:
        sel = (n_train >= low) & (n_train <= high)
        if sel.any():
            by_training.append(
                {
                    "training_documents": f"{low}-{high}" if high < 10**9 else f"{low}+",
                    "classes": int(sel.sum()),
                    "mean_f1": round(float(f1[sel].mean()), 4),
                    "never_predicted": int((predicted[sel] == 0).sum()),
                    "mean_average_precision": round(float(np.nanmean(ap[sel])), 4),
                    "own_threshold": int((n_valid[sel] >= MIN_POSITIVES).sum()),
                }
            )
    training = config["training"]
    history = res.get("history", [])
    return {
        "run": run.name,
        "model": clf.model_name,
        "test": {k: v for k, v in saved.items() if not isinstance(v, (dict, list))},
        "valid": {k: v for k, v in res.get("valid", {}).items() if not isinstance(v, (dict, list))},
        "documents": res["data"]["documents"],
        "thresholds": {
            **res.get("thresholds", {}),
            "own_thresholds": sorted(round(float(t), 2) for t in thresholds[n_valid >= MIN_POSITIVES]),
        },
        "training": {
            "planned_epochs": training.get("max_epochs"),
            "epochs_run": len(res.get("epoch_seconds", [])) or None,
            "steps": history[-1].get("step") if history else None,
            "best": res.get("best"),
            "stopped_early": res.get("stopped_early"),
            "stopped_on_budget": res.get("stopped_on_budget"),
            "train_seconds": res.get("train_seconds"),
            "monitor": training.get("monitor"),
            "patience": training.get("patience"),
            "min_steps": training.get("min_steps"),
        },
        "classes_never_predicted_on_test": int((predicted == 0).sum()),
        "macro_average_precision": round(float(np.nanmean(ap)), 4),
        "other_thresholds": other_thresholds(clf, splits, gold, probs, thresholds),
        "by_training_documents": by_training,
        "per_class": [
            {
                "class": str(c),
                "train": int(a),
                "valid": int(b),
                "test": int(t),
                "threshold": round(float(th), 2),
                "f1": round(float(f), 4),
                "average_precision": round(float(p), 4),
            }
            for c, a, b, t, th, f, p in zip(clf.labels.classes, n_train, n_valid, n_test, thresholds, f1, ap)
        ],
    }


def other_thresholds(clf, splits, gold, probs, thresholds) -> dict:
    """Test scores of the same probabilities under other decision rules (diagnostics, not defaults):
    - own_f1_on_validation: each class at the threshold that maximises its own F1 on validation (every class
      with a validation document);
    - at_least_one: the run's thresholds, and a document over none of them gets the class nearest its
      threshold (highest probability / threshold), since every training document has a class;
    - pooled_rare: the classes with too few validation documents for a threshold of their own share one,
      tuned on validation for micro-F1 (the run's rule, with them moved together), alone and with at_least_one;
    - best_on_test_macro_f1: each class at its best threshold on the test split itself (an upper bound)."""
    from docattn.training.inference import probabilities
    from docattn.training.metrics import THRESHOLD_GRID, multilabel_report

    def f1(y, p, t) -> float:
        return multilabel_report(y[:, None], (p >= t)[:, None], [0])["macro_f1"]

    def scores(decided) -> dict:
        r = multilabel_report(gold["test"], decided, list(clf.labels.classes))
        return {k: round(r[k], 4) for k in ("micro_f1", "macro_f1", "accuracy")}

    valid = probabilities(clf.model, splits["valid"], 256, clf.limits, True)
    own = thresholds.copy()
    for c in np.flatnonzero(gold["valid"].sum(0) > 0):
        own[c] = max(THRESHOLD_GRID, key=lambda t: f1(gold["valid"][:, c], valid[:, c], t))
    oracle = [max(f1(gold["test"][:, c], probs[:, c], t) for t in THRESHOLD_GRID) for c in range(len(thresholds))]
    pooled, shared = pooled_rare_thresholds(gold["valid"], valid, thresholds)
    return {
        "own_f1_on_validation": scores(probs >= own),
        "at_least_one": scores(at_least_one(probs, thresholds)),
        "pooled_rare": {"threshold": shared, **scores(probs >= pooled)},
        "pooled_rare_at_least_one": scores(at_least_one(probs, pooled)),
        "best_on_test_macro_f1": round(float(np.mean(oracle)), 4),
        "grid": [float(t) for t in THRESHOLD_GRID],
    }


def at_least_one(probs: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Decisions at ``thresholds``; a document over none gets the class with the highest probability / threshold."""
    decided = probs >= thresholds
    empty = np.flatnonzero(~decided.any(1))
    decided[empty, np.argmax(probs[empty] / thresholds, 1)] = True
    return decided


def pooled_rare_thresholds(gold: np.ndarray, probs: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, float]:
    """``thresholds`` with the classes under MIN_POSITIVES validation documents moved to one shared threshold:
    the one that maximises validation micro-F1 with the other classes at their own (ties: the lowest)."""
    from docattn.training.metrics import MIN_POSITIVES, THRESHOLD_GRID

    rare = gold.sum(0) < MIN_POSITIVES
    best, shared = -1.0, float(thresholds[rare][0]) if rare.any() else float("nan")
    for t in THRESHOLD_GRID:
        decided = np.where(rare, probs >= t, probs >= thresholds)
        score = 2 * (decided & gold).sum() / max(decided.sum() + gold.sum(), 1)
        if score > best + 1e-12:
            best, shared = score, float(t)
    return np.where(rare, shared, thresholds), shared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the benchmark's --out folder (multilabel.json is written there)")
    parser.add_argument("runs", type=Path, nargs="+", help="the benchmark's --runs folders (MODEL-seedN run folders)")
    args = parser.parse_args()
    runs = sorted(
        (p for folder in args.runs for p in folder.iterdir() if (p / "config.json").exists()), key=lambda p: p.name
    )
    trials = [trial_record(run) for run in runs]
    run = json.loads((args.folder / "run.json").read_text())
    doc = {
        "command": "python " + " ".join(sys.argv),
        "benchmark_commands": run.get("commands") or [run.get("command")],  # merge_seeds.py's run.json: several
        "machine": machine(),
        "trials": trials,
    }
    (args.folder / "multilabel.json").write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    for t in trials:
        s = t["test"]
        print(
            f"{t['run']}: micro-F1 {s['micro_f1']:.4f} macro-F1 {s['macro_f1']:.4f} subset {s['accuracy']:.4f} "
            f"Hamming {s['hamming_loss']:.5f}, {t['training']['epochs_run']} epochs, "
            f"{t['classes_never_predicted_on_test']} classes never predicted"
        )
        for b in t["by_training_documents"]:
            print("   ", b)


if __name__ == "__main__":
    main()
