"""Time reading a pre-trained vector file: docattn's streaming reader against gensim's loader.

    python benchmarks/vectors_speed.py [--words 200000] [--dim 100] [--vocab-share 0.1]

Writes a GloVe-format file of random vectors (a stand-in for glove.6B/840B, which are not on this
machine) to a temporary folder, then loads it for a vocabulary holding ``--vocab-share`` of its
words, as ``--embeddings FILE`` does. docattn keeps only the vocabulary's vectors; gensim parses
every line into a (words x dim) matrix first. Peak memory is each loader's own growth of the
process's resident set (measured in a fresh process per loader).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

_LOAD = """
import json, resource, sys, time
from docattn.data.embeddings import load_vectors
from docattn.data.text import SPECIAL_TOKENS, TextConfig, Vocabulary
path, words, share, which = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
vocab = Vocabulary(SPECIAL_TOKENS + [f"w{i}" for i in range(0, words, round(1 / share))], TextConfig())
if which == "gensim":
    from gensim.models import KeyedVectors
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
if which == "docattn":
    matrix, coverage = load_vectors(path, vocab)
    found = coverage.words_found
else:
    kv = KeyedVectors.load_word2vec_format(path, binary=False, no_header=True)
    found = sum(1 for w in vocab.tokens[3:] if w in kv.key_to_index)
seconds = time.perf_counter() - t0
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"loader": which, "seconds": round(seconds, 2), "words_found": found, "peak_growth_mb": round(grown)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--words", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--vocab-share", type=float, default=0.1)
    args = ap.parse_args()
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vectors.txt"
        rng = np.random.default_rng(0)
        with open(path, "w", encoding="utf-8") as f:
            for start in range(0, args.words, 10_000):
                block = rng.normal(size=(min(10_000, args.words - start), args.dim))
                f.writelines(f"w{start + i} " + " ".join(f"{x:.5f}" for x in row) + "\n" for i, row in enumerate(block))
        runs = []
        for which in ("docattn", "gensim"):
            out = subprocess.run(
                [sys.executable, "-c", _LOAD, str(path), str(args.words), str(args.vocab_share), which],
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(runs[-1], flush=True)
        size_mb = round(path.stat().st_size / 2**20)
    write_result(
        "vectors_speed",
        {"words": args.words, "dim": args.dim, "vocab_share": args.vocab_share, "file_mb": size_mb, "runs": runs},
    )


if __name__ == "__main__":
    main()
