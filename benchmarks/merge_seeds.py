"""Merge `docattn benchmark` folders that each ran other seeds of the same models into one folder.
A cross-validated set merges the same way: its folds are fixed by the split seed, not the seed.

Seeds of one configuration can run as parallel processes (`--first-seed N --seeds 1`, one per
core); this writes the combined results.json / results.md / curves.png with the same means and
standard deviations `docattn benchmark --seeds K` would, and a run.json listing every command.

    python benchmarks/merge_seeds.py OUT RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from docattn.benchmark import markdown_table, plot_curves, summarize
from docattn.data.files import write_json


def merge(out: Path, folders: list[Path]) -> list[dict]:
    trials: dict[str, list[dict]] = {}
    for folder in folders:
        for row in json.loads((folder / "results.json").read_text()):
            trials.setdefault(row["model"], []).extend(row["trials"])
    for model, rows in trials.items():
        runs = [_seed_and_fold(t) for t in rows]
        if len(set(runs)) != len(runs):
            sys.exit(f"{model}: a seed (and fold) repeated across folders ({sorted(runs)})")
        rows.sort(key=_seed_and_fold)
    out.mkdir(parents=True, exist_ok=True)
    merged = [summarize(model, rows) for model, rows in trials.items()]
    first = (folders[0] / "results.md").read_text().splitlines()[0]
    title = first[4:] if first.startswith("### ") else out.name
    write_json(out / "results.json", merged)
    (out / "results.md").write_text(markdown_table(merged, title), encoding="utf-8")
    plot_curves(merged, out / "curves.png", title)
    runs = [json.loads((f / "run.json").read_text()) for f in folders if (f / "run.json").exists()]
    dates = [r["date"] for r in runs if "date" in r]  # the newest, as transfer.py orders a set's runs by it
    write_json(
        out / "run.json",
        {
            "merged_from": [str(f) for f in folders],
            "commands": [c for r in runs for c in r.get("commands", [r.get("command")])],  # a merged folder: its own
            "runs": runs,
            **({"date": max(dates)} if dates else {}),
        },
    )
    return merged


def _seed_and_fold(trial: dict) -> tuple[int, int]:
    """What one trial ran: a cross-validated run holds one trial per fold of its seed (-1: no folds)."""
    fold = trial.get("fold")
    return trial["seed"], -1 if fold is None else fold


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for row in merge(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]):
        acc = row["test_accuracy"]
        print(f"{row['model']}: {100 * acc['mean']:.2f} +- {100 * acc['std']:.2f} over seeds {row['seeds']}")
