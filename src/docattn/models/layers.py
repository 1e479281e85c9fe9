"""Building blocks shared by the models: masked normalisers, pooling and an exact padded BiGRU."""

from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


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

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """h (N, T, D), mask (N, T) -> pooled (N, D), weights (N, T), pruned mask or None."""
        scores = torch.tanh(self.proj(h)) @ self.context  # (N, T)
        pruned = None
        if self.normalizer == "softmax":
            w = masked_softmax(scores, mask)
        elif self.normalizer == "pruned":
            w, pruned = pruned_softmax(scores, mask, self.alpha_min)
        else:
            w = sparse_normalizer(scores, mask, self.normalizer)
        return torch.einsum("nt,ntd->nd", w, h), w, pruned


def _reversal_index(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """(N, T) gather index reversing each row's first ``lengths`` steps; it is its own inverse."""
    steps = torch.arange(T, device=lengths.device).unsqueeze(0)  # (1, T)
    return torch.where(steps < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - steps, steps)


def _gather_rows(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """x (N, T, D) with its steps reordered by idx (N, T)."""
    return x.gather(1, idx.unsqueeze(-1).expand_as(x))


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row's first ``lengths`` steps in place of packing: x (N, T, D); pads stay last."""
    return _gather_rows(x, _reversal_index(lengths, x.shape[1]))


class _BiGRUIndex:
    """Row maps between a batch (N, T), its gate table and the recurrence's reading order (T, N).

    The backward direction reads each row reversed within its own length. The gates of batch
    position (n, t) are row ``rows[n*T + t]`` of a gate table: the batch itself (``rows`` None)
    or one row per distinct word. Each direction's gates are gathered from the table straight
    into reading order with one ``index_select``, and scattered back in the backward pass.
    """

    def __init__(self, lengths: torch.Tensor, N: int, T: int, rows: torch.Tensor | None = None):
        self.N, self.T = N, T
        rev = _reversal_index(lengths, T)  # (N, T)
        n = torch.arange(N, device=lengths.device).unsqueeze(1)  # (N, 1)
        t = torch.arange(T, device=lengths.device).unsqueeze(0)  # (1, T)
        # batch position n*T+t is read at step t (forward) or at step rev[n, t] (backward)
        self.read_f = (n * T + t).t().reshape(-1)  # (T*N,): step-major order <- batch positions
        self.read_b = (n * T + rev).t().reshape(-1)
        self.write_b = (rev * N + n).reshape(-1)  # (N*T,): batch positions <- step-major order
        self.table_rows = rows is None  # the table is the batch: each table row is read once
        self.src_f = self.read_f if rows is None else rows.reshape(-1)[self.read_f]  # table rows per step
        self.src_b = self.read_b if rows is None else rows.reshape(-1)[self.read_b]


def _bigru_recurrence(gi: torch.Tensor, w_hh: torch.Tensor, b_hh: torch.Tensor, keep: bool):
    """Both GRU directions at once: gi (2, T, N, 3H) input gates in reading order -> states (2, T+1, N, H).

    PyTorch's gates: r, z = sigmoid(gi + gh), n = tanh(gi_n + r * gh_n), h' = n + z (h - n).
    With ``keep`` the hidden gates gh and r|z and n of every step are kept for the backward pass.
    """
    _, T, N, H3 = gi.shape
    H = H3 // 3
    out = gi.new_zeros(2, T + 1, N, H)
    gh = gi.new_empty(2, T, N, 3 * H) if keep else gi.new_empty(2, 1, N, 3 * H)
    rz = gi.new_empty(2, T, N, 2 * H) if keep else gi.new_empty(2, 1, N, 2 * H)
    n = gi.new_empty(2, T, N, H) if keep else gi.new_empty(2, 1, N, H)
    w_t, b = w_hh.transpose(1, 2), b_hh.unsqueeze(1)  # (2, H, 3H), (2, 1, 3H)
    # per-step views made up front: the loop then runs seven kernels a step and nothing else
    steps = T if keep else 1
    gi_rz, gi_n = gi[..., : 2 * H].unbind(1), gi[..., 2 * H :].unbind(1)
    gh_all, gh_rz, gh_n = gh.unbind(1), gh[..., : 2 * H].unbind(1), gh[..., 2 * H :].unbind(1)
    rz_all, r, z, n_all = rz.unbind(1), rz[..., :H].unbind(1), rz[..., H:].unbind(1), n.unbind(1)
    h = out.unbind(1)
    for t in range(T):
        s = t if steps > 1 else 0
        torch.baddbmm(b, h[t], w_t, out=gh_all[s])  # (2, N, 3H)
        torch.sigmoid(gi_rz[t] + gh_rz[s], out=rz_all[s])
        torch.tanh(torch.addcmul(gi_n[t], r[s], gh_n[s]), out=n_all[s])
        torch.addcmul(n_all[s], z[s], h[t] - n_all[s], out=h[t + 1])
    return out, gh, rz, n


def _bigru_forward(table, ix: _BiGRUIndex, w_hh, b_hh, keep: bool):
    """Gate table (V, 6H), forward then backward direction -> (N, T, 2H), plus the saved state."""
    H = table.shape[1] // 6
    N, T = ix.N, ix.T
    gi = table.new_empty(2, T * N, 3 * H)
    torch.index_select(table[:, : 3 * H], 0, ix.src_f, out=gi[0])
    torch.index_select(table[:, 3 * H :], 0, ix.src_b, out=gi[1])
    state = _bigru_recurrence(gi.view(2, T, N, 3 * H), w_hh, b_hh, keep)
    h = state[0][:, 1:]  # (2, T, N, H)
    y_f = h[0].transpose(0, 1)  # (N, T, H): the forward direction reads positions in order
    y_b = h[1].reshape(T * N, H).index_select(0, ix.write_b).view(N, T, H)
    return torch.cat([y_f, y_b], dim=-1), state


class _BiGRUFunction(torch.autograd.Function):
    """The recurrence of a padded BiGRU layer with a hand-written backward pass, for CPU.

    PyTorch's CPU GRU records every gate of every step in autograd and multiplies the weight
    gradients one step at a time. Here both directions share each step's kernels, the gate
    derivatives that do not depend on the incoming gradient are computed for all steps at once,
    and the recurrent weights' gradient is one matrix product over all steps. The input
    projection stays outside, in autograd, so a caller can project each distinct word once and
    pass that table: its gradient is scattered straight back to the table's rows.
    """

    @staticmethod
    def forward(ctx, table, ix, w_hh, b_hh):
        """table (V, 6H) input gates, forward then backward direction; w_hh (2, 3H, H), b_hh (2, 3H)."""
        y, (out, gh, rz, n) = _bigru_forward(table, ix, w_hh, b_hh, keep=True)
        ctx.ix, ctx.table_size = ix, table.shape[0]
        ctx.save_for_backward(w_hh, out, gh, rz, n)
        return y

    @staticmethod
    def backward(ctx, dy):
        w_hh, out, gh, rz, n = ctx.saved_tensors
        ix = ctx.ix
        _, T, N, H = n.shape
        r, z, h_prev = rz[..., :H], rz[..., H:], out[:, :T]
        # h' = (1 - z) n + z h, n = tanh(a_n), a_n = gi_n + r gh_n, r|z = sigmoid(gi + gh):
        # the factors below multiply the incoming dh' at each step
        to_an = (1 - z) * (1 - n * n)  # dh' -> d a_n
        to_ar = gh[..., 2 * H :] * r * (1 - r)  # d a_n -> d a_r
        to_az = (h_prev - n) * z * (1 - z)  # dh' -> d a_z
        dY = dy.new_empty(2, T, N, H)
        dY[0].copy_(dy[..., :H].transpose(0, 1))
        torch.index_select(dy[..., H:].reshape(N * T, H), 0, ix.read_b, out=dY[1].view(T * N, H))
        dgh = dy.new_empty(2, T, N, 3 * H)  # gradient of the hidden gates: d a_r, d a_z, r * d a_n
        da_n = dy.new_empty(2, T, N, H)  # gradient of the input gate n
        dgh_t, da_n_t = dgh.unbind(1), da_n.unbind(1)
        dr, dz, dn = dgh[..., :H].unbind(1), dgh[..., H : 2 * H].unbind(1), dgh[..., 2 * H :].unbind(1)
        dY_t, to_an, to_ar, to_az = dY.unbind(1), to_an.unbind(1), to_ar.unbind(1), to_az.unbind(1)
        r, z = r.unbind(1), z.unbind(1)
        dh = dY_t[T - 1]
        for t in reversed(range(T)):
            torch.mul(dh, to_an[t], out=da_n_t[t])
            torch.mul(da_n_t[t], to_ar[t], out=dr[t])
            torch.mul(dh, to_az[t], out=dz[t])
            torch.mul(da_n_t[t], r[t], out=dn[t])
            if t:
                dh = torch.baddbmm(torch.addcmul(dY_t[t - 1], dh, z[t]), dgh_t[t], w_hh)
        dgh = dgh.view(2, T * N, 3 * H)
        d_whh = torch.bmm(dgh.transpose(1, 2), h_prev.reshape(2, T * N, H))  # (2, 3H, H)
        dg = torch.cat([dgh[..., : 2 * H], da_n.view(2, T * N, H)], dim=-1)  # input gates r, z, n
        d_table = dy.new_zeros(ctx.table_size, 6 * H)
        if ix.table_rows:  # the table is the batch: every row read once, so a plain scatter
            d_table[:, : 3 * H].index_copy_(0, ix.src_f, dg[0])
            d_table[:, 3 * H :].index_copy_(0, ix.src_b, dg[1])
        else:  # one row per distinct word: add up its positions
            d_table[:, : 3 * H].index_add_(0, ix.src_f, dg[0])
            d_table[:, 3 * H :].index_add_(0, ix.src_b, dg[1])
        return d_table, None, d_whh, dgh.sum(1)


class PaddedBiRNN(nn.Module):
    """Bidirectional GRU or LSTM over right-padded rows, exact without packing.

    A plain bidirectional RNN on padded input lets the backward direction read the pads first,
    so a sentence's encoding would depend on its batch. Here the backward RNN runs forward over
    each row reversed within its own length, so pads only ever come after real steps; outputs
    match packed sequences exactly. A GRU on CPU runs the fused recurrence (`_BiGRUFunction`),
    elsewhere PyTorch's kernels (cuDNN on GPU).
    """

    cell = nn.GRU

    def __init__(self, input_size: int, hidden_size: int, packed: bool = False):
        super().__init__()
        self.fwd = self.cell(input_size, hidden_size, batch_first=True)
        self.bwd = self.cell(input_size, hidden_size, batch_first=True)
        self.output_size = 2 * hidden_size
        self.packed = packed  # both directions in one packed-sequence call (cuDNN's on a GPU), on any device

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (N, T, D), mask (N, T) right-padded -> (N, T, 2H), zero on padding."""
        if self.packed:
            return self.forward_packed(x, mask)
        if self.fused_on(x.device):
            return self.forward_gates(self.input_gates(x), mask)
        idx = _reversal_index(mask.sum(1), x.shape[1])
        # float32 under bf16 autocast: cuDNN has bf16 RNNs only from 9.13, and these RNNs are small
        with torch.autocast(x.device.type, enabled=False):
            x = x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
            out_f, _ = self.fwd(x)  # (N, T, H)
            out_b, _ = self.bwd(_gather_rows(x, idx))  # (N, T, H), reversed order
        out = torch.cat([out_f, _gather_rows(out_b, idx)], dim=-1)  # (N, T, 2H)
        return out * mask.unsqueeze(-1).to(out.dtype)

    def forward_packed(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Both directions in one call of PyTorch's packed-sequence kernel: cuDNN walks every row to
        its own length, so no length groups and no reversal are needed (the choice for GPUs to measure
        against the padded path: one launch sequence per layer instead of two per length group)."""
        N, T, _ = x.shape
        if T == 0:
            return x.new_zeros(N, 0, self.output_size)
        lengths = mask.sum(1).to("cpu", torch.int64).clamp(min=1)  # packing wants them on the host; empty rows: masked below
        rnn = nn.utils.rnn
        with torch.autocast(x.device.type, enabled=False), warnings.catch_warnings():
            # separate weight tensors: cuDNN copies the ~4 small matrices into one buffer per call
            warnings.filterwarnings("ignore", message=".*not part of single contiguous chunk.*")
            x = x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
            packed = rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            weights = [*self.fwd._flat_weights, *self.bwd._flat_weights]
            h0 = x.new_zeros(2, int(packed.batch_sizes[0]), self.fwd.hidden_size)
            if self.cell is nn.LSTM:
                data = torch._VF.lstm(packed.data, packed.batch_sizes, (h0, h0), weights, True, 1, 0.0, self.training, True)[0]
            else:
                data = torch._VF.gru(packed.data, packed.batch_sizes, h0, weights, True, 1, 0.0, self.training, True)[0]
            out = rnn.PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
            out, _ = rnn.pad_packed_sequence(out, batch_first=True, total_length=T)
        return out * mask.unsqueeze(-1).to(out.dtype)

    def fused_on(self, device: torch.device) -> bool:
        """Whether the hand-written GRU recurrence runs (GRU on CPU); elsewhere PyTorch's kernels do.

        An LSTM keeps PyTorch's kernels: the same scheme written for the LSTM trained CSPAN and the
        Bi-LSTM baseline about 10% slower than oneDNN's LSTM (hidden 150, batch 64, 250 tokens).
        """
        return self.cell is nn.GRU and device.type == "cpu"

    def input_gates(self, x: torch.Tensor) -> torch.Tensor:
        """Both directions' input projections, x (..., D) -> (..., 6H), in one matrix product."""
        f, b = self.fwd, self.bwd
        return F.linear(x, torch.cat([f.weight_ih_l0, b.weight_ih_l0]), torch.cat([f.bias_ih_l0, b.bias_ih_l0]))

    def forward_gates(self, gates: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The fused recurrence from precomputed input gates -> (N, T, 2H), zero on padding.

        ``gates`` is (N, T, 6H), or with ``rows`` (N, T) a table (V, 6H) whose row ``rows[n, t]``
        holds position (n, t)'s gates (one row per distinct word: nothing is copied per position).
        """
        N, T = mask.shape
        if T == 0:
            return gates.new_zeros(N, 0, self.output_size)
        table = gates if rows is not None else gates.reshape(N * T, -1)
        if table.dtype in (torch.bfloat16, torch.float16):  # CPU autocast: the recurrence stays float32
            table = table.float()
        w_hh = torch.stack([self.fwd.weight_hh_l0, self.bwd.weight_hh_l0])
        b_hh = torch.stack([self.fwd.bias_hh_l0, self.bwd.bias_hh_l0])
        ix = _BiGRUIndex(mask.sum(1), N, T, rows)
        with torch.autocast(table.device.type, enabled=False):
            if torch.is_grad_enabled() and (table.requires_grad or w_hh.requires_grad):
                out = _BiGRUFunction.apply(table, ix, w_hh, b_hh)
            else:
                out = _bigru_forward(table, ix, w_hh, b_hh, keep=False)[0]
        return out * mask.unsqueeze(-1).to(out.dtype)


class PaddedBiGRU(PaddedBiRNN):
    cell = nn.GRU


class PaddedBiLSTM(PaddedBiRNN):
    cell = nn.LSTM


def length_groups(lengths: torch.Tensor, groups: int = 0, step_cost: float = 256.0,
                  quadratic: float = 0.0) -> list[torch.Tensor]:
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


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
           dropout_p: float = 0.0, scale: float | None = None) -> torch.Tensor:
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
