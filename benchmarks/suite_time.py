"""What the transfer suite costs to run once: the training time of one seed of every cell of its table.

    python benchmarks/suite_time.py [--sets bbc,ag,...]

Reads the cells `transfer.py --table-only` tables (each model's newest run of each set) and adds up their
trials' `train_seconds`, per seed: one seed of a cross-validated set is its five folds, one seed of a set with
a test split is one trial. Training alone is a lower bound on a run's wall time (reading, word2vec and testing
come on top), so where half the total (two processes at a time) is over the issue's 2 hours, the suite cannot
run in 2 hours on two cores. The cells ran on two kinds of 2-core host, one process per core (each cell's
`run.json` names its CPU, and so does the result), so the figure is of those hosts.
Writes results/suite_time.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, write_result  # noqa: E402
from transfer import MODELS, SETS, newest_runs  # noqa: E402


def seed_seconds(row: dict) -> float:
    """The training seconds of one seed of a cell: all its trials' time over its number of seeds."""
    trials = row["trials"]
    return sum(t["train_seconds"] for t in trials) / len({t["seed"] for t in trials})


def cpus(record: dict) -> set[str]:
    """The CPUs a run.json's runs ran on: a merged folder keeps each run's record, a merge of merges theirs."""
    if "runs" in record:
        return set().union(*(cpus(r) for r in record["runs"]))
    return {record.get("machine", {}).get("cpu", "?")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    args = ap.parse_args()
    cells, missing = [], []
    for name in args.sets.split(","):
        runs = newest_runs(RESULTS / "transfer" / name)
        if not runs:
            missing.append(name)
            continue
        for model, (row, run, _) in runs.items():
            ran_on = " + ".join(sorted(cpus(json.loads((run / "run.json").read_text()))))
            cells.append({"set": name, "model": model, "seconds": round(seed_seconds(row), 1), "cpu": ran_on})
    total = sum(c["seconds"] for c in cells)
    by_set = {}
    for c in cells:
        by_set[c["set"]] = by_set.get(c["set"], 0) + c["seconds"]
    for name, seconds in by_set.items():
        print(f"{name:10s} {seconds / 60:7.1f} min")
    print(f"{len(cells)} cells: {total / 3600:.2f} h of training in one process, {total / 7200:.2f} h two at a time")
    ran = {(c["set"], c["model"]) for c in cells}
    absent = [f"{name}/{m}" for name in by_set for m in MODELS.split(",") if (name, m) not in ran]
    if missing or absent:
        print(f"not run, so not counted: the sets {', '.join(missing) or '-'}; the cells {', '.join(absent) or '-'}")
    summary = {
        "cells": cells,
        "by_set_seconds": by_set,
        "total_seconds": round(total, 1),
        "missing_sets": missing,
        "missing_cells": absent,
    }
    out = write_result("suite_time", summary, quiet=True)
    print(f"wrote {out.relative_to(RESULTS.parent)}")


if __name__ == "__main__":
    main()
