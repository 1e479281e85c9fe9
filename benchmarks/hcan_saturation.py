"""Does HCAN's sentence-level self-attention saturate in the first optimizer steps? One row per learning rate.

    python benchmarks/hcan_saturation.py [--model hcan] [--d 512] [--steps 40] [--every 10] LR[,WARMUP] ...
e.g. `python benchmarks/hcan_saturation.py 1e-3 1e-3,400 2e-4 --d 512`.
Trains --model (any HCAN variant; embedding and d_model --d, 8 heads) from the same start with Adam (betas 0.9, 0.99,
clipping 5) on batches of 32 documents of the package's synthetic corpus, and every --every steps
measures, on 64 fixed documents, self-attention A (hierarchical variants: the sentence level's;
flat ones: the token level's): its mean entropy over real rows as a
share of the most it could be (1: uniform, 0: one-hot) and the share of weights that are exactly 0
(softmax underflow: no gradient flows through those scores). Why: at d 512 with Adam at 1e-3 the
sentence vectors' Q and K grow so fast that this softmax saturates within ten steps and the model
never leaves chance (paper-size GPU seed 0; IMDB seed 0 on the CPU). Writes
results/hcan_saturation_d{D}.json (results/{MODEL}_saturation_d{D}.json for another model).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402


def saturation(model, batch) -> tuple[float, float]:
    """(normalised entropy, share of exact zeros) of self-attention A over real rows, as `docattn
    attention-stats` reports them: the sentence level's for hierarchical models, the token level's for flat ones."""
    import torch

    from docattn.explain.stats import attention_summary

    model.eval()
    with torch.no_grad():
        att = model(batch, return_attention=True).attentions
    model.train()
    key = "sentence_self_a" if "sentence_self_a" in att else "self_a"
    stats = attention_summary(key, att[key], batch, bandwidths=())
    return stats["normalized_entropy"], stats["zero_share"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rates", nargs="+", help="LR or LR,WARMUP_STEPS")
    ap.add_argument("--model", default="hcan")
    ap.add_argument("--d", type=int, default=512, help="embedding_dim = d_model (paper: 512)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    import numpy as np
    import torch

    from docattn.data.prepare import prepare
    from docattn.data.synthetic import make_splits
    from docattn.models import create_model
    from docattn.training.inference import make_batch

    torch.set_num_threads(args.threads)
    data = prepare(make_splits(n_train=1000, n_test=100)["train"])
    train = data.splits["train"]
    rows = []
    for spec in args.rates:
        lr, _, warm = spec.partition(",")
        lr, warmup = float(lr), int(warm or 0)
        torch.manual_seed(0)
        rng = np.random.default_rng(0)
        model = create_model(
            args.model,
            vocab_size=len(data.vocab),
            num_classes=len(data.labels),
            embedding_dim=args.d,
            d_model=args.d,
            heads=8,
        )
        opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.99))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s, warmup=warmup: min(1.0, (s + 1) / warmup) if warmup else 1.0
        )
        probe = make_batch(train, np.arange(64), model.layout, {})
        start = time.perf_counter()
        trace = [(0, *saturation(model, probe))]
        for step in range(1, args.steps + 1):
            batch = make_batch(train, rng.choice(len(train), 32, replace=False), model.layout, {})
            loss = torch.nn.functional.cross_entropy(model(batch).logits, batch.labels)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            sched.step()
            if step % args.every == 0:
                trace.append((step, *saturation(model, probe)))
        row = {
            "lr": lr,
            "warmup_steps": warmup,
            "seconds": round(time.perf_counter() - start, 1),
            "trace": [{"step": s, "entropy_share": round(h, 4), "zero_share": round(z, 4)} for s, h, z in trace],
        }
        print(f"lr {lr:g} warmup {warmup}: " + "  ".join(f"{s}: {h:.2f}/{z:.2f}" for s, h, z in trace), flush=True)
        rows.append(row)
    write_result(
        f"{args.model}_saturation_d{args.d}",
        {
            "model": args.model,
            "d_model": args.d,
            "heads": 8,
            "batch_size": 32,
            "optimizer": "adam (0.9, 0.99), clip 5",
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
