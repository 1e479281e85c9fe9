"""Data pipeline speed on IMDB (50k documents): read, split, tokenize, vocabulary, encode; cached reload; batches.

    python benchmarks/pipeline_speed.py [--data ../shared/data/imdb/aclImdb.tar.gz]
Targets (issue 2): first preparation < 30 s, cached reload < 2 s, a pass of bucketed
hierarchical batches of 64 over the training split < 5 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(SHARED_DATA / "imdb" / "aclImdb.tar.gz"))
    args = ap.parse_args()
    from docattn.data.batching import BucketBatchSampler, bucket_keys, hierarchical_batch
    from docattn.data.prepare import DataSettings, prepare_paths
    from docattn.data.readers import read_splits

    t0 = time.perf_counter()
    read_splits(args.data)
    read_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        data = prepare_paths(args.data, settings=DataSettings(valid_fraction=0.3), cache_dir=cache)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = prepare_paths(args.data, settings=DataSettings(valid_fraction=0.3), cache_dir=cache)
        reload_s = time.perf_counter() - t0
        train = again.splits["train"]
        t0 = time.perf_counter()
        n = 0
        for docs in BucketBatchSampler(bucket_keys(train, "hierarchical"), 64, seed=0):
            n += len(hierarchical_batch(train, docs))
        batch_s = time.perf_counter() - t0
    write_result(
        "pipeline_speed_imdb",
        {
            "documents": {k: len(v) for k, v in data.splits.items()},
            "vocabulary": len(data.vocab),
            "read_only_s": round(read_s, 2),
            "prepare_first_run_s": round(first, 2),
            "prepare_cached_reload_s": round(reload_s, 3),
            "hierarchical_batches_64_full_pass_s": round(batch_s, 3),
            "batched_documents": n,
            "targets": {
                "prepare_first_run_s": 30,
                "prepare_cached_reload_s": 2,
                "hierarchical_batches_64_full_pass_s": 5,
            },
        },
    )


if __name__ == "__main__":
    main()
