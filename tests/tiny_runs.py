"""Tiny trained runs for the deployment tests (serve, export, card): seconds on two cores."""

from __future__ import annotations

import warnings
from pathlib import Path

TINY = dict(
    max_epochs=1,
    embeddings="random",
    progress=False,
    min_count=2,
    embedding_dim=16,
    hidden_size=8,
    context_dim=8,
    d_model=16,
    heads=2,
    queries=4,
    seed=0,
)

# HAN's tiny options (without the other families' sizes) for tests that fit through the Python API, without
# the tf-idf guardrail
TINY_HAN = {**{k: v for k, v in TINY.items() if k not in ("d_model", "heads", "queries", "seed")}, "guardrail": False}


def train_tiny_run(model: str, out: Path, n_train: int = 240, n_test: int = 60) -> Path:
    """Train ``model`` for one epoch on the embedded synthetic corpus into ``out`` (a run folder)."""
    import torch

    from docattn.classifier import DocumentClassifier
    from docattn.data import synthetic
    from docattn.models import create_model

    splits = synthetic.make_splits(n_train=n_train, n_test=n_test, seed=5)
    known = set(create_model(model, vocab_size=8, num_classes=2).hparams())
    options = {
        k: v
        for k, v in TINY.items()
        if k in known or k not in ("embedding_dim", "hidden_size", "context_dim", "d_model", "heads", "queries")
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # shared cores: tiny models gain nothing from more threads
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the guardrail's warning: one epoch on 240 documents trails tf-idf
            DocumentClassifier(model, **options).fit(splits["train"].sentences, splits["train"].labels, run_dir=out)
    finally:
        torch.set_num_threads(threads)
    return Path(out)
