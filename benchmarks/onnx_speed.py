"""Inference speed of an exported run: onnxruntime (``OnnxPredictor``) against PyTorch (``DocumentClassifier``).

    python benchmarks/onnx_speed.py RUN [--documents 2000] [--threads 2] [--repeats 3]

Both read the same synthetic documents (or --data PATH, any format docattn reads) after one warm-up pass;
the best of ``--repeats`` timings counts. Tokenizing and encoding are inside both timings, as a caller
pays them. Results go to benchmarks/results/onnx_speed.json with the machine and the command.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402


def best_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: first-call allocations and kernel choices
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--documents", type=int, default=2000)
    ap.add_argument("--data", default=None, help="documents to read instead of the synthetic ones")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads for both runtimes (more on busy shared cores slows torch)",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=None, help="documents a call (default: each runtime's own)")
    ap.add_argument("--name", default="onnx_speed")
    args = ap.parse_args()

    import torch

    from docattn.classifier import DocumentClassifier
    from docattn.export import export_onnx
    from docattn.onnx import OnnxPredictor

    if args.data:
        from docattn.data.sources import read_evaluation_corpus

        texts = read_evaluation_corpus(args.data, None, None, None, None).texts[: args.documents]
    else:
        from docattn.data import synthetic

        texts = [
            " ".join(s) for s in synthetic.make_splits(n_train=8, n_test=args.documents, seed=31)["test"].sentences
        ]
    torch.set_num_threads(args.threads)
    clf = DocumentClassifier.load(args.run)
    with tempfile.TemporaryDirectory(prefix="onnx-speed-") as tmp:
        t0 = time.perf_counter()
        export_onnx(args.run, Path(tmp) / "onnx")
        export_s = time.perf_counter() - t0
        predictor = OnnxPredictor(Path(tmp) / "onnx", threads=args.threads)
        sized = {} if args.batch_size is None else {"batch_size": args.batch_size}
        onnx_s = best_seconds(lambda: predictor.predict_proba(texts, **sized), args.repeats)
        torch_s = best_seconds(lambda: clf.predict_proba(texts, **sized), args.repeats)
        diff = float(np.abs(predictor.predict_proba(texts, **sized) - clf.predict_proba(texts)).max())
    n = len(texts)
    write_result(
        args.name,
        {
            "run": str(args.run),
            "model": clf.model_name,
            "documents": n,
            "threads": args.threads,
            "batch_size": args.batch_size,
            "export_seconds": round(export_s, 2),
            "onnxruntime_docs_per_s": round(n / onnx_s, 1),
            "pytorch_docs_per_s": round(n / torch_s, 1),
            "speedup": round(torch_s / onnx_s, 2),
            "max_abs_probability_difference": diff,
        },
    )


if __name__ == "__main__":
    main()
