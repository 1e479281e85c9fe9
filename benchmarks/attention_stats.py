"""How sparse and how diagonal is self-attention, per data set? SANet's Table 2 check (Letarte et al. 2018).

    python benchmarks/attention_stats.py --case imdb RUN DATA --case 20news RUN DATA \
        [--split test] [--n 1000] --name NAME

For each case (a label, a trained run, the data it is scored on): test accuracy on ``n`` documents
drawn at random (seed 0) from the split, and ``attention_statistics`` of every attention the model
returns, with diagonality under uniform attention over the same words beside the model's (it falls
with document length, and the data sets' lengths differ) and the Gini of what each word receives
(the paper's Figure 4 shows topic attention as columns). The paper's figures, base model: Gini
55.31 on AG (topic) and 84.18 on Yelp F. (sentiment); diagonality(3) 16.21 and 45.49.
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
    ap.add_argument("--case", nargs=3, action="append", required=True, metavar=("LABEL", "RUN", "DATA"))
    ap.add_argument("--split", default=None, help="The split of an archive (test); none for a file.")
    ap.add_argument("--n", type=int, default=1000, help="Documents drawn at random from the split (0: all).")
    ap.add_argument("--name", required=True, help="results/attention_stats_NAME.json")
    args = ap.parse_args()
    from docattn.classifier import DocumentClassifier
    from docattn.data.sources import read_evaluation_corpus
    from docattn.explain.stats import attention_statistics

    rows = []
    for label, run, data in args.case:
        corpus = read_evaluation_corpus(data, args.split, None)
        if args.n and args.n < len(corpus):  # a random draw: the split's files are ordered by label
            corpus = corpus.subset(np.sort(np.random.default_rng(0).choice(len(corpus), args.n, replace=False)))
        clf = DocumentClassifier.load(run)
        gold = np.asarray(clf.labels.encode(corpus.labels, "evaluation data"))
        accuracy = float((clf.predict_proba(corpus).argmax(1) == gold).mean())
        stats = attention_statistics(clf, corpus)
        lengths = clf.encode(corpus.without_labels()).token_counts
        if clf.model.layout == "flat" and clf.limits.get("max_tokens"):
            lengths = np.minimum(lengths, clf.limits["max_tokens"])  # what the model read
        rows.append(
            {
                "case": label,
                "run": str(run),
                "data": data,
                "model": clf.model_name,
                "accuracy": accuracy,
                "mean_tokens_read": float(np.mean(lengths)),
                **stats,
            }
        )
        for key, s in stats["attentions"].items():
            extra = ""
            if s["kind"] == "matrix":
                extra = (
                    f", diagonality(3) {s['diagonality']['3']:.4f} (uniform {s['diagonality_uniform']['3']:.4f}), "
                    f"Gini over each matrix {s['gini_matrix']:.4f}, "
                    f"Gini of what each word receives {s['gini_columns']:.4f}"
                )
            print(
                f"{label} {clf.model_name} {key}: Gini {s['gini']:.4f}, H/log n {s['normalized_entropy']:.4f}{extra}",
                flush=True,
            )
    write_result(f"attention_stats_{args.name}", {"split": args.split, "documents": args.n, "results": rows})


if __name__ == "__main__":
    main()
