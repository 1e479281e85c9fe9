"""A bidirectional GRU (or LSTM) over right-padded rows, exact without packing, with a hand-written CPU kernel.

x (N, T, D), mask (N, T) -> forward GRU over each row, backward GRU over each row reversed within its
own length -> (N, T, 2H), zero on padding: what packed sequences give, whatever the batch's padding.

On CPU the GRU runs ``_BiGRUFunction``: both directions share each step's kernels and the backward
pass is written by hand (PyTorch's CPU GRU records every gate of every step in autograd). Its input
projection stays outside, so HAN can project each distinct word once (a gate table, ``rows``).
Elsewhere (GPU, LSTM) PyTorch's kernels run; ``packed=True`` calls its packed-sequence kernel.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F


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
        lengths = (
            mask.sum(1).to("cpu", torch.int64).clamp(min=1)
        )  # packing wants them on the host; empty rows: masked below
        rnn = nn.utils.rnn
        with torch.autocast(x.device.type, enabled=False), warnings.catch_warnings():
            # separate weight tensors: cuDNN copies the ~4 small matrices into one buffer per call
            warnings.filterwarnings("ignore", message=".*not part of single contiguous chunk.*")
            x = x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
            packed = rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            weights = [*self.fwd._flat_weights, *self.bwd._flat_weights]
            h0 = x.new_zeros(2, int(packed.batch_sizes[0]), self.fwd.hidden_size)
            if self.cell is nn.LSTM:
                data = torch._VF.lstm(
                    packed.data, packed.batch_sizes, (h0, h0), weights, True, 1, 0.0, self.training, True
                )[0]
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
