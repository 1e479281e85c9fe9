"""The padded BiGRU / BiLSTM (models/gru.py): outputs and gradients against PyTorch's packed RNNs,
the hand-written CPU recurrence under ``gradcheck``, and float32 under bf16 autocast."""

from __future__ import annotations

import pytest
import torch

from docattn.models.gru import PaddedBiGRU, PaddedBiLSTM, _BiGRUFunction, _BiGRUIndex


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_padded_birnn_matches_packed(kind):
    """The reverse-within-length trick equals PyTorch's packed bidirectional RNN with the same weights."""
    torch.manual_seed(0)
    ours_rnn = (PaddedBiGRU if kind == "gru" else PaddedBiLSTM)(5, 4)
    x = torch.randn(3, 6, 5)
    lengths = torch.tensor([6, 2, 4])
    mask = torch.arange(6)[None, :] < lengths[:, None]
    ref = (torch.nn.GRU if kind == "gru" else torch.nn.LSTM)(5, 4, batch_first=True, bidirectional=True)
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(ref, name).copy_(getattr(ours_rnn.fwd, name))
            getattr(ref, name + "_reverse").copy_(getattr(ours_rnn.bwd, name))
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, _ = ref(packed)
    out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=6)
    torch.testing.assert_close(ours_rnn(x, mask), out, atol=1e-6, rtol=1e-5)
    ours_rnn.packed = True  # our own packed path: the same numbers, an empty row gives zeros
    torch.testing.assert_close(ours_rnn(x, mask), out, atol=1e-6, rtol=1e-5)
    empty = mask.clone()
    empty[1] = False
    assert torch.all(ours_rnn(x, empty)[1] == 0) and torch.isfinite(ours_rnn(x, empty)).all()


def test_fused_bigru_gradients_match_pytorch_gru():
    """The hand-written CPU recurrence gives PyTorch's GRU outputs and gradients, with and without autograd."""
    torch.manual_seed(0)
    fused = PaddedBiGRU(5, 4).double()
    plain = PaddedBiGRU(5, 4).double()
    plain.load_state_dict(fused.state_dict())
    plain.fused_on = lambda device: False  # PyTorch's nn.GRU path
    x = torch.randn(6, 7, 5, dtype=torch.double, requires_grad=True)
    lengths = torch.tensor([7, 3, 1, 5, 7, 2])
    mask = torch.arange(7)[None, :] < lengths[:, None]
    probe = torch.randn(6, 7, 8, dtype=torch.double)
    grads = [torch.autograd.grad((m(x, mask) * probe).sum(), [x, *m.parameters()]) for m in (fused, plain)]
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)
    with torch.no_grad():
        torch.testing.assert_close(fused(x, mask), plain(x, mask))
    gates = torch.randn(6, 7, 24, dtype=torch.double, requires_grad=True)
    w_hh = torch.randn(2, 12, 4, dtype=torch.double, requires_grad=True)
    b_hh = torch.randn(2, 12, dtype=torch.double, requires_grad=True)
    recurrence = lambda g, w, b: _BiGRUFunction.apply(g.reshape(42, 24), _BiGRUIndex(lengths, 6, 7), w, b)  # noqa: E731
    assert torch.autograd.gradcheck(recurrence, (gates, w_hh, b_hh))
    # a gate table with repeated rows (one per distinct word), read through a row map
    table = torch.randn(5, 24, dtype=torch.double, requires_grad=True)
    rows = torch.randint(0, 5, (6, 7))
    shared = lambda g, w, b: _BiGRUFunction.apply(g, _BiGRUIndex(lengths, 6, 7, rows), w, b)  # noqa: E731
    assert torch.autograd.gradcheck(shared, (table, w_hh, b_hh))
    per_position = _BiGRUFunction.apply(table[rows.reshape(-1)], _BiGRUIndex(lengths, 6, 7), w_hh, b_hh)
    torch.testing.assert_close(shared(table, w_hh, b_hh), per_position)


def test_rnn_runs_in_float32_under_bf16_autocast():
    """PyTorch's RNN path (LSTM; GRU off CPU) leaves autocast: cuDNN has bf16 RNNs only from 9.13."""
    torch.manual_seed(0)
    rnn = PaddedBiLSTM(5, 4)
    x = torch.randn(3, 6, 5)
    mask = torch.arange(6)[None, :] < torch.tensor([6, 2, 4])[:, None]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = rnn(x.bfloat16(), mask)
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, rnn(x.bfloat16().float(), mask))


def test_old_import_path_still_finds_the_rnns():
    """Code written before the BiGRU had its own module imports it from models.layers."""
    from docattn.models import layers

    assert layers.PaddedBiGRU is PaddedBiGRU and layers.PaddedBiLSTM is PaddedBiLSTM
