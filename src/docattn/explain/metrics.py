"""Attention metrics, pure NumPy: Gini, diagonality, entropy and exact zeros, and their running summaries.

Every metric works on masked weight arrays, vectorised over any leading axes: ``weights``
(..., T) with one attention distribution on its last axis (a row of a self-attention matrix,
a sentence's word weights, ...) and a boolean ``mask`` broadcastable to it, True on real
positions. NumPy arrays or torch tensors; results are float64 NumPy arrays, NaN where a
distribution has no real position (or no mass).

- ``gini``: inequality of one distribution, 0 for uniform weights, (n - 1) / n for one-hot.
- ``diagonality``: share of a self-attention matrix's mass with |i - j| <= b (Letarte et al.
  2018, Table 2), the diagonal itself included. It depends on length (uniform attention over n
  words gives about (2b + 1) / n), so the summaries also give it for uniform attention over the
  same words ("diagonality_uniform"); uniform attention's Gini is 0 and its H / log n is 1.
- ``entropy`` (nats) and its normalised form (divided by log n).
- ``zero_share``: share of real positions given exactly 0 (sparsemax, HPAN's pruning).

SANet's Table 2 does not say whether the Gini coefficient is taken per attention row or over a
whole matrix; ``AttentionSummary`` reports the mean over rows ("gini") and, for matrices, the
mean over matrices of the Gini of all their real entries ("gini_matrix"). "gini_columns" is the
Gini of what each word receives from all the queries of its matrix: high when every word attends
to the same few words (the column pattern the paper shows for topic classification, its
Figure 4), near 0 for a diagonal band or uniform attention.

``summarize`` gives the count, moments, quantiles and histogram of any set of values (the
attention one word receives, HAN Figs. 3-4). Running a model to gather the weights is
``explain.collect``'s job.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BANDWIDTHS = (1, 2, 3, 4, 5)


def _array(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().float().cpu().numpy()
    return np.asarray(x)


def _broadcast(weights, mask) -> tuple[np.ndarray, np.ndarray]:
    w = _array(weights).astype(np.float64)
    m = np.ones(w.shape, dtype=bool) if mask is None else np.broadcast_to(_array(mask).astype(bool), w.shape)
    return np.where(m, w, 0.0), m


def gini(weights, mask=None) -> np.ndarray:
    """Gini coefficient of each distribution on the last axis: (...,).

    With the n real weights sorted ascending x_(1) <= ... <= x_(n):
    G = 2 sum_i i x_(i) / (n sum_i x_(i)) - (n + 1) / n.
    """
    w, m = _broadcast(weights, mask)
    T = w.shape[-1]
    n = m.sum(-1)  # (...,)
    # padding sorts first (-inf), so the real weights fill the last n slots in ascending order
    ordered = np.sort(np.where(m, w, -np.inf), axis=-1)
    rank = np.arange(1, T + 1) - (T - n)[..., None]  # (..., T): 1..n on real slots, <= 0 on padding
    ordered = np.where(rank > 0, ordered, 0.0)
    total = ordered.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        g = 2.0 * (rank * ordered).sum(-1) / (n * total) - (n + 1.0) / n
    return np.where((n > 0) & (total > 0), g, np.nan)


def entropy(weights, mask=None, normalized: bool = False) -> np.ndarray:
    """Shannon entropy (nats) of each distribution, (...,); ``normalized`` divides by log n (1 real position: 0)."""
    w, m = _broadcast(weights, mask)
    total = w.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = w / total
        h = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(-1)
    n = m.sum(-1)
    h = np.where((n > 0) & (total[..., 0] > 0), h, np.nan)
    if normalized:
        with np.errstate(invalid="ignore", divide="ignore"):
            h = np.where(n > 1, h / np.log(np.maximum(n, 2)), np.where(n == 1, 0.0, np.nan))
    return h


def zero_share(weights, mask=None) -> np.ndarray:
    """Share of real positions whose weight is exactly 0, (...,)."""
    w, m = _broadcast(weights, mask)
    n = m.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, ((w == 0) & m).sum(-1) / n, np.nan)


def band_masks(T: int, bandwidths: Sequence[int] = BANDWIDTHS) -> np.ndarray:
    """(len(bandwidths), T, T) booleans, True where |i - j| <= b."""
    dist = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :])
    return dist[None] <= np.asarray(bandwidths)[:, None, None]


def diagonality(matrices, mask=None, bandwidths: Sequence[int] = BANDWIDTHS) -> np.ndarray:
    """Share of each matrix's attention mass inside the band |i - j| <= b: (..., len(bandwidths)).

    ``matrices`` (..., T, T), rows are queries; ``mask`` (..., T) marks real words (used for
    queries and keys alike). NaN for a matrix with no mass.
    """
    w = _array(matrices).astype(np.float64)
    T = w.shape[-1]
    if mask is not None:
        m = np.broadcast_to(_array(mask).astype(bool), w.shape[:-1])
        w = w * (m[..., :, None] & m[..., None, :])
    total = w.sum((-2, -1))  # (...,)
    inside = np.einsum("...ij,bij->...b", w, band_masks(T, bandwidths).astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total[..., None] > 0, inside / total[..., None], np.nan)


class AttentionSummary:
    """Running sums of one attention's metrics over batches: ``add`` weights and mask, then ``result``."""

    def __init__(self, matrix: bool, bandwidths):
        self.matrix = matrix
        self.bandwidths = list(bandwidths)
        self.sums = {"gini": 0.0, "entropy": 0.0, "normalized_entropy": 0.0}
        self.rows = 0
        self.zeros = 0
        self.real = 0
        self.matrices = 0
        self.gini_matrix = 0.0
        self.gini_columns = 0.0
        self.diag = np.zeros(len(self.bandwidths))
        self.diag_uniform = np.zeros(len(self.bandwidths))

    def add(self, weights, mask) -> None:
        w = _array(weights).astype(np.float64)
        m = np.broadcast_to(_array(mask).astype(bool), w.shape[:-1] if self.matrix else w.shape)
        if self.matrix:
            row_mask = m[..., None, :] & m[..., :, None]  # (..., T, T): real query and real key
            has_rows = m.any(-1)  # (...,) matrices with at least one real word
            d = diagonality(w, m, self.bandwidths)[has_rows]
            # the same share under uniform attention over the same real words: what chance gives these lengths
            u = diagonality(row_mask.astype(np.float64), None, self.bandwidths)[has_rows]
            keep = ~np.isnan(d).any(-1)
            self.diag += d[keep].sum(0)
            self.diag_uniform += u[keep].sum(0)
            self.matrices += int(keep.sum())
            flat_w = w.reshape(*w.shape[:-2], -1)[has_rows]
            flat_m = row_mask.reshape(*row_mask.shape[:-2], -1)[has_rows]
            self.gini_matrix += float(np.nansum(gini(flat_w, flat_m)[keep]))
            received = (w * row_mask).sum(-2)[has_rows]  # (n, T): what each real word receives from all queries
            self.gini_columns += float(np.nansum(gini(received, m[has_rows])[keep]))
            m = row_mask
        valid = m.any(-1) & ((w * m).sum(-1) > 0)  # distributions with real positions and mass
        wv, mv = w[valid], m[valid]
        self.rows += int(valid.sum())
        self.sums["gini"] += float(np.nansum(gini(wv, mv)))
        self.sums["entropy"] += float(np.nansum(entropy(wv, mv)))
        self.sums["normalized_entropy"] += float(np.nansum(entropy(wv, mv, normalized=True)))
        self.zeros += int(((wv == 0) & mv).sum())
        self.real += int(mv.sum())

    def result(self) -> dict:
        out = {"kind": "matrix" if self.matrix else "distribution", "distributions": self.rows}
        for k, v in self.sums.items():
            out[k] = v / self.rows if self.rows else float("nan")
        out["zero_share"] = self.zeros / self.real if self.real else float("nan")
        if self.matrix:
            out["matrices"] = self.matrices
            out["gini_matrix"] = self.gini_matrix / self.matrices if self.matrices else float("nan")
            out["gini_columns"] = self.gini_columns / self.matrices if self.matrices else float("nan")
            for name, sums in (("diagonality", self.diag), ("diagonality_uniform", self.diag_uniform)):
                out[name] = {
                    str(b): (float(v) / self.matrices if self.matrices else float("nan"))
                    for b, v in zip(self.bandwidths, sums)
                }
        return out


QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def summarize(values: np.ndarray, edges: np.ndarray | None = None) -> dict:
    """count, mean, std, min, max, quantiles and (with ``edges``) histogram counts of ``values``."""
    values = np.asarray(values, dtype=np.float64)
    out: dict = {"count": int(values.size)}
    if values.size:
        q = np.quantile(values, QUANTILES)
        out.update(
            mean=float(values.mean()),
            std=float(values.std()),
            min=float(values.min()),
            max=float(values.max()),
            quantiles={f"{p:g}": float(v) for p, v in zip(QUANTILES, q)},
        )
    else:
        out.update(mean=None, std=None, min=None, max=None, quantiles={f"{p:g}": None for p in QUANTILES})
    if edges is not None:
        out["histogram"] = np.histogram(values, bins=edges)[0].tolist()
    return out
