"""Which validation score should pick a run's kept weights? Paired: one training, every rule tested.

    python benchmarks/selection.py --data PATH [--test PATH | --test-fraction F] [--model han] [--seeds 0,1,2]
                                   [--set key=value ...] [--curve N] --name NAME

Each seed trains once at the defaults (with the options of ``--set``). Beside the run's own kept weights
(``run``: the mean of its best validations' weights where that validated about as well, ``average_best``), the
fit keeps the weights a rule would have kept: the best validation accuracy, macro-F1 and loss, the newest
weights within a standard error of the best accuracy, the last weights, and the mean of the weights of the 3
and of the 5 most accurate validations (``top3_mean``, ``top5_mean``, whatever they validate), and with the
validation loss breaking ties of accuracy the best alone, the mean of the 5 best and the run's own rule over them
(``val_acc_loss_ties``, ``top5_mean_loss_ties``, ``run_loss_ties``); each set of weights is then tested on the
same test documents. Comparing rules across separate runs mixes them with
run-to-run noise (word2vec's threads, the loader), which on a small data set is as large as the difference
sought; here the rules differ only in which step's weights they keep. Early stopping follows the run's own
monitor (``--set monitor=...``), so each rule sees the same training.

``--curve N`` keeps the weights of every validation instead, tests each on the same N test documents drawn
at random (the curve, saved with the validation scores, so a rule thought of later can be scored from the
JSON alone), and tests the weights each rule of ``CURVE_RULES`` picks, found from the recorded validation
scores, on the whole test split.
Results: benchmarks/results/<name>.json, with the command and the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

RULES = ("val_acc", "val_macro_f1", "val_loss")
AVERAGED = {"top3_mean": 3, "top5_mean": 5}  # the mean of the weights of the k most accurate validations


def _prepared(args, seed: int, options: dict):
    """(a classifier at the defaults and ``options``, its prepared data)."""
    from docattn.benchmark import PathData
    from docattn.classifier import DocumentClassifier

    if args.test_fraction:
        options = {**options, "test_fraction": args.test_fraction}
    clf = DocumentClassifier(args.model, seed=seed, progress=False, progress_lines=True, **options)
    return clf, PathData(args.data, args.test)(clf.data_settings)


def _fit_with(clf, data, extra: list) -> None:
    """Fits ``clf`` with the ``extra`` callbacks run before the fit's own (the benchmark's hook)."""
    from docattn.training import engine

    plain = engine._fit_callbacks

    def with_extra(*a, **k):
        fit_callbacks = plain(*a, **k)
        fit_callbacks.all[:0] = extra
        return fit_callbacks

    engine._fit_callbacks = with_extra
    try:
        clf.fit_prepared(data)
    finally:
        engine._fit_callbacks = plain


def _smoothed(values: np.ndarray) -> np.ndarray:
    """Each validation's score averaged with its two neighbours (at the ends, the end's own score twice)."""
    padded = np.concatenate([values[:1], values, values[-1:]])
    return (padded[:-2] + padded[1:-1] + padded[2:]) / 3


def _pick(rows: list[dict], rule: str, n_valid: int) -> int:
    """The index of the validation ``rule`` keeps (the first of equals, as BestWeights)."""
    from docattn.training.engine import averaging_tolerance

    acc = np.array([r["val_acc"] for r in rows])
    loss = np.array([r["val_loss"] for r in rows])
    if rule == "val_acc":
        return int(np.argmax(acc))
    if rule == "val_loss":
        return int(np.argmin(loss))
    if rule == "val_acc_then_loss":  # the most accurate, and of those the lowest loss
        return int(np.lexsort((loss, -acc))[0])
    if rule == "val_acc_smoothed":
        return int(np.argmax(_smoothed(acc)))
    if rule == "val_loss_smoothed":
        return int(np.argmin(_smoothed(loss)))
    if rule == "newest_tied":  # as RuleWeights(n_valid=...): the newest within a standard error of the best so far
        kept, best = 0, 0.0
        for i, score in enumerate(acc):
            best = max(best, score)
            if score >= best - averaging_tolerance("val_acc", best, n_valid):
                kept = i
        return kept
    if rule == "last":
        return len(rows) - 1
    raise ValueError(rule)


CURVE_RULES = (
    "val_acc",
    "val_acc_then_loss",
    "val_loss",
    "val_acc_smoothed",
    "val_loss_smoothed",
    "newest_tied",
    "last",
)


def curve_trial(args, seed: int, options: dict) -> dict:
    from lightning.pytorch.callbacks import Callback

    from docattn.training.callbacks import fitting
    from docattn.training.trainer import evaluate_encoded

    clf, data = _prepared(args, seed, options)
    rows, states = [], []

    class EveryValidation(Callback):
        def on_validation_end(self, trainer, pl_module):
            if not fitting(trainer):  # nor the averaged weights' validation after the fit
                return
            metrics = {k: float(trainer.callback_metrics[k]) for k in ("val_acc", "val_macro_f1", "val_loss")}
            rows.append({"step": trainer.global_step, **metrics})
            states.append({k: v.detach().to("cpu", copy=True) for k, v in pl_module.model.state_dict().items()})

    _fit_with(clf, data, [EveryValidation()])
    test = data.splits["test"]
    sample = np.sort(np.random.default_rng(0).choice(len(test), min(args.curve, len(test)), replace=False))
    sampled = test.subset(sample)
    for row, state in zip(rows, states):
        clf.model.load_state_dict(state)
        row["test_sample_accuracy"] = evaluate_encoded(clf, sampled)["accuracy"]
    print(f"seed {seed}: {len(rows)} validations tested on {len(sample)} test documents", flush=True)
    tested, reports = {}, {}
    for rule in CURVE_RULES:
        i = _pick(rows, rule, len(data.splits["valid"]))
        if i not in reports:  # rules often agree: each step's weights are tested once
            clf.model.load_state_dict(states[i])
            reports[i] = evaluate_encoded(clf, test)
        report = reports[i]
        tested[rule] = {"test_accuracy": report["accuracy"], "test_macro_f1": report["macro_f1"], **rows[i]}
        print(f"seed {seed} {rule}: test accuracy {report['accuracy']:.4f} (step {rows[i]['step']})", flush=True)
    return {"seed": seed, "kept_by_run": clf.results["best"], "rules": tested, "curve": rows}


def trial(args, seed: int, options: dict) -> dict:
    from docattn.training.callbacks import BestWeights
    from docattn.training.engine import averaging_tolerance
    from docattn.training.trainer import evaluate_encoded

    clf, data = _prepared(args, seed, options)

    class RuleWeights(BestWeights):
        """``n_valid`` > 0: the newest weights whose accuracy is within one standard error of the best so far,
        sqrt(p (1 - p) / n_valid), not the best's own."""

        def __init__(self, name: str, monitor: str, n_valid: int = 0, keep: int = 1, loss_breaks_ties=False):
            super().__init__(monitor, keep=keep, loss_breaks_ties=loss_breaks_ties)
            self.name, self.n_valid, self.highest = name, n_valid, None

        def keeps(self, score: float, loss: float = float("inf")) -> bool:
            if not self.n_valid:
                return super().keeps(score, loss)
            self.highest = score if self.highest is None else max(self.highest, score)
            return score >= self.highest - averaging_tolerance("val_acc", self.highest, self.n_valid)

        @property
        def state_key(self) -> str:  # Lightning keys callback state by type: one key per rule
            return f"RuleWeights[{self.name}]"

    rules = {rule: RuleWeights(rule, rule) for rule in RULES}
    rules["newest_tied"] = RuleWeights("newest_tied", "val_acc", n_valid=len(data.splits["valid"]))

    class LastWeights(RuleWeights):
        """The weights at the last validation (what no selection keeps): every validation replaces them."""

        def keeps(self, score: float, loss: float = float("inf")) -> bool:
            return True

    rules["last"] = LastWeights("last", "val_acc")
    rules["val_acc_loss_ties"] = RuleWeights("val_acc_loss_ties", "val_acc", loss_breaks_ties=True)
    # the run's own average_best, at each k: the weights of the k most accurate validations
    tops = {rule: RuleWeights(rule, "val_acc", keep=k) for rule, k in AVERAGED.items()}
    tops["top5_mean_loss_ties"] = RuleWeights("top5_mean_loss_ties", "val_acc", keep=5, loss_breaks_ties=True)
    _fit_with(clf, data, [*rules.values(), *tops.values()])
    kept = {"run": clf.results["best"], "averaged": clf.results.get("averaged")}
    report = evaluate_encoded(clf, data.splits["test"])  # the weights the run kept itself (average_best's choice)
    tested = {"run": {"test_accuracy": report["accuracy"], "test_macro_f1": report["macro_f1"]}}
    for rule, keeper in rules.items():
        clf.model.load_state_dict(keeper.best_state)
        metrics = keeper.best_metrics
        report = evaluate_encoded(clf, data.splits["test"])
        tested[rule] = {
            "test_accuracy": report["accuracy"],
            "test_macro_f1": report["macro_f1"],
            "step": metrics["step"],
            "validation": {k: metrics[k] for k in ("val_acc", "val_macro_f1", "val_loss")},
        }
        print(f"seed {seed} {rule}: test accuracy {report['accuracy']:.4f} (step {tested[rule]['step']})", flush=True)
    for rule, top in tops.items():  # the averaged weights, and how they score on validation themselves
        clf.model.load_state_dict(top.mean_state())
        report = evaluate_encoded(clf, data.splits["test"])
        valid = evaluate_encoded(clf, data.splits["valid"])
        tested[rule] = {
            "test_accuracy": report["accuracy"],
            "test_macro_f1": report["macro_f1"],
            "steps": [kept["metrics"]["step"] for kept in top.top],
            "validation_scores": [kept["score"] for kept in top.top],
            "validation": {"val_acc": valid["accuracy"], "val_macro_f1": valid["macro_f1"]},
        }
        print(f"seed {seed} {rule}: test accuracy {report['accuracy']:.4f} (steps {tested[rule]['steps']})", flush=True)
    n_valid = len(data.splits["valid"])  # averaging_rule.py's standard error
    # the run's own rule (average_best) had loss broken ties: the mean where it validates within a standard
    # error of the best, else the best alone
    mean, alone = tested["top5_mean_loss_ties"], tested["val_acc_loss_ties"]
    highest = alone["validation"]["val_acc"]
    within = mean["validation"]["val_acc"] >= highest - averaging_tolerance("val_acc", highest, n_valid)
    tested["run_loss_ties"] = {**(mean if within else alone), "mean_kept": bool(within)}
    return {
        "seed": seed,
        "run_monitor": clf.train_config.monitor,
        "n_valid": n_valid,
        "kept_by_run": kept,
        "rules": tested,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--test")
    ap.add_argument("--test-fraction", type=float)
    ap.add_argument("--model", default="han")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--curve", type=int, help="keep every validation's weights; test each on this many test documents")
    ap.add_argument("--name", required=True)
    args = ap.parse_args()
    if args.test is not None and args.test_fraction is not None:
        raise SystemExit("give --test or --test-fraction, not both (neither: the data's own test split)")
    from docattn.cli.options import parse_sets  # the same parsing as docattn train --set

    options = parse_sets(args.set)
    trials = []
    for seed in args.seeds.split(","):  # the results so far are written after each seed: a stopped study keeps them
        trials.append((curve_trial if args.curve else trial)(args, int(seed), options))
        summary = {}
        plain = ("run", *RULES, "newest_tied", "last", *AVERAGED, "val_acc_loss_ties", "top5_mean_loss_ties")
        for rule in CURVE_RULES if args.curve else (*plain, "run_loss_ties"):
            acc = np.array([t["rules"][rule]["test_accuracy"] for t in trials]) * 100
            summary[rule] = {"mean_accuracy": round(float(acc.mean()), 2), "per_seed": np.round(acc, 2).tolist()}
        payload = {"data": args.data, "test": args.test, "test_fraction": args.test_fraction, "model": args.model}
        write_result(args.name, {**payload, "options": options, "summary": summary, "trials": trials}, quiet=True)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
