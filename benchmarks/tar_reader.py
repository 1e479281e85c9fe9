"""Whether docattn's own tar parser (data/readers/plain_tar.py) is worth owning: IMDB's archive (50k small
members) read through the readers with it and with the tarfile fallback it hands unusual archives to.

    OMP_NUM_THREADS=1 python benchmarks/tar_reader.py [--data ../shared/data/imdb/aclImdb.tar.gz] [--repeats 3]

Times the archive read (``_archive_tree``: the part the parser changes) and, once each, all of ``read_splits``.
Writes benchmarks/results/tar_reader/result.json (result.2.json ... where an earlier run's file is there).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, write_result  # noqa: E402


def _not_plain(_path):
    from docattn.data.readers.plain_tar import NotPlainTar

    raise NotPlainTar
    yield


def _timed(parser: str, read) -> tuple[float, object]:
    from docattn.data.readers import plain_tar

    fast = plain_tar.members
    plain_tar.members = fast if parser == "plain_tar" else _not_plain
    try:
        start = time.perf_counter()
        result = read()
        return time.perf_counter() - start, result
    finally:
        plain_tar.members = fast


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(SHARED_DATA / "imdb" / "aclImdb.tar.gz"))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from docattn.data.readers import _archive_tree, read_splits

    path = Path(args.data)
    parsers = ("plain_tar", "tarfile")
    archive_s: dict[str, list[float]] = {p: [] for p in parsers}
    members = {}
    for _ in range(args.repeats):  # interleaved, so load on the machine falls on both alike
        for parser in parsers:
            seconds, tree = _timed(parser, lambda: _archive_tree(path))
            archive_s[parser].append(round(seconds, 3))
            members[parser] = len(tree.paths)
    read_splits_s = {p: round(_timed(p, lambda: read_splits(path))[0], 3) for p in parsers}
    best = {p: min(s) for p, s in archive_s.items()}
    write_result(
        "tar_reader/result",
        {
            "data": str(path),
            "members": members,
            "archive_seconds": archive_s,
            "archive_seconds_best": best,
            "archive_seconds_median": {p: statistics.median(s) for p, s in archive_s.items()},
            "read_splits_seconds": read_splits_s,
            "tarfile_over_plain_tar": round(best["tarfile"] / best["plain_tar"], 2),
        },
    )


if __name__ == "__main__":
    main()
