"""Length-sorted groups: a batch of sentences encoded group by group, each padded only to its own longest row.

Sentences of a batch vary a lot in length. HAN's recurrence pays per step and per padded position, HCAN's
self-attention per W^2 pair, so on a CPU both encode their words in groups of similar length
(``length_groups`` prices the cuts) and put the rows back in batch order (``LengthGroups``). Outputs do
not depend on padding, so the groups change the speed only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F


def length_groups(
    lengths: torch.Tensor, groups: int = 0, step_cost: float = 256.0, quadratic: float = 0.0
) -> list[torch.Tensor]:
    """Row indices sorted by length and cut into groups, each to be padded to its own longest row.

    A recurrence pays per step and per padded position, so ``groups=0`` picks the cuts that
    minimise ``step_cost * groups + sum of padded row costs`` exactly (dynamic programming over
    the distinct lengths), a row padded to width W costing ``W + quadratic * W**2`` (self-attention
    pays for its W x W scores); ``groups=n`` cuts n equal-sized groups instead.
    """
    order = torch.argsort(lengths)
    if groups > 0 or len(order) < 2:
        return [rows for rows in torch.tensor_split(order, max(groups, 1)) if len(rows)]
    values, counts = np.unique(lengths.cpu().numpy(), return_counts=True)
    rows_upto = np.concatenate([[0], np.cumsum(counts)])  # rows no longer than values[j - 1]
    best, cut = np.zeros(len(values) + 1), np.zeros(len(values) + 1, dtype=np.int64)
    for j in range(1, len(values) + 1):  # the last group holds lengths values[i:j]
        width = values[j - 1] * (1.0 + quadratic * values[j - 1])  # cost of one row padded to values[j - 1]
        costs = best[:j] + step_cost + width * (rows_upto[j] - rows_upto[:j])
        cut[j] = np.argmin(costs)
        best[j] = costs[cut[j]]
    ends, j = [], len(values)
    while j > 0:
        ends.append(int(rows_upto[j]))
        j = cut[j]
    sizes = np.diff([0, *reversed(ends)]).tolist()
    return list(torch.split(order, sizes))


class LengthGroups:
    """A batch's rows (S, W) cut into length-sorted groups, and the way back to batch order.

    ``rows[g]`` are group g's row indices (on the batch's device), ``widths[g]`` its longest row
    (at least ``min_width``), ``masks[g]`` its mask (n, w). Embed the groups' words with ``embed`` (or
    look them up per distinct word, ``distinct_words``), then encode them with ``run``.
    """

    def __init__(self, mask: torch.Tensor, groups: int, step_cost: float, quadratic: float = 0.0, min_width: int = 0):
        lengths = mask.sum(1).cpu()  # on a GPU the one host sync: groups and widths are sized here
        chunks = length_groups(lengths, min(groups, mask.shape[0]), step_cost, quadratic)
        self.widths = [max(int(lengths[rows].max()), min_width) for rows in chunks]
        self.order = torch.cat(chunks).to(mask.device)  # (S,): the rows, group after group
        self.rows = torch.split(self.order, [len(rows) for rows in chunks])
        self.width = mask.shape[1]  # W: group outputs are padded back to it
        self.masks = self.cut(mask)  # [(n, w)]

    def cut(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Each group's rows of ``x`` (S, W, ...), cut to the group's width: [(n, w, ...)]."""
        return [x[rows, :w] for rows, w in zip(self.rows, self.widths)]

    def embed(self, embed: Callable[[torch.Tensor], torch.Tensor], words: torch.Tensor) -> list[torch.Tensor]:
        """``embed`` of every group's word ids (S, W) in one flat lookup, split into [(n, w, E)].

        One lookup per group (or slicing an embedded (S, W, E) tensor) would make autograd zero-fill
        a dense gradient once per group.
        """
        ids = self.cut(words)  # integers: no gradient
        flat = embed(torch.cat([g.reshape(-1) for g in ids]))  # (sum n*w, E)
        return [x.view(*g.shape, -1) for x, g in zip(torch.split(flat, [g.numel() for g in ids]), ids)]

    def distinct_words(self, words: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The distinct word ids (V,) of every group, and for each group (n, w) where its words sit in them."""
        ids = self.cut(words)
        vocab, where = torch.unique(torch.cat([g.reshape(-1) for g in ids]), return_inverse=True)
        return vocab, [r.view(g.shape) for r, g in zip(torch.split(where, [g.numel() for g in ids]), ids)]

    def run(self, encode: Callable, inputs: list, pairwise: tuple[str, ...] = ()):
        """``encode(x, mask) -> (vectors (n, D), {name: weights})`` on each group, back in batch order.

        Weights end in the group's positions (n, ..., w), zero-padded to W; those named in
        ``pairwise`` end in two (n, ..., w, w), self-attention matrices. Returns (S, D) and the weights.
        """
        vectors, weights = [], {}
        for x, mask, w in zip(inputs, self.masks, self.widths):
            v, named = encode(x, mask)
            vectors.append(v)
            for name, value in named.items():
                pad = (0, self.width - w, 0, self.width - w) if name in pairwise else (0, self.width - w)
                weights.setdefault(name, []).append(F.pad(value, pad))
        restore = torch.argsort(self.order)  # (S,): the inverse permutation
        return torch.cat(vectors)[restore], {name: torch.cat(parts)[restore] for name, parts in weights.items()}
