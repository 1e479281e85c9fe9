"""ONNX parity on IMDB: each attention family trained briefly on IMDB reviews, exported, and compared with PyTorch.

    python benchmarks/onnx_parity.py [--models han,hpan,hsan,hcan,sanet,cspan] [--train-docs 1000]
                                     [--test-docs 200] [--name onnx_parity_imdb]

For each model: ``docattn train`` at its defaults for one epoch (``--set min_steps=0``: parity needs trained
weights, not a good model) on a seeded draw of IMDB training reviews, ``docattn export --format onnx``, then
``OnnxPredictor.predict_proba`` against ``DocumentClassifier.predict_proba`` on a seeded draw of IMDB test
reviews: the largest absolute difference in any probability, and whether every predicted label agrees.
Needs ../shared/data/imdb/aclImdb.tar.gz. Results go to benchmarks/results/NAME.json with the machine and the
command.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, write_result  # noqa: E402

PARITY = "han,hpan,hsan,hcan,sanet,cspan"


def docattn(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "docattn", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"docattn {' '.join(args)} failed:\n{done.stderr[-3000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=PARITY)
    ap.add_argument("--train-docs", type=int, default=1000)
    ap.add_argument("--test-docs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="onnx_parity_imdb")
    args = ap.parse_args()
    archive = SHARED_DATA / "imdb" / "aclImdb.tar.gz"
    if not archive.exists():
        raise SystemExit(f"{archive} is missing: this benchmark reads IMDB from ../shared/data")
    from docattn.classifier import DocumentClassifier
    from docattn.data.readers import read_splits
    from docattn.onnx import OnnxPredictor

    splits = read_splits(archive)
    rng = random.Random(args.seed)
    train = rng.sample(list(zip(splits["train"].texts, splits["train"].labels)), args.train_docs)
    test = [t for t, _ in rng.sample(list(zip(splits["test"].texts, splits["test"].labels)), args.test_docs)]
    rows = {}
    with tempfile.TemporaryDirectory(prefix="onnx-parity-") as tmp:
        data = Path(tmp) / "train.jsonl"
        data.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in train), encoding="utf-8")
        for model in args.models.split(","):
            run, onnx = Path(tmp) / model, Path(tmp) / f"{model}-onnx"
            t0 = time.perf_counter()
            docattn("train", "--train", str(data), "--model", model, "--epochs", "1", "--out", str(run),
                    "--set", "min_steps=0", "--set", "guardrail=false", "--seed", str(args.seed))  # fmt: skip
            docattn("export", str(run), "--format", "onnx", "--out", str(onnx))
            want = DocumentClassifier.load(run).predict_proba(test)
            got = OnnxPredictor(onnx).predict_proba(test)
            rows[model] = {
                "max_abs_probability_difference": float(np.abs(got - want).max()),
                "labels_agree": int((got.argmax(1) == want.argmax(1)).sum()),
                "documents": len(test),
                "seconds": round(time.perf_counter() - t0, 1),
            }
            print(model, rows[model], flush=True)
    write_result(
        args.name,
        {
            "data": str(archive),
            "train_docs": args.train_docs,
            "test_docs": args.test_docs,
            "seed": args.seed,
            "models": rows,
        },  # fmt: skip
    )


if __name__ == "__main__":
    main()
