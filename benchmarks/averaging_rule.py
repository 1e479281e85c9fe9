"""When should a run keep the mean of its five best validations' weights? Scored from selection.py's JSONs.

    python benchmarks/averaging_rule.py RESULT.json [RESULT.json ...] [--name NAME]

Each trial of ``benchmarks/selection.py`` tested, on the same test documents, the weights of the best
validation accuracy (``val_acc``) and the mean of the five most accurate validations' weights
(``top5_mean``), with the mean's own validation accuracy. This scores three rules from those records:
``strict`` keeps the mean where it validates at least as well as the best weights alone (the rule of
2026-12-02), ``within_se`` where it validates at most one standard error under them, sqrt(p (1 - p) / n)
for the best's accuracy p on n validation documents (``engine.averaging_tolerance``), and ``always``.
A trial without its validation size (selection.py records ``n_valid`` since 2026-12-02) has it counted by
preparing the JSON's data with its model's settings, the split selection.py trained on.
Results: benchmarks/results/<name>.json, with the command and the machine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import write_result

RULES = ("best", "strict", "within_se", "always")


def _local(path: str | None) -> str | None:
    """A recorded data path here: results name ../shared/data as seen from where they ran."""
    if path is None or Path(path).exists() or "shared/data/" not in path:
        return path
    return str(Path(__file__).resolve().parents[2] / "shared" / "data" / path.split("shared/data/", 1)[1])


def _validation_documents(doc: dict) -> int:
    from docattn.benchmark import PathData
    from docattn.classifier import DocumentClassifier

    options = dict(doc.get("options") or {})
    if doc.get("test_fraction"):
        options["test_fraction"] = doc["test_fraction"]
    clf = DocumentClassifier(doc["model"], **options)
    return len(PathData(_local(doc["data"]), _local(doc["test"]))(clf.data_settings).splits["valid"])


def score(doc: dict) -> list[dict]:
    from docattn.training.engine import averaging_tolerance

    rows, n_valid = [], None
    for trial in doc["trials"]:
        rules = trial["rules"]
        if not rules.get("top5_mean", {}).get("validation"):
            continue  # a --curve study, or one from before the means were validated
        if trial.get("n_valid") is None and n_valid is None:
            n_valid = _validation_documents(doc)
        n = trial.get("n_valid") or n_valid
        best_v, mean_v = rules["val_acc"]["validation"]["val_acc"], rules["top5_mean"]["validation"]["val_acc"]
        best_t, mean_t = rules["val_acc"]["test_accuracy"] * 100, rules["top5_mean"]["test_accuracy"] * 100
        # in documents: the scores were recorded in float32 and float64, which differ in the last bits
        best_right, mean_right = round(best_v * n), round(mean_v * n)
        se = averaging_tolerance("val_acc", best_v, n) * n  # the package's own margin
        row = {"model": doc["model"], "seed": trial["seed"], "n_valid": n, "val_best": best_v, "val_mean": mean_v}
        row["run_monitor"] = trial.get("run_monitor")  # the package compares this score; these rules, accuracy
        row["tests"] = {
            "best": best_t,
            "strict": mean_t if mean_right >= best_right else best_t,
            "within_se": mean_t if mean_right >= best_right - se else best_t,
            "always": mean_t,
        }
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--name")
    args = ap.parse_args()
    rows = []
    for path in args.results:
        for row in score(json.loads(path.read_text())):
            rows.append({"result": path.stem, **row})
    print(f"{'result':42} {'model':6} seed n_valid  val: best  mean | " + " ".join(f"{r:>9}" for r in RULES))
    for row in rows:
        tests = " ".join(f"{row['tests'][r]:9.2f}" for r in RULES)
        print(
            f"{row['result'][:42]:42} {row['model']:6} {row['seed']:4} {row['n_valid']:7} "
            f"{row['val_best']:9.3f} {row['val_mean']:5.3f} | {tests}"
        )
    summary = {}
    for rule in RULES:
        gains = [row["tests"][rule] - row["tests"]["best"] for row in rows]
        summary[rule] = {
            "mean_gain_over_best": round(sum(gains) / len(gains), 3),
            "gains": sum(g > 1e-9 for g in gains),
            "losses": sum(g < -1e-9 for g in gains),
            "trials": len(gains),
        }
        print(f"{rule:10} {summary[rule]}")
    if args.name:
        write_result(
            args.name, {"inputs": [str(p) for p in args.results], "trials": rows, "summary": summary}, quiet=True
        )


if __name__ == "__main__":
    main()
