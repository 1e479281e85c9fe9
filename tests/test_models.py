"""The contract every registered model keeps, checked on a tiny batch.

Shapes; attention sums to 1 over real positions and is exactly 0 on padding; sparse variants
give exact zeros; gradients stay finite on extreme inputs; a document's output does not depend
on the other documents of its batch.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from docattn.data.encoding import EncodedCorpus, encode_ids
from docattn.models import create_model, get_spec, list_models
from docattn.training.inference import make_batch

VOCAB, CLASSES = 60, 3
NEURAL = [n for n in list_models() if get_spec(n).layout in ("hierarchical", "flat")]
# small sizes so every variant runs in well under a second
SMALL = {"embedding_dim": 16, "hidden_size": 8, "context_dim": 8, "d_model": 16, "heads": 2, "queries": 4}


def tiny_corpus(seed: int = 0, n_docs: int = 7) -> EncodedCorpus:
    rng = np.random.default_rng(seed)
    docs = []
    for _doc in range(n_docs):
        ids: list[int] = []
        for _ in range(int(rng.integers(1, 6))):
            ids += rng.integers(3, VOCAB, int(rng.integers(1, 12))).tolist() + [2]
        docs.append(ids)
    tokens, sent_off, doc_off = encode_ids(docs)
    return EncodedCorpus(tokens, sent_off, doc_off, np.arange(n_docs) % CLASSES)


def build(name: str, **extra):
    spec = get_spec(name)
    known = set(spec.defaults) | _config_fields(name)
    hp = {k: v for k, v in SMALL.items() if k in known}
    torch.manual_seed(0)
    model = create_model(name, vocab_size=VOCAB, num_classes=CLASSES, **hp, **extra)
    model.eval()
    return model


def _config_fields(name: str) -> set:
    torch.manual_seed(0)
    model = create_model(name, vocab_size=VOCAB, num_classes=CLASSES)
    return set(model.hparams()) if hasattr(model, "hparams") else set()


@pytest.fixture(scope="module")
def corpus():
    return tiny_corpus()


def _mask_for(name, batch):
    return batch.word_mask if get_spec(name).layout == "hierarchical" else batch.mask


@pytest.mark.parametrize("name", NEURAL)
def test_output_shapes_and_attention(name, corpus):
    model = build(name)
    batch = make_batch(corpus, np.arange(len(corpus)), model.layout, {})
    fast = model(batch)
    assert fast.logits.shape == (len(corpus), CLASSES)
    assert fast.attentions is None  # the fast path computes nothing extra
    out = model(batch, return_attention=True)
    torch.testing.assert_close(out.logits, fast.logits)
    assert out.attentions is not None
    for key, w in out.attentions.items():
        if key == "word":
            real = batch.word_mask[batch.sentence_index] & batch.sentence_mask.unsqueeze(-1)
            sums = w.sum(-1)[batch.sentence_mask]
        elif key == "sentence":
            real = batch.sentence_mask
            sums = w.sum(-1)
        elif key == "token":
            real = batch.mask
            sums = w.sum(-1)
        else:
            continue  # family-specific views are checked in their own tests
        assert torch.all(w[~real] == 0), f"{name}: {key} attention leaks onto padding"
        torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)
        assert torch.all(w >= 0)


@pytest.mark.parametrize("name", NEURAL)
def test_batch_independence(name, corpus):
    """A document's logits are the same alone and among other, longer documents."""
    model = build(name)
    full = model(make_batch(corpus, np.arange(len(corpus)), model.layout, {})).logits
    for d in (0, 3, len(corpus) - 1):
        alone = model(make_batch(corpus, [d], model.layout, {})).logits
        torch.testing.assert_close(alone[0], full[d], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", NEURAL)
def test_gradients_finite_on_extreme_inputs(name, corpus):
    model = build(name)
    model.train()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(50.0)  # saturate every non-linearity and push attention to one-hot
    batch = make_batch(corpus, np.arange(len(corpus)), model.layout, {})
    out = model(batch)
    loss = torch.nn.functional.cross_entropy(out.logits, batch.labels)
    loss.backward()
    assert torch.isfinite(out.logits).all()
    for n, p in model.named_parameters():
        if p.grad is not None:
            assert torch.isfinite(p.grad).all(), f"{name}: non-finite gradient in {n}"


@pytest.mark.parametrize("name", [n for n in NEURAL if n.startswith(("hsan", "hpan"))])
def test_sparse_attention_has_exact_zeros(name, corpus):
    model = build(name)
    with torch.no_grad():  # sharpen the scores so sparsity is visible on a tiny random model
        for attn in (model.word_pool.attention, model.sentence_pool.attention):
            attn.context.mul_(40.0)
    batch = make_batch(corpus, np.arange(len(corpus)), model.layout, {})
    out = model(batch, return_attention=True)
    w = out.attentions["word"]
    real = batch.word_mask[batch.sentence_index] & batch.sentence_mask.unsqueeze(-1)
    assert (w[real] == 0).any(), f"{name}: no exact zeros among real words"
    if name == "hpan":
        assert "pruned_words" in out.stats and 0 < float(out.stats["pruned_words"]) < 1


def test_hpan_keeps_largest_when_everything_is_pruned():
    from docattn.models.layers import pruned_softmax

    scores = torch.zeros(2, 40, requires_grad=True)  # 40 equal weights of 0.025 < 0.05
    mask = torch.ones(2, 40, dtype=torch.bool)
    mask[1] = False  # a fully padded row
    w, pruned = pruned_softmax(scores, mask, 0.05)
    assert torch.isfinite(w).all()
    assert float(w[0].sum().detach()) == pytest.approx(1.0)
    assert float(w[1].sum().detach()) == 0.0
    w[0].max().backward()
    assert torch.isfinite(scores.grad).all()


@pytest.mark.parametrize("normalizer", ["pruned", "sparsemax"])
def test_sparse_warmup_mixes_softmax_in_training_only(normalizer):
    from types import SimpleNamespace

    from docattn.models.layers import AttentionPooling, masked_softmax
    from docattn.training.callbacks import SparseWarmup

    torch.manual_seed(0)
    pool = AttentionPooling(6, 4, normalizer)
    h, mask = torch.randn(3, 30, 6), torch.ones(3, 30, dtype=torch.bool)
    scores = torch.tanh(pool.proj(h)) @ pool.context
    warmup = SparseWarmup(0.5)  # over half of 100 planned steps: shares 1, 0.5, then 0
    for step, share in ((0, 1.0), (25, 0.5), (50, 0.0), (90, 0.0)):
        warmup.on_train_batch_start(SimpleNamespace(global_step=step, estimated_stepping_batches=100), pool, None, 0)
        assert pool.softmax_share == pytest.approx(share)
    pool.softmax_share = 1.0
    pool.train()
    _, w, _ = pool(h, mask)
    torch.testing.assert_close(w, masked_softmax(scores, mask))  # every word reached, as in HAN
    pool.eval()
    _, w, _ = pool(h, mask)
    assert (w == 0).any()  # validation and prediction read the paper's sparse weights whatever the share
    warmup.on_train_end(None, pool)
    assert pool.softmax_share == 0.0  # a run stopped mid-warm-up leaves the paper's model to train on


def test_sparsemax_guard_fully_masked_row():
    from docattn.models.layers import sparse_normalizer

    scores = torch.randn(3, 5, requires_grad=True)
    mask = torch.tensor([[1, 1, 0, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    w = sparse_normalizer(scores, mask, "sparsemax")
    assert torch.all(w[1] == 0) and torch.all(w[0, 2:] == 0)
    w.sum().backward()
    assert torch.isfinite(scores.grad).all()


def test_length_groups_partition_rows_by_length():
    from docattn.models.grouping import length_groups

    lengths = torch.tensor([5, 1, 30, 2, 5, 29, 1, 3])
    for kwargs in ({}, {"groups": 3}, {"step_cost": 0.0}, {"step_cost": 1e9}, {"step_cost": 10.0, "quadratic": 1.0}):
        groups = length_groups(lengths, **kwargs)
        rows = torch.cat(groups)
        assert sorted(rows.tolist()) == list(range(8))
        assert torch.all(lengths[rows][1:] >= lengths[rows][:-1])  # sorted, so each group is a length range
    assert len(length_groups(lengths, groups=3)) == 3
    assert len(length_groups(lengths, step_cost=0.0)) == 6  # free steps: one group per distinct length
    assert len(length_groups(lengths, step_cost=1e9)) == 1  # costly steps: pad everything once
    assert [len(g) for g in length_groups(lengths, step_cost=10.0)] == [6, 2]  # the two long rows apart
    # W^2 pricing (self-attention) makes padding short rows to 5 dear: every length range splits off
    assert [len(g) for g in length_groups(lengths, step_cost=10.0, quadratic=1.0)] == [2, 2, 2, 1, 1]


def test_han_distinct_word_projection_matches_per_position():
    """HAN's CPU path projects each distinct word once; outputs and gradients equal the plain path."""
    torch.manual_seed(0)
    han = create_model("han", vocab_size=40, num_classes=3).double()
    words = torch.randint(3, 40, (9, 6))
    word_mask = torch.arange(6)[None, :] < torch.tensor([6, 2, 4, 1, 6, 3, 5, 5, 2])[:, None]
    words = words * word_mask
    results = []
    for fused in (True, False):
        han.word_encoder.fused_on = lambda device, fused=fused: fused
        han.zero_grad()
        out = han.encode_sentences(words, word_mask)[0]
        out.pow(2).sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in han.parameters() if p.grad is not None]))
    torch.testing.assert_close(results[0][0], results[1][0])
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b)


