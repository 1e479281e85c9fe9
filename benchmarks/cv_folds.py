"""One model on chosen folds of a stratified 5-fold split, with options: a quick probe of a default.

    python benchmarks/cv_folds.py FOLDS [OPTIONS_JSON] [--data PATH] [--model han] [--name NAME]
    e.g. python benchmarks/cv_folds.py 0,2,4 '{"patience": 0}' --name bbc_han_no_patience

Prints one JSON line per fold (test accuracy, best epoch, planned epochs, seconds) and the mean; with
``--name``, also records them in results/NAME.json with the command and the machine (beside, never over, an
earlier file of that name). Runs on one torch thread, without the tf-idf guardrail, so two probes can share
the two cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folds")
    ap.add_argument("options", nargs="?", default="{}")
    ap.add_argument("--data", default=str(SHARED_DATA / "bbc" / "bbc.tar.gz"))
    ap.add_argument("--model", default="han")
    ap.add_argument("--name", help="also record the folds in results/NAME.json")
    args = ap.parse_args()
    import torch

    from docattn.classifier import DocumentClassifier
    from docattn.data.prepare import prepare_paths

    torch.set_num_threads(1)
    options = json.loads(args.options)
    accuracies, folds = [], []
    for fold in (int(f) for f in args.folds.split(",")):
        clf = DocumentClassifier(args.model, progress=False, guardrail=False, cv_folds=5, cv_fold=fold, **options)
        data = prepare_paths(args.data, None, None, clf.data_settings)
        t0 = time.perf_counter()
        clf.fit_prepared(data)
        accuracies.append(clf.results["test"]["accuracy"])
        folds.append(
            {
                "fold": fold,
                "options": options,
                "test_accuracy": round(accuracies[-1], 4),
                "best_epoch": clf.results["best"]["epoch"],
                "planned_epochs": clf.train_config.max_epochs,
                "seconds": round(time.perf_counter() - t0),
            }
        )
        print(json.dumps(folds[-1]), flush=True)
    mean = round(sum(accuracies) / len(accuracies), 4)
    summary = {"model": args.model, "options": options, "mean_test_accuracy": mean}
    print(json.dumps(summary))
    if args.name:
        write_result(args.name, {"data": args.data, **summary, "folds": folds}, quiet=True)


if __name__ == "__main__":
    main()
