"""A small IMDB train/validation pair as CSV (text,label), for short training probes at sizes the CPU runs slowly.

    python benchmarks/imdb_subset.py OUT_DIR [--data PATH] [--train 10000] [--valid 1500] [--seed 0]
Shuffles aclImdb's 25,000 training reviews (Python's random, seeded) and writes the first --train
to OUT_DIR/train.csv and the next --valid to OUT_DIR/valid.csv; the test reviews are never read.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--data", default=str(SHARED_DATA / "imdb" / "aclImdb.tar.gz"))
    ap.add_argument("--train", type=int, default=10000)
    ap.add_argument("--valid", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    docs = []
    with tarfile.open(args.data) as tar:
        for member in tar:  # archive order, then a seeded shuffle: the same subset on every machine
            parts = member.name.split("/")
            if member.isfile() and parts[1:2] == ["train"] and parts[2:3] in (["pos"], ["neg"]):
                docs.append((tar.extractfile(member).read().decode("utf-8"), parts[2]))
    random.seed(args.seed)
    random.shuffle(docs)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, part in (("train.csv", docs[: args.train]), ("valid.csv", docs[args.train : args.train + args.valid])):
        with open(args.out / name, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "label"])
            writer.writerows(part)
        print(f"{args.out / name}: {len(part)} reviews")


if __name__ == "__main__":
    main()
