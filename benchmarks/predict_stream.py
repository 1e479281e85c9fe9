"""``docattn predict`` streamed (chunks read, predicted and written in turn) against the in-memory path it
replaced (the whole input read, then predicted, then written): throughput and peak RSS on IMDB reviews.

    OMP_NUM_THREADS=1 python benchmarks/predict_stream.py [--data ../shared/data/imdb/aclImdb.tar.gz]
        [--sizes 25000,100000] [--chunk-size 4096] [--paths in_memory,streamed]
        [--work /tmp/docattn-predict-stream] [--name result] [--repeats 1] [--model han]

Trains a tiny HAN once (1 epoch on 3,000 training reviews, random embeddings), writes N reviews one per line
(the archive's 50,000 labelled reviews in archive order, repeated past that), then runs each path on each N as
a child process, one thread, interleaved, and reads the child's peak RSS from ``os.wait4``; ``streamed_pipe``
is the streamed path reading the reviews from a pipe (``cat``) on stdin. The in-memory path
is the body of ``predict`` before streaming (commit e9fe2d6), run from this file. Both outputs are compared:
the same ids and predictions, probabilities within a rounding step. Writes
benchmarks/results/predict_stream/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, machine, result_path  # noqa: E402

# predict as it was before streaming (e9fe2d6), less its notes: the whole corpus, then every line
IN_MEMORY = """
import json, sys
from docattn.classifier import DocumentClassifier
from docattn.data.sources import read_evaluation_corpus
clf = DocumentClassifier.load(sys.argv[1])
corpus = read_evaluation_corpus(sys.argv[2], ignore_labels=True)
probs = clf.predict_proba(corpus)
classes = clf.labels.classes
out = sys.stdout
for i, p in enumerate(probs):
    out.write(json.dumps({"id": corpus.ids[i], "prediction": classes[int(p.argmax())],
        "probabilities": {str(c): round(float(x), 6) for c, x in zip(classes, p)}}, ensure_ascii=False) + "\\n")
