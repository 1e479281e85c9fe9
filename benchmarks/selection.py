"""Which validation score should pick a run's kept weights? Paired: one training, every rule tested.

    python benchmarks/selection.py --data PATH [--test PATH | --test-fraction F] [--model han] [--seeds 0,1,2]
                                   [--set key=value ...] --name NAME

Each seed trains once at the defaults (with the options of ``--set``). Beside the run's own best weights,
the fit keeps the weights a rule would have kept: the best validation accuracy, macro-F1 and loss, and the
last weights; each set of weights is then tested on the same test documents. Comparing rules across
separate runs mixes them with run-to-run noise (word2vec's threads, the loader), which on a small data set is
as large as the difference sought; here the rules differ only in which step's weights they keep. Early
stopping follows the run's own monitor (``--set monitor=...``), so each rule sees the same training.
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


class LastWeights:
    """The weights at the last validation (what no selection keeps)."""

    def __init__(self):
        from lightning.pytorch.callbacks import Callback

        outer = self

        class _Last(Callback):
            def on_validation_end(self, trainer, pl_module):
                if not trainer.sanity_checking:
                    outer.state = {k: v.detach().to("cpu", copy=True) for k, v in pl_module.model.state_dict().items()}
                    outer.step = trainer.global_step

        self.callback, self.state, self.step = _Last(), None, None


def trial(args, seed: int, options: dict) -> dict:
    from docattn.benchmark import PathData
    from docattn.classifier import DocumentClassifier
    from docattn.training import engine
    from docattn.training.callbacks import BestWeights
    from docattn.training.trainer import evaluate_encoded

    if args.test_fraction:
        options = {**options, "test_fraction": args.test_fraction}
    clf = DocumentClassifier(args.model, seed=seed, progress=False, progress_lines=True, **options)
    data = PathData(args.data, args.test)(clf.data_settings)

    class RuleWeights(BestWeights):
        @property
        def state_key(self) -> str:  # Lightning keys callback state by type: one key per rule
            return f"RuleWeights[{self.monitor}]"

    rules = {rule: RuleWeights(rule) for rule in RULES}
    last = LastWeights()
    plain = engine._fit_callbacks  # the benchmark's hook: the fit's own callbacks, plus the rules' keepers

    def with_rules(*a, **k):
        fit_callbacks = plain(*a, **k)
        fit_callbacks.all[:0] = [*rules.values(), last.callback]
        return fit_callbacks

    engine._fit_callbacks = with_rules
    try:
        clf.fit_prepared(data)
    finally:
        engine._fit_callbacks = plain
    kept = {"run": clf.results["best"]}
    tested = {}
    states = {**{r: (keeper.best_state, keeper.best_metrics) for r, keeper in rules.items()}, "last": (last.state, {})}
    for rule, (state, metrics) in states.items():
        clf.model.load_state_dict(state)
        report = evaluate_encoded(clf, data.splits["test"])
        tested[rule] = {
            "test_accuracy": report["accuracy"],
            "test_macro_f1": report["macro_f1"],
            "step": metrics.get("step", last.step),
            "validation": {k: metrics.get(k) for k in RULES} if metrics else None,
        }
        print(f"seed {seed} {rule}: test accuracy {report['accuracy']:.4f} (step {tested[rule]['step']})", flush=True)
    return {"seed": seed, "run_monitor": clf.train_config.monitor, "kept_by_run": kept, "rules": tested}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--test")
    ap.add_argument("--test-fraction", type=float)
    ap.add_argument("--model", default="han")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--name", required=True)
    args = ap.parse_args()
    if args.test is not None and args.test_fraction is not None:
        raise SystemExit("give --test or --test-fraction, not both (neither: the data's own test split)")
    from docattn.cli.options import parse_sets  # the same parsing as docattn train --set

    options = parse_sets(args.set)
    trials = []
    for seed in args.seeds.split(","):  # the results so far are written after each seed: a stopped study keeps them
        trials.append(trial(args, int(seed), options))
        summary = {}
        for rule in (*RULES, "last"):
            acc = np.array([t["rules"][rule]["test_accuracy"] for t in trials]) * 100
            summary[rule] = {"mean_accuracy": round(float(acc.mean()), 2), "per_seed": np.round(acc, 2).tolist()}
        payload = {"data": args.data, "test": args.test, "test_fraction": args.test_fraction, "model": args.model}
        write_result(args.name, {**payload, "options": options, "summary": summary, "trials": trials}, quiet=True)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
