"""Torch threads on a loaded machine (issue 36, item 7): HAN training steps with 1 or 2 threads, OpenMP's
default waiting or passive waiting, and with docattn's own choice (``docattn/threads.py``), while 0, 1 or 2
other processes keep cores busy.

    python benchmarks/threads.py [--seconds 20] [--loads 0,1,2] [--name threads]

Each configuration runs in a fresh child (OpenMP reads its environment once, at start): HAN (its default size)
trains on random 64-document batches of 15 sentences of 20 words for ``--seconds``, after two warm-up steps,
and reports steps/s. The load is that many pure-Python busy loops, bounded by the same time, started just before
the child and ended after it. Nothing is read from disk. Writes benchmarks/results/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

BUSY = "import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass\n"


def child(seconds: float) -> None:
    if os.environ.get("THREADS_DOCATTN_FIRST") == "1":
        import docattn  # noqa: F401  (its thread defaults, set before torch loads OpenMP)
    policy = os.environ.get("OMP_WAIT_POLICY") or "default (active)"  # as OpenMP sees it when torch loads it
    import torch

    from docattn.data.batching import hierarchical_batch
    from docattn.data.encoding import EncodedCorpus
    from docattn.models import create_model

    rng = torch.Generator().manual_seed(0)
    docs, sentences, words = 64, 15, 20
    tokens = torch.randint(2, 20_000, (docs * sentences * words,), generator=rng).int().numpy()
    sentence_offsets = torch.arange(0, docs * sentences * words + 1, words).numpy()
    document_offsets = torch.arange(0, docs * sentences + 1, sentences).numpy()
    labels = torch.randint(0, 2, (docs,), generator=rng).numpy()
    corpus = EncodedCorpus(tokens, sentence_offsets, document_offsets, labels)
    batch = hierarchical_batch(corpus, range(docs))
    model = create_model("han", vocab_size=20_000, num_classes=2)
    opt = torch.optim.Adam(model.parameters(), 1e-3)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(batch).logits, batch.labels)
        loss.backward()
        opt.step()

    step(), step()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        steps += 1
    print(
        json.dumps(
            {
                "steps_per_s": steps / (time.perf_counter() - start),
                "threads": torch.get_num_threads(),
                "omp_wait_policy": policy,
            }
        )
    )


def run(threads: int | None, policy: str | None, load: int, seconds: float) -> dict:
    """One configuration; ``threads`` None: docattn's own choice (imported before torch, nothing set)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    if threads is None:
        env["THREADS_DOCATTN_FIRST"] = "1"
    else:
        env["OMP_NUM_THREADS"] = str(threads)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    busy = [subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=seconds + 60)]) for _ in range(load)]
    try:
        res = subprocess.run(
            [sys.executable, __file__, "--child", "--seconds", str(seconds)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=seconds + 300,
        )
    finally:
        for p in busy:
            p.kill()
            p.wait()
    out = json.loads(res.stdout.strip().splitlines()[-1])
    chosen = "docattn" if threads is None else threads
    return {
        "configuration": chosen,
        "wait_policy": policy or ("docattn" if threads is None else "default"),
        "busy_processes": load,
        **out,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--loads", default="0,1,2")
    ap.add_argument("--name", default="threads")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.seconds)
    rows = []
    for load in (int(x) for x in args.loads.split(",")):
        for threads, policy in ((1, None), (2, None), (2, "PASSIVE"), (1, "PASSIVE"), (None, None)):
            row = run(threads, policy, load, args.seconds)
            row["load_average"] = os.getloadavg()[0]
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_result(args.name, {"seconds_per_configuration": args.seconds, "rows": rows})


if __name__ == "__main__":
    main()
