"""Why ``docattn serve`` computes in model processes: a run's predict_proba beside a busy Python thread.

    python benchmarks/serve_gil.py RUN [--batch 32] [--seconds 5] [--name serve_gil]

Three measurements, on synthetic documents, one PyTorch thread: the model alone; the model in one thread
while another runs pure Python (JSON round trips, as an event loop parsing requests does), with both
threads' rates; and the model in a model process (docattn.serve.process) while this process's thread
runs the same Python. Results go to benchmarks/results/NAME.json with the machine and the command.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402


def rate(predict, texts: list[str], batch: int, seconds: float) -> float:
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        start = done % (len(texts) - batch)
        predict(texts[start : start + batch])
        done += batch
    return round(done / (time.perf_counter() - t0), 1)


def beside_busy_python(predict, texts: list[str], batch: int, seconds: float) -> dict:
    """The model's docs/s while a second thread loops over JSON round trips, and that thread's loops/s."""
    stop, loops = threading.Event(), [0]

    def busy() -> None:
        body = {"texts": ["a short document of a few words"] * 4}
        while not stop.is_set():
            json.loads(json.dumps(body))
            loops[0] += 1

    thread = threading.Thread(target=busy)
    t0 = time.perf_counter()
    thread.start()
    docs_per_s = rate(predict, texts, batch, seconds)
    stop.set()
    thread.join()
    return {"model_docs_per_s": docs_per_s, "python_loops_per_s": round(loops[0] / (time.perf_counter() - t0))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--name", default="serve_gil")
    args = ap.parse_args()
    import torch

    from docattn.classifier import DocumentClassifier
    from docattn.data import synthetic
    from docattn.serve.process import ModelProcesses

    torch.set_num_threads(1)
    test = synthetic.make_splits(n_train=8, n_test=500, seed=21)["test"]
    texts = [" ".join(s) for s in test.sentences]
    clf = DocumentClassifier.load(args.run)
    clf.predict_proba(texts[: args.batch])  # warm-up
    alone = rate(clf.predict_proba, texts, args.batch, args.seconds)
    print("model alone", alone, flush=True)
    same_process = beside_busy_python(clf.predict_proba, texts, args.batch, args.seconds)
    print("beside busy Python, one process", same_process, flush=True)
    pool = ModelProcesses({"run": args.run}, count=1, torch_threads=1)
    try:
        pool.predict_proba("run", texts[: args.batch])
        separate = beside_busy_python(lambda docs: pool.predict_proba("run", docs), texts, args.batch, args.seconds)
    finally:
        pool.close()
    print("beside busy Python, model process", separate, flush=True)
    write_result(
        args.name,
        {
            "run": str(args.run),
            "batch": args.batch,
            "seconds": args.seconds,
            "torch_threads": 1,
            "model_alone_docs_per_s": alone,
            "same_process": same_process,
            "model_process": separate,
        },
    )


if __name__ == "__main__":
    main()
