"""Training batches for corpora of millions of documents (issue 36, item 5): the memory and time of the bucket
sampler and of batch building over a memory-mapped cache, at several corpus sizes.

    OMP_NUM_THREADS=1 python benchmarks/sampler_scale.py [--documents 100000,1000000] [--batches 500] [--name NAME]

Each size runs in its own child process on a synthetic encoded corpus written as the cache writes it (``.npy``
files, reloaded memory-mapped): documents of 1 to 30 sentences of 1 to 40 words. The child reports its peak RSS
after loading, after building the sampler (sort keys, costs and the cut batches), after one epoch's batch
indices, and after building ``--batches`` hierarchical batches, as training's data loader does; the peak counts
the cache pages it mapped, which ``anonymous_mib_at_end`` (the process's own memory) leaves out.
Writes benchmarks/results/NAME/result.json (sampler_scale). With PYTHONPATH naming another checkout's src/, it
measures that version (the ``sampler_scale_before`` result: the parent of the commit that added this script).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, result_path  # noqa: E402

LIMITS = {"max_sentences": 1000, "max_words": 1000, "max_batch_words": 150_000, "max_batch_pairs": None}


def _peak_mib() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss it starts afresh at exec, not at the
    parent's peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _write_corpus(folder: Path, documents: int, seed: int = 0) -> int:
    """A synthetic encoded corpus in ``folder``, written a block at a time so the writer stays small."""
    import numpy as np

    from docattn.data.encoding import ARRAYS

    rng = np.random.default_rng(seed)
    sentences = rng.integers(1, 31, documents)
    document_offsets = np.concatenate([[0], np.cumsum(sentences)]).astype(np.int64)
    lengths = rng.integers(1, 41, int(document_offsets[-1]))
    sentence_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n_tokens = int(sentence_offsets[-1])
    tokens = np.lib.format.open_memmap(folder / "tokens.npy", mode="w+", dtype=np.int32, shape=(n_tokens,))
    block = 50_000_000
    for start in range(0, n_tokens, block):
        stop = min(start + block, n_tokens)
        tokens[start:stop] = rng.integers(2, 50_000, stop - start, dtype=np.int32)
    tokens.flush()
    del tokens
    np.save(folder / "sentence_offsets.npy", sentence_offsets)
    np.save(folder / "document_offsets.npy", document_offsets)
    np.save(folder / "labels.npy", rng.integers(0, 5, documents).astype(np.int64))
    assert {p.stem for p in folder.glob("*.npy")} == set(ARRAYS)
    return n_tokens


def _anon_mib() -> float:
    """Resident memory now that is not a mapped file's pages (the memory-mapped cache counts in VmHWM, but the
    kernel can drop those pages and read them again)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(folder: str, batches: int) -> None:
    """Measure one corpus; prints one JSON line."""
    from docattn.data.batching import batch_sampler, hierarchical_batch
    from docattn.data.encoding import EncodedCorpus

    out = {"peak_mib_at_start": round(_peak_mib(), 1)}
    t0 = time.perf_counter()
    corpus = EncodedCorpus.load(folder, mmap=True)
    out["load_seconds"] = round(time.perf_counter() - t0, 3)
    out["peak_mib_after_load"] = round(_peak_mib(), 1)
    t0 = time.perf_counter()
    sampler = batch_sampler(corpus, "hierarchical", LIMITS, 64, shuffle=True, seed=0)
    out["sampler_seconds"] = round(time.perf_counter() - t0, 3)
    out["peak_mib_after_sampler"] = round(_peak_mib(), 1)
    t0 = time.perf_counter()
    order = list(iter(sampler))
    out["epoch_index_seconds"] = round(time.perf_counter() - t0, 3)
    out["batches_per_epoch"] = len(order)
    out["peak_mib_after_epoch_indices"] = round(_peak_mib(), 1)
    t0 = time.perf_counter()
    documents = 0
    for docs in order[:batches]:
        batch = hierarchical_batch(corpus, docs, **LIMITS)
        documents += len(batch)
    seconds = time.perf_counter() - t0
    out["batches_built"] = min(batches, len(order))
    out["batch_build_docs_per_s"] = round(documents / max(seconds, 1e-9))
    out["peak_mib_after_batches"] = round(_peak_mib(), 1)
    out["anonymous_mib_at_end"] = round(_anon_mib(), 1)
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--documents", default="100000,1000000")
    ap.add_argument("--batches", type=int, default=500)
    ap.add_argument("--name", default="sampler_scale", help="results/NAME/result.json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.batches)
    rows = []
    for n in (int(x) for x in args.documents.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            n_tokens = _write_corpus(Path(tmp), n)
            written = time.perf_counter() - t0
            cmd = [sys.executable, __file__, "--child", tmp, "--batches", str(args.batches)]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            row = {"documents": n, "tokens": n_tokens, "write_seconds": round(written, 1)}
            row.update(json.loads(res.stdout.strip().splitlines()[-1]))
            rows.append(row)
            print(json.dumps(row), flush=True)
    doc = {
        "benchmark": "sampler_scale",
        "command": "OMP_NUM_THREADS=1 python " + " ".join(sys.argv),
        "pythonpath": os.environ.get("PYTHONPATH"),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(),
        "limits": LIMITS,
        "rows": rows,
    }
    from docattn.data.files import atomic_write

    atomic_write(result_path(f"{args.name}/result"), json.dumps(doc, indent=1, default=str) + "\n")
    print(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
