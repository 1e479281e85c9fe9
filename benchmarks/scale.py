"""Preparation at scale (issue 36): time, peak memory, cache size and reload time from 25k to 1M documents,
and HAN's training speed and memory over the cache.

    python benchmarks/scale.py [--sizes 25000,100000,250000] [--workers 0,1,2] [--chunk 10000] [--train-steps 0]
                               [--name imdb]
Builds CSV corpora of N documents from IMDB's 50,000 labelled reviews: document i is review i mod 50,000
with its sentences in a seeded shuffled order and "copy k" (k = i // 50,000) appended, so no two documents
are the same. Each preparation runs in a child process with a fresh cache (its peak RSS is the child's own,
workers' separately); the reload is a second ``prepare_paths`` in another child. The machine is shared:
the load average before and after each run is recorded beside the timings, and CPU seconds beside wall time.
With ``--train-steps N`` a third child trains HAN (its defaults, random starting vectors: word2vec over the
corpus is measured elsewhere) for N optimizer steps over the first preparation's memory-mapped cache, one
thread, and records training docs/s, the final validation's time and the child's peak RSS.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, SHARED_DATA, write_result  # noqa: E402

CHILD = """
import json, resource, sys, time
from docattn.data.prepare import DataSettings, prepare_paths
path, cache, chunk, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
t0, c0 = time.perf_counter(), time.process_time()
data = prepare_paths(path, settings=DataSettings(prepare_chunk=chunk, prepare_workers=workers), cache_dir=cache)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({
    "seconds": round(time.perf_counter() - t0, 2),
    "cpu_seconds": round(time.process_time() - c0 + kids.ru_utime + kids.ru_stime, 2),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    "worker_peak_rss_mb": round(kids.ru_maxrss / 1024, 1),
    "reused": data.info["reused"],
    "splits": data.info["documents"],
    "tokens": sum(len(s.tokens) for s in data.splits.values()),
    "vocabulary": len(data.vocab),
}))
"""

TRAIN_CHILD = """
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
from docattn.classifier import DocumentClassifier
from docattn.data.prepare import DataSettings, prepare_paths
path, cache, chunk, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = prepare_paths(path, settings=DataSettings(prepare_chunk=chunk), cache_dir=cache)
assert data.info["reused"], "the training child must find the cache the preparation wrote"
t0 = time.perf_counter()
clf = DocumentClassifier("han", max_steps=steps, embeddings="random", guardrail=False, progress=False)
clf.fit_prepared(data)
r = clf.results
print(json.dumps({
    "train_steps": r["history"][-1]["step"],
    "train_docs_per_s": round(r["train_docs_per_s"], 1),
    "train_seconds": round(r["train_seconds"], 1),
    "fit_seconds": round(time.perf_counter() - t0, 1),
    "validation_documents": data.info["documents"]["valid"],
    "train_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
}))
"""


def imdb_reviews(archive: str) -> list[tuple[str, str]]:
    """The 50,000 labelled reviews (train and test), in archive order."""
    out = []
    with tarfile.open(archive) as tar:
        for member in tar:
            parts = member.name.split("/")
            if member.isfile() and parts[1:2] in (["train"], ["test"]) and parts[2:3] in (["pos"], ["neg"]):
                out.append((tar.extractfile(member).read().decode("utf-8"), parts[2]))
    return out


def write_corpus(reviews: list[tuple[str, str]], n: int, path: Path) -> None:
    """N varied documents as a text,label CSV (see the module docstring)."""
    rng = random.Random(0)
    end = re.compile(r"(?<=[.!?])\s+")
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        for i in range(n):
            text, label = reviews[i % len(reviews)]
            sentences = end.split(text)
            rng.shuffle(sentences)
            writer.writerow([" ".join(sentences) + f" copy {i // len(reviews)}", label])


def run_child(args: list[str], code: str = CHILD) -> dict:
    load = os.getloadavg()[0]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"child failed:\n{done.stderr[-3000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "load_before": load, "load_after": os.getloadavg()[0]}


def measure(path: Path, chunk: int, workers: int, work: Path, train_steps: int = 0) -> dict:
    cache = work / f"cache-{workers}"
    shutil.rmtree(cache, ignore_errors=True)
    first = run_child([str(path), str(cache), str(chunk), str(workers)])
    reload = run_child([str(path), str(cache), str(chunk), str(workers)])
    size = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    training = {}
    if train_steps:
        trained = run_child([str(path), str(cache), str(chunk), str(train_steps)], TRAIN_CHILD)
        training = {k: v for k, v in trained.items() if not k.startswith("load")}
        training["train_load"] = trained["load_before"]
    shutil.rmtree(cache, ignore_errors=True)
    record = {**first, "cache_mb": round(size / 2**20, 1), "reload_seconds": reload["seconds"], "workers": workers}
    return {**record, **training}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(SHARED_DATA / "imdb" / "aclImdb.tar.gz"))
    ap.add_argument("--sizes", default="25000,100000,250000")
    ap.add_argument("--workers", default="0,1,2", help="worker processes per run (0: the preparing process alone)")
    ap.add_argument("--chunk", type=int, default=10_000)
    ap.add_argument("--train-steps", type=int, default=0, help="also train HAN this many steps (first workers only)")
    ap.add_argument("--name", default="imdb")
    ap.add_argument("--work", default=None, help="folder for the corpora and caches (default: a temporary one)")
    args = ap.parse_args()
    reviews = imdb_reviews(args.data)
    work = Path(args.work or tempfile.mkdtemp(prefix="docattn-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    runs = []
    for n in (int(x) for x in args.sizes.split(",")):
        path = work / f"imdb_{n}.csv"
        write_corpus(reviews, n, path)
        text_mb = round(path.stat().st_size / 2**20, 1)
        for i, workers in enumerate(int(x) for x in args.workers.split(",")):
            steps = args.train_steps if i == 0 else 0
            runs.append({"documents": n, "csv_mb": text_mb, **measure(path, args.chunk, workers, work, steps)})
            print(json.dumps(runs[-1]), flush=True)
        path.unlink()
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    (RESULTS / "scale").mkdir(parents=True, exist_ok=True)
    record = {"chunk": args.chunk, "train_steps": args.train_steps, "cpu_count": os.cpu_count(), "runs": runs}
    write_result(f"scale/{args.name}", record)


if __name__ == "__main__":
    main()
