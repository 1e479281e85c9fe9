"""Probe: `docattn benchmark` with the packaged table's columns of the embedding kept fixed (word2vec's trained).

    python benchmarks/fixed_table_probe.py benchmark --data ... --models han ...

A gradient hook zeroes the table's columns of the embedding's gradient, so Adam never moves them; at exit it
prints how far each part of the embedding moved from its start (the table's must be 0).
"""

import atexit
import sys

import docattn.training.trainer as trainer
from docattn.data.embeddings import PACKAGED_DIMS, packaged_beside

original = trainer.init_embeddings
started = []


def fixed_table(model, data, cfg):
    info = original(model, data, cfg)
    table = packaged_beside(cfg.embeddings)
    if table:
        weight = model.embedding.weight
        own = weight.shape[1] - PACKAGED_DIMS[table]

        def hook(grad):
            grad = grad.clone()
            grad[:, own:] = 0
            return grad

        weight.register_hook(hook)
        started.append((weight, weight.detach().clone(), own))
    return info


@atexit.register
def report():
    for weight, start, own in started:
        moved = (weight.detach() - start).abs()
        own_moved, table_moved = moved[:, :own].max(), moved[:, own:].max()
        print(f"fixed_table_probe: word2vec moved up to {own_moved:.4f}, the table {table_moved:.6f}")


trainer.init_embeddings = fixed_table
from docattn.cli import main  # noqa: E402

sys.argv = ["docattn", *sys.argv[1:]]
main()
