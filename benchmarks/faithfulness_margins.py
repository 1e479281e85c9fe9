"""Is attention more faithful than a random ranking? ERASER comprehensiveness margins per trained model.

    python benchmarks/faithfulness_margins.py RUN [RUN ...] --data PATH [--split test] [--n 200] --name imdb

For each run: comprehensiveness and sufficiency at 1/5/10/20/50% of each document's words,
their AOPC, for attention, random, gradient x input and integrated gradients rankings, on
``n`` documents drawn at random (seed 0) from the split. The margin reported per model is
AOPC comprehensiveness of attention minus that of random ranks (issue 6: > 0 for every model).
Runs come from e.g. ``docattn benchmark ... --runs DIR``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--data", required=True)
    ap.add_argument("--split", default=None)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--name", required=True, help="Data set name for the result file: results/faithfulness_NAME.json.")
    ap.add_argument("--methods", default="attention,random,gradient_x_input,integrated_gradients")
    args = ap.parse_args()
    from docattn.classifier import DocumentClassifier
    from docattn.data.sources import read_evaluation_corpus
    from docattn.explain.faithfulness import faithfulness

    corpus = read_evaluation_corpus(args.data, args.split, None)
    if args.n < len(corpus):  # a random draw: the split's files are ordered by label
        corpus = corpus.subset(np.sort(np.random.default_rng(0).choice(len(corpus), args.n, replace=False)))
    rows = []
    for run in args.runs:
        clf = DocumentClassifier.load(run)
        res = faithfulness(clf, corpus, methods=args.methods.split(","))
        res["run"] = run.name
        m = res["methods"]
        if m.get("attention", {}).get("available"):
            res["margin_vs_random"] = m["attention"]["aopc_comprehensiveness"] - m["random"]["aopc_comprehensiveness"]
        rows.append(res)
        print(f"{run.name}: accuracy {res.get('accuracy')}, margin {res.get('margin_vs_random')}", flush=True)
    write_result(f"faithfulness_{args.name}", {"documents": args.n, "split": args.split, "results": rows})


if __name__ == "__main__":
    main()
