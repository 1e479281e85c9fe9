"""HAN training and inference speed on IMDB (17.5k train / 7.5k validation / 25k test).

    python benchmarks/han_speed.py [--model han] [--epochs 1] [--threads N] [--batch-size 64] [--data PATH]
                                   [--set K=V ...] [--parts truncated,untruncated] [--no-word2vec]
Measures, at the paper's sizes (embedding 200, GRU 50, context 100), batch 64:
training documents/s with documents truncated to 15 sentences x 20 words (the public tutorial
implementation's setting), the time of one epoch over untruncated documents, inference
documents/s, and word2vec time. Targets (issue 3): >= 700 docs/s truncated, <= 40 s per
untruncated epoch, >= 3,000 docs/s inference; on a GPU (used when present,
bf16-mixed), one IMDB epoch in <= 3 s. Writes results/speed_MODEL_imdb_{cpu,gpu}.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, write_result  # noqa: E402


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(SHARED_DATA / "imdb" / "aclImdb.tar.gz"))
    ap.add_argument("--model", default="han")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--infer-batch-size", type=int, default=256)
    ap.add_argument(
        "--parts", default="truncated,untruncated", help="which runs: truncated (15x20), untruncated, or both"
    )
    ap.add_argument(
        "--no-word2vec", action="store_true", help="skip timing word2vec (GPU variants: only the epoch matters)"
    )
    ap.add_argument(
        "--set", action="append", default=[], metavar="K=V", help="a model hyper-parameter, e.g. packed_rnn=true"
    )
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    hparams = {k: json.loads(v) if v[:1] in "0123456789-[{tfn" else v for k, v in (kv.split("=", 1) for kv in args.set)}
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from docattn.classifier import DocumentClassifier
    from docattn.data.embeddings import train_word2vec
    from docattn.data.prepare import DataSettings, prepare_paths
    from docattn.training.inference import predict_logits

    data = prepare_paths(args.data, settings=DataSettings(valid_fraction=0.3))
    w2v_s = None
    if not args.no_word2vec:
        t0 = time.perf_counter()
        train_word2vec(data.splits["train"], data.vocab, dim=200, epochs=5)
        w2v_s = round(time.perf_counter() - t0, 1)
    parts = {
        "truncated": ("truncated_15x20", {"max_sentences": 15, "max_words": 20}),
        "untruncated": ("untruncated", {}),
    }
    rows = {}
    for name, limits in (parts[p] for p in args.parts.split(",")):
        clf = DocumentClassifier(
            args.model,
            max_epochs=args.epochs,
            batch_size=args.batch_size,
            embeddings="random",
            progress=False,
            **limits,
            **hparams,
        )
        clf.fit_prepared(data)
        test = data.splits["test"]
        clf.model.to("cuda" if torch.cuda.is_available() else "cpu")
        predict_logits(clf.model, data.splits["valid"].subset(range(512)), args.infer_batch_size, clf.limits)  # warm-up
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits = predict_logits(clf.model, test, args.infer_batch_size, clf.limits)
        infer_s = time.perf_counter() - t0
        acc = float((logits.argmax(1) == test.labels).mean())
        docs_per_s = clf.results["train_docs_per_s"]
        rows[name] = {
            "train_docs_per_s": round(docs_per_s, 1),
            "epoch_seconds_training_only": round(len(data.splits["train"]) / docs_per_s, 1),
            "epoch_wall_seconds": [round(x, 2) for x in clf.results.get("epoch_seconds", [])],
            "inference_docs_per_s": round(len(test) / infer_s, 1),
            "test_accuracy_after_epochs": round(acc, 4),
            "epochs": args.epochs,
        }
        print(name, rows[name], flush=True)
    where = "gpu" if torch.cuda.is_available() else "cpu"
    suffix = "".join(f"_{k}" for k in hparams)  # a variant never overwrites the default's file
    suffix += f"_b{args.batch_size}" if args.batch_size != 64 else ""
    write_result(
        f"speed_{args.model}{suffix}_imdb_{where}",
        {
            "model": args.model,
            "hparams": hparams,
            "batch_size": args.batch_size,
            "inference_batch_size": args.infer_batch_size,
            "word2vec_200d_5_epochs_s": w2v_s,
            **rows,
            "targets": {"truncated_train_docs_per_s": 700, "untruncated_epoch_s": 40, "inference_docs_per_s": 3000},
            "reference_tutorial_han": {"train_docs_per_s": 350, "inference_docs_per_s": 1350, "epoch_s": 50},
        },
    )


if __name__ == "__main__":
    main()
