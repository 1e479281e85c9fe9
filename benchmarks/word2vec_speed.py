"""Time word2vec on the IMDB training split: CBOW (the default) against skip-gram, per size and epochs.

    python benchmarks/word2vec_speed.py [--dims 128,200] [--epochs 5,20] [--kinds cbow,skipgram] [--hcan-clean]

Skip-gram lifted HCAN on IMDB by half a point (benchmarks/README.md); this is what it costs
before training starts. Uses every core the process may use (gensim workers, at most 8), as
``docattn train`` does; the machine should be otherwise idle.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(SHARED_DATA / "imdb" / "aclImdb.tar.gz"))
    ap.add_argument("--dims", default="128,200", help="vector sizes, comma-separated")
    ap.add_argument("--epochs", default="5,20", help="word2vec passes, comma-separated")
    ap.add_argument("--kinds", default="cbow,skipgram", help="cbow, skipgram or both, comma-separated")
    ap.add_argument("--hcan-clean", action="store_true", help="HCAN's text cleaning (its vocabulary and sentences)")
    args = ap.parse_args()
    if not set(args.kinds.split(",")) <= {"cbow", "skipgram"}:
        ap.error(f"--kinds takes cbow and/or skipgram, got {args.kinds!r}")
    from docattn.data.embeddings import train_word2vec
    from docattn.data.prepare import DataSettings, prepare_paths
    from docattn.data.text import TextConfig

    data = prepare_paths(
        args.data, settings=DataSettings(text=TextConfig(hcan_clean=args.hcan_clean), valid_fraction=0.3)
    )
    train = data.splits["train"]
    rows = []
    for dim in (int(d) for d in args.dims.split(",")):
        for epochs in (int(e) for e in args.epochs.split(",")):
            for skipgram in (kind == "skipgram" for kind in args.kinds.split(",")):
                t0 = time.perf_counter()
                train_word2vec(train, data.vocab, dim=dim, epochs=epochs, skipgram=skipgram)
                rows.append(
                    {
                        "dim": dim,
                        "epochs": epochs,
                        "kind": "skipgram" if skipgram else "cbow",
                        "seconds": round(time.perf_counter() - t0, 1),
                    }
                )
                print(rows[-1], flush=True)
    write_result(
        "word2vec_speed_imdb" + ("_hcan_clean" if args.hcan_clean else ""),
        {"documents": len(train), "tokens": int(len(train.tokens)), "vocabulary": len(data.vocab), "runs": rows},
    )


if __name__ == "__main__":
    main()
