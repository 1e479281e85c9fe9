"""Training-step and inference time of any registered models on the same real IMDB batches.

    python benchmarks/step_times.py [--data PATH] [--steps 20] [--threads N] MODEL[,KEY=VALUE...] ...
e.g. `python benchmarks/step_times.py han hcan hcan,dropout=0.0 can-two-target sanet cspan`.
Each model gets the same 64-document training batches (hierarchical or flat as the model reads,
flat truncated at 1000 tokens), bf16 autocast on a GPU, float32 on the CPU; two warm-up steps,
then forward + backward + Adam step timed over --steps batches, and eval-mode forward over all.
This isolates the model's own cost from the engine (data loading, validation, logging): the
fairest measure of HCAN's claimed 2x training speed over HAN. Writes results/step_times_{cpu,gpu}.json
(or results/NAME.json with --name NAME).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SHARED_DATA, write_result  # noqa: E402


def parse_spec(spec: str) -> tuple[str, dict]:
    """'hcan,dropout=0.0,heads=4' -> ('hcan', {'dropout': 0.0, 'heads': 4})."""
    name, *pairs = spec.split(",")
    hp = {}
    for pair in pairs:
        key, value = pair.split("=", 1)
        hp[key] = int(value) if value.lstrip("-").isdigit() else float(value)
    return name, hp


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+", help="MODEL[,KEY=VALUE...]")
    ap.add_argument("--data", default=str(SHARED_DATA / "imdb" / "aclImdb.tar.gz"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--profile", action="store_true", help="print torch.profiler's top operators for each model")
    ap.add_argument("--name", default="", help="results/NAME.json (default: step_times_cpu or step_times_gpu)")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    import numpy as np
    import torch

    from docattn.data.batching import flat_batch, hierarchical_batch
    from docattn.data.prepare import DataSettings, prepare_paths
    from docattn.models import create_model, get_spec

    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    data = prepare_paths(args.data, settings=DataSettings(valid_fraction=0.3))
    train = data.splits["train"]
    rng = np.random.default_rng(0)
    docs = [rng.choice(len(train), args.batch_size, replace=False) for _ in range(args.steps + 2)]
    rows = []
    for spec in args.models:
        name, hp = parse_spec(spec)
        layout = get_spec(name).layout
        model = create_model(name, len(data.vocab), 2, **hp).to(dev).train()
        opt = torch.optim.Adam(model.parameters(), 1e-3)
        batches = [
            (hierarchical_batch(train, d) if layout == "hierarchical" else flat_batch(train, d, 1000)).to(dev)
            for d in docs
        ]

        def step(batch, model=model, opt=opt):
            with torch.autocast(dev, torch.bfloat16, enabled=cuda):
                loss = torch.nn.functional.cross_entropy(model(batch).logits.float(), batch.labels)
            opt.zero_grad()
            loss.backward()
            opt.step()

        for b in batches[:2]:
            step(b)
        sync()
        t0 = time.perf_counter()
        for b in batches[2:]:
            step(b)
        sync()
        step_s = (time.perf_counter() - t0) / args.steps
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
                for b in batches[2:5]:
                    step(b)
                sync()
            for key in ("self_cuda_time_total" if cuda else "self_cpu_time_total", "self_cpu_time_total"):
                print(prof.key_averages().table(sort_by=key, row_limit=14, max_name_column_width=60), flush=True)
        model.eval()
        with torch.no_grad(), torch.autocast(dev, torch.bfloat16, enabled=cuda):
            t0 = time.perf_counter()
            for b in batches:
                model(b)
            sync()
            infer_s = (time.perf_counter() - t0) / len(batches)
        row = {
            "model": name,
            "hparams": hp,
            "ms_per_step": round(1000 * step_s, 1),
            "train_docs_per_s": round(args.batch_size / step_s),
            "inference_docs_per_s": round(args.batch_size / infer_s),
        }
        print(row, flush=True)
        rows.append(row)
    write_result(
        args.name or f"step_times_{'gpu' if cuda else 'cpu'}",
        {"batch_size": args.batch_size, "steps": args.steps, "rows": rows},
    )


if __name__ == "__main__":
    main()