def test_han_packed_rnn_matches_length_groups():
    """``packed_rnn`` (one packed call per level, no length groups) gives the same outputs and gradients."""
    torch.manual_seed(0)
    grouped = create_model("han", vocab_size=40, num_classes=3).double()
    packed = create_model("han", vocab_size=40, num_classes=3, packed_rnn=True).double()
    packed.load_state_dict(grouped.state_dict())
    words = torch.randint(3, 40, (9, 6))
    word_mask = torch.arange(6)[None, :] < torch.tensor([6, 2, 4, 1, 6, 3, 5, 5, 2])[:, None]
    words = words * word_mask
    results = []
    for han in (grouped, packed):
        out = han.encode_sentences(words, word_mask)[0]
        out.pow(2).sum().backward()
        results.append((out.detach(), [p.grad for p in han.parameters() if p.grad is not None]))
    torch.testing.assert_close(results[0][0], results[1][0])
    assert len(results[0][1]) == len(results[1][1])
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b)


def test_word_dropout_hides_real_words_in_training_only():
    """``hide_words`` shows about that share of real words as UNK while training; padding stays padding,
    evaluation sees every word, and a share of 0 (the papers' models) hides none."""
    from docattn.data.text import PAD, UNK
    from docattn.models.layers import hide_words

    words = torch.randint(3, 40, (400, 50))
    word_mask = torch.arange(50)[None, :] < torch.randint(1, 51, (400,))[:, None]
    words = words * word_mask
    torch.manual_seed(0)
    hidden = hide_words(words, word_mask, 0.3, training=True)
    changed = hidden != words
    assert (hidden[changed] == UNK).all() and not changed[~word_mask].any()
    assert (hidden[~word_mask] == PAD).all()
    assert changed[word_mask].float().mean().item() == pytest.approx(0.3, abs=0.02)
    assert torch.equal(hide_words(words, word_mask, 0.3, training=False), words)
    assert torch.equal(hide_words(words, word_mask, 0.0, training=True), words)


