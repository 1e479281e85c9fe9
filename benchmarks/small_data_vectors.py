"""Word vectors on small corpora: which start makes HAN train best on 2,000 documents.

    python benchmarks/small_data_vectors.py [--seeds 0,1] [--options word2vec5,word2vec_auto,...]

HAN at its defaults (recipe auto) on two small data sets, changing only the word vectors:
- BBC News: a stratified 80/20 split of its 2,225 articles (seeded), tested on the 20%;
- IMDB 2k: 2,000 training reviews drawn with a seed, tested on 5,000 test reviews drawn the same way.

Options: ``word2vec5`` (gensim's 5 passes, what the paper recipe keeps), ``word2vec_auto`` (the recipe's
passes for the corpus size), ``word2vec_unlabelled`` (IMDB only: the auto passes plus the other 23,000
training reviews as unlabelled text for word2vec), ``wordllama`` (the wordllama package's 256-d token
table, no training), ``random``. Writes benchmarks/results/small_data_vectors.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, write_result  # noqa: E402

OPTIONS = {
    "word2vec5": {"word2vec_epochs": 5},
    "word2vec_auto": {},
    "word2vec_unlabelled": {"word2vec_text": "UNLABELLED"},
    "wordllama": {"embeddings": "wordllama", "embedding_dim": 256},
    "random": {"embeddings": "random"},
}


def bbc(seed: int):
    from docattn.data.readers import read_splits
    from docattn.data.splits import stratified_split

    corpus = next(iter(read_splits(SHARED_DATA / "bbc" / "bbc.tar.gz").values()))
    train, test = stratified_split(corpus.labels, 0.2, seed)
    texts, labels = list(corpus.texts), list(corpus.labels)
    return (
        [texts[i] for i in train],
        [labels[i] for i in train],
        [texts[i] for i in test],
        [labels[i] for i in test],
        None,
    )


def imdb2k(seed: int):
    from docattn.data.readers import read_splits

    splits = read_splits(SHARED_DATA / "imdb" / "aclImdb.tar.gz")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(splits["train"]))
    pick, rest = order[:2000], order[2000:]
    test = rng.choice(len(splits["test"]), 5000, replace=False)
    tr, te = splits["train"], splits["test"]
    return (
        [tr.texts[i] for i in pick],
        [tr.labels[i] for i in pick],
        [te.texts[i] for i in test],
        [te.labels[i] for i in test],
        [tr.texts[i] for i in rest],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--options", default=",".join(OPTIONS))
    ap.add_argument("--sets", default="bbc,imdb2k")
    args = ap.parse_args()
    import torch

    from docattn.classifier import DocumentClassifier

    torch.set_num_threads(1)
    rows = []
    for set_name in args.sets.split(","):
        for seed in [int(s) for s in args.seeds.split(",")]:
            train_x, train_y, test_x, test_y, unlabelled = {"bbc": bbc, "imdb2k": imdb2k}[set_name](seed)
            with tempfile.TemporaryDirectory() as tmp:
                extra = None
                if unlabelled:
                    extra = Path(tmp) / "unlabelled.txt"
                    extra.write_text("\n".join(t.replace("\n", " ") for t in unlabelled) + "\n", encoding="utf-8")
                for name in args.options.split(","):
                    options = dict(OPTIONS[name])
                    if options.get("word2vec_text") == "UNLABELLED":
                        if extra is None:
                            continue
                        options["word2vec_text"] = str(extra)
                    t0 = time.perf_counter()
                    clf = DocumentClassifier("han", seed=seed, progress=False, guardrail=False, **options)
                    clf.fit(train_x, train_y)
                    acc = clf.score(test_x, test_y)
                    row = {
                        "set": set_name,
                        "seed": seed,
                        "vectors": name,
                        "test_accuracy": acc,
                        "valid_accuracy": clf.results["best"]["val_acc"],
                        "epochs_planned": clf.train_config.max_epochs,
                        "best_epoch": clf.results["best"]["epoch"],
                        "word2vec_epochs": clf.train_config.word2vec_epochs,
                        "seconds": round(time.perf_counter() - t0, 1),
                    }
                    print(row, flush=True)
                    rows.append(row)
                    _write(rows)  # after every run: a run of hours keeps what it finished if stopped


def _write(rows: list[dict]) -> None:
    summary = {}
    for r in rows:
        summary.setdefault(f"{r['set']} {r['vectors']}", []).append(r["test_accuracy"])
    mean = {k: float(np.mean(v)) for k, v in summary.items()}
    write_result("small_data_vectors", {"rows": rows, "mean_test_accuracy": mean}, quiet=True)


if __name__ == "__main__":
    main()
