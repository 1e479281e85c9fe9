"""SANet and CSPAN: registry, fast path vs explicit weights, masking, baselines, a learning check."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import train_briefly

from docattn.data.batching import FlatBatch
from docattn.errors import ConfigError
from docattn.models import create_model, get_spec, list_models

VOCAB, CLASSES = 50, 3
SANET = ["sanet", "sanet-big", "sanet-noatt", "sanet-big-noatt"]
CSPAN = [
    "cspan",
    "cspan-big",
    "cspan-bilstm",
    "cspan-bilstm-selfatt",
    "cspan-bilstm-selfatt-residual",
    "cspan-fusion-a",
    "cspan-fusion-b",
    "cspan-fusion-c",
    "cspan-fusion-d",
    "cspan-fusion-d-sum",
    "cspan-fusion-e",
]
TINY = {"sanet": {"embedding_dim": 12, "d_model": 16}, "cspan": {"embedding_dim": 16, "queries": 3}}


def tiny(name: str, **extra):
    torch.manual_seed(0)
    hp = {**TINY[name.split("-")[0]], **extra}
    return create_model(name, vocab_size=VOCAB, num_classes=CLASSES, **hp).eval()


def padded_batch(lengths=(9, 4, 1, 7, 0), seed: int = 0) -> FlatBatch:
    """Right-padded documents of these lengths; a length of 0 is a fully padded row."""
    g = torch.Generator().manual_seed(seed)
    T = max(lengths)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
    tokens = torch.randint(1, VOCAB, (len(lengths), T), generator=g) * mask
    n = len(lengths)
    return FlatBatch(tokens, mask, torch.arange(n) % CLASSES, torch.arange(n))


def test_every_variant_registered_as_flat():
    assert set(list_models("sanet*")) == set(SANET)
    assert set(list_models("cspan*")) == set(CSPAN)
    for name in SANET + CSPAN:
        spec = get_spec(name)
        assert spec.layout == "flat" and spec.description and spec.paper


@pytest.mark.parametrize("name", SANET + CSPAN)
def test_fast_path_matches_explicit_weights(name):
    """SDPA (no weights) and the explicit path give the same logits, padding and empty rows included."""
    model = tiny(name)
    batch = padded_batch()
    with torch.no_grad():
        fast = model(batch)
        slow = model(batch, return_attention=True)
    assert fast.attentions is None and slow.attentions
    assert torch.isfinite(fast.logits).all() and torch.isfinite(slow.logits).all()
    torch.testing.assert_close(fast.logits, slow.logits, atol=1e-5, rtol=1e-5)
    token = slow.attentions["token"]  # (B, T)
    assert torch.all(token[~batch.mask] == 0)
    torch.testing.assert_close(token.sum(-1)[:-1], torch.ones(4), atol=1e-5, rtol=0)
    assert float(token[-1].sum()) == 0.0  # the empty document attends to nothing


@pytest.mark.parametrize("name", SANET + CSPAN)
def test_empty_document_gives_finite_gradients(name):
    model = tiny(name).train()
    batch = padded_batch()
    for explicit in (False, True):
        model.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(batch, return_attention=explicit).logits, batch.labels)
        loss.backward()
        for n, p in model.named_parameters():
            assert p.grad is None or torch.isfinite(p.grad).all(), f"{name}: non-finite gradient in {n}"


@pytest.mark.parametrize(
    "name,keys",
    [
        ("sanet", ["self"]),
        ("sanet-big", ["self"]),
        ("cspan", ["semantic_self", "positional_self"]),
        ("cspan-fusion-c", ["semantic_self"]),
        ("cspan-fusion-d", ["semantic_self", "positional_self"]),
        ("cspan-bilstm-selfatt", ["semantic_self"]),
    ],
)
def test_self_attention_rows_sum_to_one_over_real_keys(name, keys):
    model = tiny(name)
    batch = padded_batch()
    att = model(batch, return_attention=True).attentions
    B, T = batch.mask.shape
    for key in keys:
        w = att[key]
        if key == "self":  # SANet: (B, N, T, T), one matrix per block
            assert w.shape == (B, model.config.layers, T, T)
            w = w.transpose(0, 1).reshape(-1, T, T)
            mask = batch.mask.repeat(model.config.layers, 1)
        else:
            assert w.shape == (B, T, T)
            mask = batch.mask
        pair = mask[:, :, None] & mask[:, None, :]
        assert torch.all(w[~pair] == 0), f"{name}: {key} leaks onto padding"
        sums = w.sum(-1)[mask]
        torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)


def test_cspan_queries_are_distributions_over_real_words():
    model = tiny("cspan")
    batch = padded_batch()
    q = model(batch, return_attention=True).attentions["queries"]  # (B, m, T)
    assert q.shape == (5, 3, batch.mask.shape[1])
    assert torch.all(q.masked_select(~batch.mask[:, None, :]) == 0)
    torch.testing.assert_close(q.sum(-1)[:4], torch.ones(4, 3), atol=1e-5, rtol=0)


def test_variants_without_some_attention_report_only_what_they_have():
    batch = padded_batch()
    assert set(tiny("cspan-bilstm")(batch, return_attention=True).attentions) == {"token"}
    assert set(tiny("cspan-fusion-a")(batch, return_attention=True).attentions) == {"semantic_self", "queries", "token"}
    assert set(tiny("cspan-bilstm-selfatt-residual")(batch, return_attention=True).attentions) == {
        "semantic_self",
        "positional_self",
        "token",
    }
    assert set(tiny("cspan-fusion-d-sum")(batch, return_attention=True).attentions) == {
        "semantic_self",
        "queries",
        "token",
    }


def test_fusion_d_readings_differ_only_in_the_second_self_attention():
    """(d) as the text reads it: F = S + SelfAtt(BiLSTM(D)); as Figure 2 draws it: F = S + BiLSTM(D)."""
    batch = padded_batch()
    text, figure = tiny("cspan-fusion-d"), tiny("cspan-fusion-d-sum")
    assert not hasattr(figure, "positional_attention") and hasattr(text, "positional_attention")
    figure.load_state_dict({k: v for k, v in text.state_dict().items() if not k.startswith("positional_attention")})
    with torch.no_grad():
        f_text, _ = text.encode(batch.tokens, batch.mask)
        f_figure, _ = figure.encode(batch.tokens, batch.mask)
        x = text.embedding(batch.tokens)
        s, _ = text.semantic_attention(x, batch.mask)
        h = text.bilstm(x, batch.mask)
        p, _ = text.positional_attention(h, batch.mask)
    torch.testing.assert_close(f_figure, s + h)
    torch.testing.assert_close(f_text, s + p)


@pytest.mark.parametrize("name", ["sanet-noatt", "sanet-big-noatt"])
def test_no_attention_baselines_contain_no_attention(name, monkeypatch):
    from docattn.models.sanet import SelfAttention

    model = tiny(name)
    assert not any(isinstance(m, SelfAttention) for m in model.modules())
    attn = tiny(name.replace("-noatt", ""))
    # the baseline swaps each self-attention layer for a feed-forward layer of the same size
    assert sum(p.numel() for p in model.parameters()) > sum(p.numel() for p in attn.parameters())

    def no_attention(*args, **kwargs):
        raise AssertionError("the baseline called scaled_dot_product_attention")

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", no_attention)
    batch = padded_batch()
    model(batch)
    assert set(model(batch, return_attention=True).attentions) == {"token"}
    # no word looks at another one: changing one word leaves every other position's features alone
    with torch.no_grad():
        x = model.projection(model.embedding(batch.tokens[:1]))
        other = batch.tokens[:1].clone()
        other[0, 0] = (other[0, 0] % (VOCAB - 1)) + 1
        y = model.projection(model.embedding(other))
        for block in model.blocks:
            x, _ = block(x, batch.mask[:1])
            y, _ = block(y, batch.mask[:1])
    torch.testing.assert_close(x[0, 1:], y[0, 1:])


def test_sanet_attention_is_unscaled_softmax_of_x_wqk_xt():
    """Paper, section 3: Self-Att(X) = softmax(X W_QK X^T) X W_V, no 1/sqrt(d)."""
    from docattn.models.sanet import SelfAttention

    torch.manual_seed(0)
    att = SelfAttention(8)
    x = torch.randn(2, 5, 8)
    mask = torch.ones(2, 5, dtype=torch.bool)
    out, w = att(x, mask, need_weights=True)
    ref = torch.softmax(att.query_key(x) @ x.transpose(1, 2), -1)
    torch.testing.assert_close(w, ref)
    torch.testing.assert_close(out, ref @ att.value(x))
    fast, _ = att(x, mask)
    torch.testing.assert_close(fast, out, atol=1e-5, rtol=1e-5)


def test_sinusoidal_encoding_any_length():
    from docattn.models.layers import sinusoidal_encoding

    pe = sinusoidal_encoding(3000, 6)
    assert pe.shape == (3000, 6)
    pos, i = 2500, 2
    assert float(pe[pos, 2 * i]) == pytest.approx(math.sin(pos / 10000 ** (2 * i / 6)), abs=1e-3)
    assert float(pe[pos, 2 * i + 1]) == pytest.approx(math.cos(pos / 10000 ** (2 * i / 6)), abs=1e-3)
    assert sinusoidal_encoding(4, 5).shape == (4, 5)  # odd sizes too


def test_position_scale_controls_what_word_order_adds():
    """Without positions the no-attention baseline is a bag of words: shuffling a document changes nothing."""
    batch = padded_batch((9, 7))
    perm = torch.tensor([4, 0, 8, 2, 6, 1, 3, 7, 5])
    shuffled = FlatBatch(batch.tokens[:, perm].clone(), batch.mask, batch.labels, batch.documents)
    shuffled.tokens[1] = batch.tokens[1]  # the 7-word document keeps its order (its pads are in the permutation)
    for scale, same in ((0.0, True), (1.0, False), (0.1, False)):
        model = tiny("sanet-noatt", position_scale=scale)
        a, b = model(batch).logits[0], model(shuffled).logits[0]
        assert torch.allclose(a, b, atol=1e-6) == same, scale
    assert get_spec("sanet").defaults.get("position_scale", 1.0) == 1.0  # the paper's sum, unless asked


def test_max_pool_shares_count_the_winning_dimensions():
    from docattn.models.layers import max_pool_shares

    h = torch.tensor([[[1.0, 0.0, 5.0, 2.0], [3.0, 1.0, 0.0, 1.0], [9.0, 9.0, 9.0, 9.0]]])  # (1, 3, 4)
    mask = torch.tensor([[True, True, False]])
    shares = max_pool_shares(h, mask)
    torch.testing.assert_close(shares, torch.tensor([[0.5, 0.5, 0.0]]))


def test_cspan_shapes_follow_the_paper():
    big = create_model("cspan-big", vocab_size=VOCAB, num_classes=CLASSES)
    assert big.config.embedding_dim == 300 and big.config.queries == 128 and len(big.bilstm.layers) == 3
    assert big.bilstm.layers[0].fwd.hidden_size == 150  # d/2 per direction (paper: 150 units)
    assert big.multi_query.fusion.weight.shape == (300, 128 * 300)  # W_f: md -> d
    base = create_model("cspan", vocab_size=VOCAB, num_classes=CLASSES)
    assert base.config.queries == 16 and len(base.bilstm.layers) == 1
    with pytest.raises(ConfigError):
        create_model("cspan", vocab_size=VOCAB, num_classes=CLASSES, embedding_dim=15)


@pytest.mark.parametrize("name", SANET + CSPAN)
def test_hparams_rebuild_the_model(name):
    model = tiny(name)
    again = create_model(name, vocab_size=VOCAB, num_classes=CLASSES, **model.hparams())
    assert again.hparams() == model.hparams()
    assert {k: v.shape for k, v in again.state_dict().items()} == {k: v.shape for k, v in model.state_dict().items()}
    assert isinstance(model.embedding, torch.nn.Embedding) and model.embedding.padding_idx == 0
    assert model.layout == "flat" and model.num_classes == CLASSES


def test_training_dicts_hold_the_papers_optimisers():
    base = get_spec("sanet").training
    assert base["optimizer"] == "sgd" and base["lr"] == 0.01 and base["momentum"] == 0.9
    assert base["embedding_lr"] == 0.001 and base["embedding_momentum"] == 0.0
    assert base["batch_size"] == 128 and base["max_tokens"] == 1000
    for name in ("sanet-big", "sanet-big-noatt"):
        big = get_spec(name).training
        assert big["lr"] == 0.005 and big["embedding_lr"] == 0.0005 and big["momentum"] == 0.9
    assert get_spec("sanet-noatt").training == base
    for name in CSPAN:
        t = get_spec(name).training
        assert t["optimizer"] == "adam" and t["lr"] == 1e-3 and t["weight_decay"] == 1e-4
        assert t["batch_size"] == 64 and t["schedule"] == "multistep"
        assert t["milestones"] == [20, 25] and t["gamma"] == 0.1 and t["max_tokens"] == 1000
    assert get_spec("cspan").training["max_epochs"] == 30 and get_spec("cspan-big").training["max_epochs"] == 60
    # the engine must understand every key
    from docattn.data.prepare import DataSettings
    from docattn.training.config import TrainConfig

    known = TrainConfig.field_names() | set(DataSettings.__dataclass_fields__)
    for name in SANET + CSPAN:
        assert set(get_spec(name).training) <= known, name


@pytest.fixture(scope="module")
def synthetic_data():
    from docattn.data.prepare import DataSettings, prepare
    from docattn.data.synthetic import make_splits

    splits = make_splits(n_train=1000, n_test=300)
    return prepare(splits["train"], None, splits["test"], DataSettings(min_count=1))


@pytest.mark.parametrize(
    "name,hp,steps,lr",
    [
        ("sanet", {"embedding_dim": 32, "d_model": 32}, 300, 3e-3),
        ("cspan", {"embedding_dim": 32, "queries": 4}, 200, 1e-2),
    ],
)
def test_learns_the_synthetic_task(name, hp, steps, lr, synthetic_data):
    """A few hundred Adam steps on 4 balanced classes reach clearly above chance (25%)."""
    train, test = synthetic_data.splits["train"], synthetic_data.splits["test"]
    torch.manual_seed(0)
    model = create_model(name, vocab_size=len(synthetic_data.vocab), num_classes=4, **hp)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    acc = train_briefly(model, train, test, steps, opt)
    assert acc > 0.4, f"{name}: test accuracy {acc:.2f} after {steps} steps"


def test_cspan_semantic_scale_sharpens_attention_over_small_word_vectors():
    """Unit-norm vectors (word2vec's scale) at d 16 attend almost uniformly at 1/sqrt(d); the scale sharpens."""
    batch = padded_batch()
    real = batch.mask[0]

    def self_weight(scale):
        model = tiny("cspan", semantic_scale=scale)
        with torch.no_grad():  # unit-norm word vectors, as word2vec on a small corpus gives
            w = model.embedding.weight
            w.copy_(w / w.norm(dim=-1, keepdim=True))
        att = model(batch, return_attention=True).attentions["semantic_self"][0][real][:, real]  # (n, n)
        return att.diagonal().mean().item(), att.shape[0]

    paper, n = self_weight(1.0)
    assert paper < 2.0 / n  # near uniform: a word keeps barely more than 1/n of itself
    assert self_weight(16.0)[0] > 0.5  # sharpened: each word mostly keeps itself
    with pytest.raises(ValueError):
        tiny("cspan", semantic_scale=0.0)


def test_cspan_embedding_dropout_acts_in_training_only():
    """Word-vector dropout changes training outputs, leaves evaluation exact, and checks its range."""
    batch = padded_batch()
    plain, dropped = tiny("cspan"), tiny("cspan", embedding_dropout=0.5)
    with torch.no_grad():
        assert torch.equal(plain(batch).logits, dropped(batch).logits)  # eval: dropout is identity
        dropped.train()
        noisy = dropped(batch).logits
    assert torch.isfinite(noisy).all() and not torch.allclose(noisy, plain(batch).logits)
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="embedding_dropout"):
            tiny("cspan", embedding_dropout=bad)


def test_cspan_reads_wider_word_vectors_through_one_projection_at_its_own_width():
    """d_model below the word vectors' width (the packaged table beside word2vec) maps D to d with one linear
    layer; at the words' own width there is none, so a run trained without it loads and predicts as before."""
    batch = padded_batch()
    narrow = tiny("cspan", embedding_dim=40, d_model=16)
    assert narrow.projection.weight.shape == (16, 40) and narrow.embedding.weight.shape == (VOCAB, 40)
    assert narrow.bilstm.layers[0].fwd.hidden_size == 8 and narrow.multi_query.fusion.weight.shape == (16, 3 * 16)
    with torch.no_grad():
        out = narrow(batch, return_attention=True)
    assert out.logits.shape == (5, CLASSES) and torch.isfinite(out.logits).all()
    assert torch.allclose(out.attentions["token"][:4].sum(-1), torch.ones(4))
    for same in ({}, {"d_model": 16}):
        model = tiny("cspan", **same)
        assert model.projection is None and not any(k.startswith("projection") for k in model.state_dict())
    with pytest.raises(ValueError, match="d_model"):
        tiny("cspan", d_model=0)
