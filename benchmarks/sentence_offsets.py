"""Sentence splitting of lowercase text: blingfire's own offsets wrapper against docattn's vectorised mapping.

    python benchmarks/sentence_offsets.py [--documents 5000] [--repeats 3] [--name sentence_offsets_imdb]

Text without capitals is split on a copy with the words after . ! ? capitalised and cut from the original
by character offsets (``data/text.py``). blingfire's ``text_to_sentences_and_offsets`` maps its UTF-8 byte
offsets to characters in a Python loop over every byte; docattn now maps them with one cumsum. Both run
``documents_to_strings`` (what preparation and ``predict`` run) over the same lowercased IMDB test reviews
and must give the same strings. Best of ``--repeats`` per side, one process, results/<name>.json.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, write_result  # noqa: E402


def reviews(n: int) -> list[str]:
    out = []
    with tarfile.open(SHARED_DATA / "imdb" / "aclImdb.tar.gz") as tar:
        for member in tar:
            if "/test/pos/" in member.name or "/test/neg/" in member.name:
                out.append(tar.extractfile(member).read().decode("utf-8").lower())
                if len(out) == n:
                    break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--documents", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--name", default="sentence_offsets_imdb")
    args = ap.parse_args()
    import blingfire

    from docattn.data import text

    texts, config = reviews(args.documents), text.TextConfig()
    vectorised = text._sentence_offsets

    def library(s: str) -> list[tuple[int, int]]:
        return [tuple(o) for o in blingfire.text_to_sentences_and_offsets(s)[1]]

    seconds, outputs = {}, {}
    for side, offsets in (("blingfire_wrapper", library), ("vectorised", vectorised)):
        text._sentence_offsets = offsets
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            outputs[side] = text.documents_to_strings(texts, None, config)
            best = min(best, time.perf_counter() - t0)
        seconds[side] = round(best, 3)
    text._sentence_offsets = vectorised
    if outputs["blingfire_wrapper"] != outputs["vectorised"]:
        raise SystemExit("the two mappings gave different sentences")
    write_result(
        args.name,
        {
            "documents": len(texts),
            "characters": sum(map(len, texts)),
            "seconds": seconds,
            "speedup": round(seconds["blingfire_wrapper"] / seconds["vectorised"], 2),
        },
    )


if __name__ == "__main__":
    main()
