"""Building blocks shared by the models: masked normalisers, pooling, attributions, positions and SDPA.

The padded BiGRU / BiLSTM live in ``gru.py`` and the length groups in ``grouping.py``; both are
imported here too, where the models used to find them.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from docattn.data.text import UNK
from docattn.models.grouping import length_groups  # noqa: F401  (re-exported)
from docattn.models.gru import PaddedBiGRU, PaddedBiLSTM, PaddedBiRNN, reverse_padded  # noqa: F401  (re-exported)


def _guard_empty(scores: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked scores (-inf on padding) with fully padded rows set to 0 so no normaliser sees all -inf."""
    has_any = mask.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.where(has_any, scores, torch.zeros_like(scores)), has_any


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over real positions; exactly 0 on padding and on fully padded rows."""
    scores, has_any = _guard_empty(scores, mask)
    return torch.softmax(scores, dim=-1) * (mask & has_any)


def pruned_softmax(scores: torch.Tensor, mask: torch.Tensor, alpha_min: float) -> tuple[torch.Tensor, torch.Tensor]:
    """HPAN: softmax, zero the weights under ``alpha_min``, renormalise (Ribeiro et al., eq. 9-10).

    The largest weight of a row always survives, so the renormalising sum is never 0 and no
    NaN reaches the gradients (the paper's version failed on GPU). Returns (weights, pruned mask).
    """
    w = masked_softmax(scores, mask)
    keep = (w >= alpha_min) | (w == w.amax(dim=-1, keepdim=True))
    keep = keep & mask
    w = w * keep
    w = w / w.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
    return w, mask & ~keep


def sparse_normalizer(scores: torch.Tensor, mask: torch.Tensor, kind: str = "sparsemax") -> torch.Tensor:
    """HSAN: sparsemax (or entmax15) over real positions, guarded against fully masked rows."""
    from entmax import entmax15, sparsemax

    fn = {"sparsemax": sparsemax, "entmax15": entmax15}[kind]
    scores, has_any = _guard_empty(scores, mask)
    # entmax works in float32 at least; it rejects half-precision sorting on some devices
    return fn(scores.float(), dim=-1).to(scores.dtype) * (mask & has_any)


def hide_words(ids: torch.Tensor, mask: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """In training, each real word shown as UNK with probability ``p`` (word dropout): a model that can no
    longer count on any one word of a document it has fit must read the rest of it."""
    if not (training and p > 0):
        return ids
    hidden = (torch.rand(ids.shape, device=ids.device) < p) & mask.bool()
    return ids.masked_fill(hidden, UNK)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over dim -2 of real positions: x (..., T, D), mask (..., T) -> (..., D)."""
    m = mask.unsqueeze(-1).to(x.dtype)
    return (x * m).sum(-2) / m.sum(-2).clamp_min(1.0)


def masked_max(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over dim -2 of real positions only (a pad is never picked); 0 for fully padded rows."""
    out = x.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(dim=-2)
    return torch.where(mask.any(-1, keepdim=True), out, torch.zeros_like(out))


class AttentionPooling(nn.Module):
    """HAN's additive attention: u_t = tanh(W h_t + b), a_t = norm_t(u_t . u_ctx), out = sum_t a_t h_t.

    ``normalizer`` picks the paper: "softmax" (HAN eq. 5/8), "pruned" (HPAN), "sparsemax"
    or "entmax15" (HSAN).
    """

    def __init__(self, dim: int, context_dim: int, normalizer: str = "softmax", alpha_min: float = 0.05):
        super().__init__()
        if normalizer not in ("softmax", "pruned", "sparsemax", "entmax15"):
            raise ValueError(f"unknown attention normalizer {normalizer!r}")
        self.proj = nn.Linear(dim, context_dim)
        self.context = nn.Parameter(torch.empty(context_dim).uniform_(-0.1, 0.1))  # u_w / u_s
        self.normalizer = normalizer
        self.alpha_min = alpha_min
        # in training only, this share of HAN's softmax weights mixed into a sparse normalizer's (set per step by
        # ``training.callbacks.SparseWarmup``); never in eval, so what validates and predicts is the paper's
        self.softmax_share = 0.0

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """h (N, T, D), mask (N, T) -> pooled (N, D), weights (N, T), pruned mask or None."""
        u = torch.tanh(self.proj(h))  # (N, T, A)   HAN eq. 5 / 8: u_t = tanh(W h_t + b)
        scores = u @ self.context  # (N, T)   u_t . u_w
        pruned = None
        if self.normalizer == "softmax":
            w = masked_softmax(scores, mask)  # (N, T)   eq. 6 / 9
        elif self.normalizer == "pruned":
            w, pruned = pruned_softmax(scores, mask, self.alpha_min)
        else:
            w = sparse_normalizer(scores, mask, self.normalizer)
        if self.training and self.softmax_share > 0 and self.normalizer != "softmax":
            w = self.softmax_share * masked_softmax(scores, mask) + (1 - self.softmax_share) * w
        return torch.einsum("nt,ntd->nd", w, h), w, pruned  # (N, D)   eq. 7 / 10: sum_t a_t h_t


def mean_pool_shares(mask: torch.Tensor) -> torch.Tensor:
    """Mean-pooling's attribution: 1/n for each of a row's n real positions, 0 on padding, (N, T)."""
    return mask / mask.sum(-1, keepdim=True).clamp_min(1)


def max_pool_shares(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max-pooling's attribution: the share of the d pooled features each real position wins, (N, T).

    Sums to 1 over real positions (ties go to the first), 0 on padding and on empty rows: an
    honest "attention" for models that pool by max (SANet, HCAN max variants, CNN, Bi-LSTM max).
    """
    N, T, d = h.shape
    winners = h.masked_fill(~mask.unsqueeze(-1), float("-inf")).argmax(dim=1)  # (N, d): first max on ties
    counts = torch.zeros(N, T, device=h.device, dtype=h.dtype)
    counts.scatter_add_(1, winners, torch.ones_like(winners, dtype=h.dtype))  # (N, T)
    return counts / d * mask.any(-1, keepdim=True)


def sinusoidal_encoding(length: int, dim: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """Vaswani et al.'s positions, PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), (length, dim)."""
    pos = torch.arange(length, device=device, dtype=torch.float32).unsqueeze(1)  # (T, 1)
    i = torch.arange(0, dim, 2, device=device, dtype=torch.float32)  # (ceil(d/2),)
    angle = pos / torch.pow(10000.0, i / dim)  # (T, ceil(d/2))
    pe = torch.zeros(length, dim, device=device, dtype=torch.float32)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return pe.to(dtype)


def _sdpa_backends():
    """SDPA's CUDA kernels other than cuDNN's (None where this torch has no cuDNN backend to avoid)."""
    try:
        from torch.nn.attention import SDPBackend
    except ImportError:  # torch < 2.3
        return None
    if not hasattr(SDPBackend, "CUDNN_ATTENTION"):
        return None
    return [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


_NO_CUDNN = _sdpa_backends()


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` on its fused kernels: 3-D inputs get a head axis, no cuDNN.

    SDPA's fused kernels (flash on CPU; flash and memory-efficient on CUDA) take only 4-D
    (batch, heads, length, dim) inputs; 3-D single-head ones silently fall back to the math
    path, which keeps the (T, T) weights for backward (27% slower at B 64, T 600, d 128 on
    one CPU thread). cuDNN's attention builds a graph for every new tensor shape (measured on
    an H100: HCAN at 81 docs/s with it, its batches rarely repeating a shape); the
    memory-efficient kernel needs none.
    """
    if q.dim() == 3:  # (B, T, d) single head -> (B, 1, T, d) and back
        mask = attn_mask.unsqueeze(1) if attn_mask is not None and attn_mask.dim() == 3 else attn_mask
        return attend(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), mask, dropout_p, scale).squeeze(1)
    if q.is_cuda and _NO_CUDNN is not None:
        from torch.nn.attention import sdpa_kernel

        with sdpa_kernel(_NO_CUDNN):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale)