"""


def _reviews(archive: Path) -> list[tuple[str, str, str]]:
    """(text, label, split) of every labelled review, in archive order, each on one line."""
    docs = []
    with tarfile.open(archive) as tar:
        for member in tar:
            parts = member.name.split("/")
            if member.isfile() and parts[2:3] in (["pos"], ["neg"]) and parts[1:2] in (["train"], ["test"]):
                text = tar.extractfile(member).read().decode("utf-8")
                docs.append((" ".join(text.split()), parts[2], parts[1]))
    return docs


def _train(reviews: list[tuple[str, str, str]], run: Path, model: str) -> None:
    import torch

    from docattn.classifier import DocumentClassifier

    torch.set_num_threads(1)
    train = [(text, label) for text, label, split in reviews if split == "train"]
    random.Random(0).shuffle(train)
    texts, labels = zip(*train[:3000])
    options = dict(max_epochs=1, embeddings="random", embedding_dim=32, hidden_size=16, context_dim=16, progress=False)
    DocumentClassifier(model, **(options if model == "han" else {})).fit(list(texts), list(labels), run_dir=run)


def _child(path: str, run: Path, data: Path, out: Path, chunk_size: int) -> dict:
    """One ``predict`` in a child process: wall seconds, peak RSS (MiB) and exit status."""
    if path == "in_memory":
        command = [sys.executable, "-c", IN_MEMORY, str(run), str(data)]
    else:  # streamed_pipe: the reviews through a pipe (cat), read as stdin is, pausing writer and all
        source = "-" if path == "streamed_pipe" else str(data)
        command = [sys.executable, "-m", "docattn.cli", "predict", str(run), source, "--chunk-size", str(chunk_size)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    start = time.perf_counter()
    with open(out, "wb") as stdout:
        cat = subprocess.Popen(["cat", str(data)], stdout=subprocess.PIPE) if path == "streamed_pipe" else None
        stdin = cat.stdout if cat else subprocess.DEVNULL
        child = subprocess.Popen(command, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, env=env)
        if cat:
            cat.stdout.close()  # the child holds the pipe now
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the largest of all children
        if cat:
            cat.wait()
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    error = child.stderr.read().decode()[-2000:]
    child.stderr.close()
    return {
        "seconds": round(seconds, 2),
        "peak_rss_mib": round(usage.ru_maxrss / 1024),
        "exit": child.returncode,
        **({"stderr": error} if child.returncode else {}),
    }


def _compare(a: Path, b: Path) -> dict:
    """Whether two predict outputs agree: ids and predictions, and the largest probability difference."""
    lines, same, worst = 0, True, 0.0
    with open(a, encoding="utf-8") as fa, open(b, encoding="utf-8") as fb:
        for la, lb in zip(fa, fb, strict=True):
            x, y = json.loads(la), json.loads(lb)
            same = same and (x["id"], x["prediction"]) == (y["id"], y["prediction"])
            worst = max(worst, *(abs(x["probabilities"][k] - y["probabilities"][k]) for k in x["probabilities"]))
            lines += 1
    return {"lines": lines, "same_ids_and_predictions": same, "max_probability_difference": worst}


def _size(n: int, args, reviews: list, run: Path) -> dict:
    """Every path on ``n`` reviews, ``args.repeats`` times interleaved (load on the machine falls on all alike)."""
    data = args.work / f"reviews_{n}.txt"
    with open(data, "w", encoding="utf-8") as f:
        f.writelines(reviews[i % len(reviews)][0] + "\n" for i in range(n))
    row: dict = {"documents": n, "megabytes": round(data.stat().st_size / 2**20, 1)}
    paths = args.paths.split(",")
    runs: dict[str, list[dict]] = {path: [] for path in paths}
    for _ in range(args.repeats):
        for path in paths:
            runs[path].append(_child(path, run, data, args.work / f"{path}_{n}.jsonl", args.chunk_size))
            print(json.dumps({"documents": n, path: runs[path][-1]}), flush=True)
    for path, measured in runs.items():
        seconds = [m["seconds"] for m in measured]
        row[path] = {
            "seconds": seconds,
            "peak_rss_mib": max(m["peak_rss_mib"] for m in measured),
            "exit": max(m["exit"] for m in measured),
            "docs_per_s": round(n / statistics.median(seconds)),
            "stderr": [m["stderr"] for m in measured if "stderr" in m],
        }
    whole = args.work / f"in_memory_{n}.jsonl"
    if "in_memory" in row and row["in_memory"]["exit"] == 0:
        for path in (p for p in paths if p != "in_memory" and row[p]["exit"] == 0):
            row[f"{path}_agreement"] = _compare(whole, args.work / f"{path}_{n}.jsonl")
            row[f"{path}_over_in_memory_throughput"] = round(
                row[path]["docs_per_s"] / row["in_memory"]["docs_per_s"], 3
            )
    data.unlink()
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(SHARED_DATA / "imdb" / "aclImdb.tar.gz"))
    ap.add_argument("--sizes", default="25000,100000")
    ap.add_argument("--chunk-size", type=int, default=4096)
    ap.add_argument("--paths", default="in_memory,streamed")
    ap.add_argument("--work", type=Path, default=Path("/tmp/docattn-predict-stream"))
    ap.add_argument("--name", default="result", help="results/predict_stream/NAME.json")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each path, interleaved; the median counts")
    ap.add_argument("--model", default="han", help="han, or a cheap one (nb) to time the reading at 1M documents")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    reviews = _reviews(Path(args.data))
    run = args.work / ("run" if args.model == "han" else f"run_{args.model}")
    if not (run / "model.safetensors").is_file():
        _train(reviews, run, args.model)
    results = [_size(n, args, reviews, run) for n in (int(s) for s in args.sizes.split(","))]
    doc = {
        "benchmark": "predict_stream",
        "command": "OMP_NUM_THREADS=1 python " + " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(),
        "model": f"{args.model}, on 3,000 IMDB training reviews"
        + (" for 1 epoch, random embeddings, embedding 32, hidden 16, context 16" if args.model == "han" else ""),
        "chunk_size": args.chunk_size,
        "repeats": args.repeats,
        "results": results,
    }
    from docattn.data.files import atomic_write

    atomic_write(result_path(f"predict_stream/{args.name}"), json.dumps(doc, indent=1, default=str) + "\n")
    print(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