@pytest.mark.parametrize("name", ["han", "hsan", "hcan", "can-one-max", "sanet", "cspan"])
def test_every_family_with_word_dropout_hides_the_words_it_reads(name, corpus, monkeypatch):
    """Each family passes every word id it reads, with its real-word mask and ``word_dropout``, through
    ``hide_words`` before the embedding, training or not (which decides whether any are hidden)."""
    import sys

    from docattn.models import layers

    model = build(name, word_dropout=0.3)
    batch = make_batch(corpus, np.arange(len(corpus)), model.layout, {})
    ids, mask = (batch.words, batch.word_mask) if model.layout == "hierarchical" else (batch.tokens, batch.mask)
    calls = []

    def spy(words, word_mask, p, training):
        calls.append((words is ids, torch.equal(word_mask, mask), p, training))
        return layers.hide_words(words, word_mask, p, training)

    monkeypatch.setattr(sys.modules[type(model).__module__], "hide_words", spy)
    model.train()(batch)
    model.eval()(batch)
    assert calls == [(True, True, 0.3, True), (True, True, 0.3, False)]


def test_han_one_group_only_where_it_fits_in_memory():
    """On a GPU HAN pads a batch's sentences to one width unless that would be large: small always,
    over 1M positions never, in between only on CUDA with room (never on the CPU or meta)."""
    from docattn.models.han import _one_group_fits

    for device in ("cpu", "meta"):
        assert _one_group_fits(1 << 18, torch.device(device))
        assert not _one_group_fits((1 << 18) + 1, torch.device(device))
        assert not _one_group_fits((1 << 20) + 1, torch.device(device))


def test_pooling_never_picks_padding():
    from docattn.models.layers import masked_max, masked_mean

    x = torch.tensor([[[1.0], [-5.0], [100.0]]])
    mask = torch.tensor([[True, True, False]])
    assert float(masked_max(x, mask)) == 1.0
    assert float(masked_mean(x, mask)) == -2.0


def test_registry_lists_and_rejects():
    from docattn.errors import ConfigError

    assert {"han", "han-ave", "han-max", "hpan", "hsan"} <= set(list_models())
    assert list_models("han*") == ["han", "han-ave", "han-max"]
    with pytest.raises(ConfigError, match="unknown model"):
        get_spec("no-such-model")
    with pytest.raises(ConfigError):
        create_model("han", vocab_size=10, num_classes=2, not_a_parameter=3)


def test_model_hyperparameters_never_shadow_training_options():
    """DocumentClassifier routes a keyword to training, data or text options first: a model
    hyper-parameter of the same name (fastText's `lr`, say) would silently never be set."""
    from dataclasses import fields

    from docattn.data.prepare import DataSettings
    from docattn.data.text import TextConfig
    from docattn.training.config import TrainConfig

    taken = (
        set(TrainConfig.field_names()) | {f.name for f in fields(DataSettings)} | {f.name for f in fields(TextConfig)}
    )
    for name in list_models():
        clash = set(create_model(name, vocab_size=20, num_classes=2).hparams()) & taken
        assert not clash, f"{name}: hyper-parameters {sorted(clash)} are also training/data/text options"
