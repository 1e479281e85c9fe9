"""The multi-label output-layer refit, paired: one run's trained rows against the refit rows, on its own test split.

    python benchmarks/refit_paired.py RUN [RUN ...] --data PATH [--name refit_paired_reuters]

Each RUN is a run folder of a multi-label neural model whose output layer was not refit (trained with
``--set refit_output=false``, or before the refit existed). Its data are prepared again with the run's own
settings (the same seeded split), its test split scored with the trained rows, then
``training.refit.refit_output_layer`` (what ``train`` runs) refits the rows and the test split is scored
again; thresholds are tuned on validation both times, as ``train`` tunes them. ``--data`` is the data the run
was trained on; the positives are weighed as ``train`` weighs them (``recipe.per_class_fit_weights``). Results:
benchmarks/results/<name>.json with the command and the machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402


def paired(run: Path, data_path: str) -> dict:
    from docattn.benchmark import PathData
    from docattn.classifier import DocumentClassifier
    from docattn.training.recipe import per_class_fit_weights
    from docattn.training.refit import refit_output_layer
    from docattn.training.trainer import evaluate_encoded, every_document_labelled, set_thresholds

    clf = DocumentClassifier.load(run)
    data = PathData(data_path)(clf.data_settings)
    train, valid, test = data.splits["train"], data.splits["valid"], data.splits["test"]

    def scored() -> dict:
        set_thresholds(clf, valid)
        report = evaluate_encoded(clf, test)
        return {"micro_f1": round(report["micro_f1"] * 100, 2), "macro_f1": round(report["macro_f1"] * 100, 2)}

    clf.labels.at_least_one = every_document_labelled(train)
    trained = scored()
    positives = per_class_fit_weights(clf.train_config, np.asarray(train.labels), clf.labels.classes)
    record = refit_output_layer(clf, train, valid, positives, clf.train_config.seed, clf.labels.at_least_one)
    refit = scored()
    print(f"{run}: test {trained} trained rows, {refit} refit", flush=True)
    return {"run": str(run), "test": {"trained": trained, "refit": refit}, "refit_output": record}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--data", required=True, help="the data the runs were trained on")
    ap.add_argument("--name", default="refit_paired_reuters")
    args = ap.parse_args()
    trials = [paired(run, args.data) for run in args.runs]
    write_result(args.name, {"trials": trials})


if __name__ == "__main__":
    main()
