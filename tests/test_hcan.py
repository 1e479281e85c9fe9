"""HCAN and the flat Conv Attention Network (Gao et al. 2018): variants, fast vs reference path, masks, learning.

The contract every model keeps (shapes, attention sums, batch independence, finite gradients) is
checked in test_models.py; this file checks what is particular to the convolutional attention models.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import train_briefly

from docattn.data.encoding import EncodedCorpus, encode_ids
from docattn.errors import ConfigError
from docattn.models import create_model, get_spec, list_models
from docattn.models.hcan import HCANConfig, HierarchyBlock
from docattn.models.layers import max_pool_shares
from docattn.training.inference import make_batch

VOCAB, CLASSES = 50, 3
TINY = {"embedding_dim": 16, "d_model": 16, "heads": 2}
FLAT = ["can-one-max", "can-one-target", "can-two-max", "can-two-target"]
HIER = ["hcan-one-max", "hcan-one-target", "hcan-two-max", "hcan-two-target", "hcan"]
ALL = FLAT + HIER


def corpus(seed: int = 0, n_docs: int = 6, max_sentences: int = 5, max_words: int = 10) -> EncodedCorpus:
    """Documents of 1..max_sentences sentences of 1..max_words ids (2 ends a sentence), labels cycling."""
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n_docs):
        ids: list[int] = []
        for _ in range(int(rng.integers(1, max_sentences + 1))):
            ids += rng.integers(3, VOCAB, int(rng.integers(1, max_words + 1))).tolist() + [2]
        docs.append(ids)
    tokens, sent_off, doc_off = encode_ids(docs)
    return EncodedCorpus(tokens, sent_off, doc_off, np.arange(n_docs) % CLASSES)


def build(name: str, scale: float = 1.0, **extra):
    torch.manual_seed(0)
    model = create_model(name, vocab_size=VOCAB, num_classes=CLASSES, **{**TINY, **extra})
    if scale != 1.0:
        with torch.no_grad():  # sharper attention, so a wrong mask or path would show in the logits
            for p in model.parameters():
                p.mul_(scale)
    return model.eval()


def whole_batch(model, enc: EncodedCorpus):
    return make_batch(enc, np.arange(len(enc)), model.layout, {})


def test_every_variant_is_registered_with_its_layout():
    assert set(ALL) <= set(list_models())
    assert list_models("can-*") == sorted(FLAT)
    for name in ALL:
        spec = get_spec(name)
        model = build(name)
        expected = "flat" if name.startswith("can") else "hierarchical"
        assert spec.layout == model.layout == expected
        assert spec.training["hcan_clean"] is True
        assert spec.training["betas"] == (0.9, 0.99)
        # no self-attention runs over more than 1000 positions by default (memory grows with T^2)
        limit = "max_tokens" if expected == "flat" else "max_words"
        assert spec.training[limit] == 1000 and ("max_tokens" in spec.training) == (expected == "flat")
        assert isinstance(model.embedding, torch.nn.Embedding) and model.embedding.padding_idx == 0
        assert model.num_classes == CLASSES
    assert get_spec("hcan").defaults == get_spec("hcan-two-target").defaults


def test_paper_defaults():
    cfg = create_model("hcan", vocab_size=VOCAB, num_classes=CLASSES).hparams()
    assert (cfg["d_model"], cfg["heads"], cfg["embedding_dim"], cfg["dropout"]) == (512, 8, 512, 0.1)
    assert (cfg["self_attentions"], cfg["pooling"]) == (2, "target")


def test_variants_differ_in_structure():
    for name in ALL:
        params = {n for n, _ in build(name).named_parameters()}
        two = "-one-" not in name
        target = not name.endswith("-max")
        assert any(".self_a." in n for n in params)
        assert any(".self_b." in n for n in params) == two, name
        assert any(n.endswith("target_attention.target") for n in params) == target, name
        blocks = {n.split(".")[0] for n in params if "self_a" in n}
        assert blocks == ({"word_hierarchy", "sentence_hierarchy"} if name.startswith("hcan") else {"document"})


@pytest.mark.parametrize("name", ALL)
def test_hparams_rebuild_the_same_model(name):
    model = build(name)
    again = create_model(name, vocab_size=VOCAB, num_classes=CLASSES, **model.hparams())
    assert again.hparams() == model.hparams()
    assert {k: v.shape for k, v in again.state_dict().items()} == {k: v.shape for k, v in model.state_dict().items()}
    again.load_state_dict(model.state_dict())
    batch = whole_batch(model, corpus())
    torch.testing.assert_close(again.eval()(batch).logits, model(batch).logits)


def test_bad_hyper_parameters_are_rejected():
    with pytest.raises(ConfigError, match="multiple of heads"):
        create_model("hcan", vocab_size=VOCAB, num_classes=CLASSES, d_model=10, heads=4)
    with pytest.raises(ConfigError, match="pooling"):
        create_model("hcan", vocab_size=VOCAB, num_classes=CLASSES, pooling="mean")
    with pytest.raises(ConfigError):
        create_model("hcan", vocab_size=VOCAB, num_classes=CLASSES, no_such_option=1)


@pytest.mark.parametrize("name", ALL)
def test_fast_path_matches_reference_path(name):
    """scaled_dot_product_attention and the explicit softmax(QK^T/sqrt(dh))V give the same logits.

    In float64, so the comparison sees a wrong formula rather than float32 rounding (at scale 3
    the two float32 kernels differed by 2.5e-5 on one logit)."""
    model = build(name, scale=3.0).double()
    batch = whole_batch(model, corpus(seed=1))
    fast = model(batch)
    ref = model(batch, return_attention=True)
    assert fast.attentions is None
    torch.testing.assert_close(ref.logits, fast.logits, atol=1e-5, rtol=1e-5)
    # and at the level of one hierarchy's sentence vectors
    if model.layout == "hierarchical":
        block, x, mask = model.word_hierarchy, model.embedding(batch.words), batch.word_mask
    else:
        block, x, mask = model.document, model.embedding(batch.tokens), batch.mask
    v_fast, _ = block(x, mask, need_weights=False)
    v_ref, _ = block(x, mask, need_weights=True)
    torch.testing.assert_close(v_ref, v_fast, atol=1e-5, rtol=1e-5)


def _check_self_attention(w: torch.Tensor, mask: torch.Tensor):
    """w (N, h, T, T): real query rows sum to 1 over real keys; padded keys and padded queries are 0."""
    pair = (mask.unsqueeze(-1) & mask.unsqueeze(-2)).unsqueeze(1).expand_as(w)
    assert torch.all(w[~pair] == 0)
    assert torch.all(w >= 0)
    sums = w.sum(-1)  # (N, h, T)
    real_rows = mask.unsqueeze(1).expand_as(sums)
    torch.testing.assert_close(sums[real_rows], torch.ones_like(sums[real_rows]), atol=1e-5, rtol=0)
    assert torch.all(sums[~real_rows] == 0)


@pytest.mark.parametrize("name", ["can-two-target", "can-one-max"])
def test_flat_attention_outputs(name):
    model = build(name, scale=2.0)
    batch = whole_batch(model, corpus())
    att = model(batch, return_attention=True).attentions
    B, T = batch.mask.shape
    h = TINY["heads"]
    keys = (
        {"token", "self_a"}
        | ({"self_b"} if "-two-" in name else set())
        | ({"token_heads"} if "target" in name else set())
    )
    assert set(att) == keys
    for key in ("self_a", "self_b"):
        if key in att:
            assert att[key].shape == (B, h, T, T)
            _check_self_attention(att[key], batch.mask)
    if "token_heads" in att:
        heads = att["token_heads"]
        assert heads.shape == (B, h, T)
        torch.testing.assert_close(heads.sum(-1), torch.ones(B, h), atol=1e-5, rtol=0)
        assert torch.all(heads[~batch.mask.unsqueeze(1).expand_as(heads)] == 0)
        torch.testing.assert_close(heads.mean(1), att["token"])


@pytest.mark.parametrize("name", ["hcan", "hcan-one-max"])
def test_hierarchical_attention_outputs(name):
    model = build(name, scale=2.0)
    batch = whole_batch(model, corpus())
    att = model(batch, return_attention=True).attentions
    S, W = batch.word_mask.shape
    B, L = batch.sentence_mask.shape
    h = TINY["heads"]
    two, target = "-one-" not in name, not name.endswith("-max")
    keys = {"word", "sentence", "word_self_a", "sentence_self_a"}
    keys |= {"word_self_b", "sentence_self_b"} if two else set()
    keys |= {"word_heads", "sentence_heads"} if target else set()
    assert set(att) == keys
    suffixes = ("a", "b") if two else ("a",)
    for s in suffixes:
        assert att[f"word_self_{s}"].shape == (S, h, W, W)
        assert att[f"sentence_self_{s}"].shape == (B, h, L, L)
        _check_self_attention(att[f"word_self_{s}"], batch.word_mask)
        _check_self_attention(att[f"sentence_self_{s}"], batch.sentence_mask)
    if target:
        wh, sh = att["word_heads"], att["sentence_heads"]
        assert wh.shape == (B, L, h, W) and sh.shape == (B, h, L)
        real_words = batch.word_mask[batch.sentence_index] & batch.sentence_mask.unsqueeze(-1)  # (B, L, W)
        assert torch.all(wh[~real_words.unsqueeze(2).expand_as(wh)] == 0)
        per_head = wh.sum(-1)[batch.sentence_mask]  # (real sentences, h)
        torch.testing.assert_close(per_head, torch.ones_like(per_head), atol=1e-5, rtol=0)
        torch.testing.assert_close(sh.sum(-1), torch.ones(B, h), atol=1e-5, rtol=0)
        torch.testing.assert_close(wh.mean(2), att["word"])
        torch.testing.assert_close(sh.mean(1), att["sentence"])


def test_max_pool_shares_count_the_features_each_position_wins():
    y = torch.tensor([[[1.0, 5.0, 0.0, 2.0], [3.0, 1.0, 0.0, 9.0], [9.0, 9.0, 9.0, 9.0]]])  # (1, 3, 4)
    mask = torch.tensor([[True, True, False]])  # the pad would win everything if it were seen
    shares = max_pool_shares(y, mask)
    # feature 0 -> pos 1, feature 1 -> pos 0, feature 2 tie -> pos 0 (first), feature 3 -> pos 1
    torch.testing.assert_close(shares, torch.tensor([[0.5, 0.5, 0.0]]))
    empty = max_pool_shares(y, torch.zeros(1, 3, dtype=torch.bool))
    assert torch.all(empty == 0)


@pytest.mark.parametrize("name", ["can-two-target", "hcan", "hcan-two-max"])
def test_positions_beyond_the_table_do_not_crash(name):
    enc = corpus(seed=2, n_docs=3, max_sentences=9, max_words=14)
    model = build(name, max_positions=4)
    batch = whole_batch(model, enc)
    longest = batch.tokens.shape[1] if model.layout == "flat" else batch.words.shape[1]
    assert longest > 4
    out = model(batch, return_attention=True)
    assert torch.isfinite(out.logits).all()
    torch.testing.assert_close(model(batch).logits, out.logits)


@pytest.mark.parametrize("cfg", [HCANConfig(**TINY), HCANConfig(**TINY, self_attentions=1, pooling="max")])
def test_fully_padded_rows_stay_finite(cfg):
    """A sequence with no real position (a padded sentence slot) gives no NaN, forward or backward."""
    torch.manual_seed(0)
    block = HierarchyBlock(16, cfg).train()
    x = torch.randn(3, 5, 16, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    for need_weights in (False, True):
        v, w = block(x, mask, need_weights)
        assert torch.isfinite(v).all()
        v.sum().backward()
        assert torch.isfinite(x.grad).all()
        for p in block.parameters():
            assert p.grad is None or torch.isfinite(p.grad).all()
        if need_weights:
            assert torch.all(w["self_a"][1] == 0) and torch.all(w["pool"][1] == 0)


def test_padding_width_does_not_change_a_sequence():
    """Extra padding columns (a longer neighbour in the batch) leave a sequence's vector unchanged."""
    torch.manual_seed(0)
    block = HierarchyBlock(16, HCANConfig(**TINY)).eval()
    x = torch.randn(1, 4, 16)
    mask = torch.ones(1, 4, dtype=torch.bool)
    padded = torch.cat([x, torch.randn(1, 6, 16) * 100], 1)  # garbage in the pads must not leak
    padded_mask = torch.cat([mask, torch.zeros(1, 6, dtype=torch.bool)], 1)
    alone, _ = block(x, mask)
    among, _ = block(padded, padded_mask)
    torch.testing.assert_close(among, alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name,groups", [("hcan", 4), ("hcan-one-max", 4), ("hcan", 0)])
def test_length_groups_change_nothing_but_speed(name, groups):
    """The word hierarchy on length-sorted groups (equal or cost-chosen) gives the logits and weights of one
    padded pass."""
    enc = corpus(seed=3, n_docs=10, max_sentences=5, max_words=12)
    grouped = build(name, scale=2.0, length_groups=groups, group_step_cost=4.0)
    single = build(name, scale=2.0, length_groups=1)
    batch = whole_batch(grouped, enc)
    assert batch.words.shape[0] >= 16  # enough sentences for groups to be used
    a, b = grouped(batch, return_attention=True), single(batch, return_attention=True)
    torch.testing.assert_close(a.logits, b.logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grouped(batch).logits, a.logits, atol=1e-5, rtol=1e-5)
    assert set(a.attentions) == set(b.attentions)
    for key in a.attentions:
        torch.testing.assert_close(a.attentions[key], b.attentions[key], atol=1e-5, rtol=1e-5, msg=key)


@pytest.fixture(scope="module")
def synthetic():
    from docattn.data.prepare import prepare
    from docattn.data.synthetic import make_splits

    splits = make_splits(n_train=1000, n_test=300)
    return prepare(splits["train"], test=splits["test"])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hcan", "can-two-target"])
def test_learns_the_synthetic_task(name, synthetic):
    """A tiny model trained by a bare Adam loop gets clearly above chance (4 classes: 25%)."""
    train, test = synthetic.splits["train"], synthetic.splits["test"]
    torch.manual_seed(0)
    model = create_model(name, vocab_size=len(synthetic.vocab), num_classes=4, embedding_dim=32, d_model=32, heads=4)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.99))
    accuracy = train_briefly(model, train, test, 200, opt)
    assert accuracy > 0.4, f"{name}: test accuracy {accuracy:.2f} after 200 steps"


@pytest.mark.slow
def test_default_rate_keeps_paper_size_sentence_attention_alive(synthetic):
    """At d 512, Adam at 1e-3 collapses the sentence self-attention towards one-hot within ten steps
    (on IMDB 80% of its weights end at exactly 0 and accuracy stays at chance); the registered rate
    must keep it spread. Same start, same batches, only the rate differs."""
    from docattn.explain.collect import attention_summary

    train = synthetic.splits["train"]
    probe = make_batch(train, np.arange(32), "hierarchical", {})

    def after_ten_steps(lr: float) -> tuple[float, float]:
        torch.manual_seed(0)
        rng = np.random.default_rng(0)
        model = create_model("hcan", vocab_size=len(synthetic.vocab), num_classes=4)  # paper size: d 512, 8 heads
        opt = torch.optim.Adam(model.parameters(), lr=lr, betas=get_spec("hcan").training["betas"])
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for _ in range(10):
                batch = make_batch(train, rng.choice(len(train), 16, replace=False), "hierarchical", {})
                loss = torch.nn.functional.cross_entropy(model(batch).logits, batch.labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
            with torch.no_grad():
                att = model.eval()(probe, return_attention=True).attentions["sentence_self_a"]  # (B, h, L, L)
        finally:
            torch.set_num_threads(threads)
        stats = attention_summary("sentence_self_a", att, probe, bandwidths=())
        return stats["normalized_entropy"], stats["zero_share"]

    default = get_spec("hcan").training["lr"]
    spread, zeros = after_ten_steps(default)
    assert spread > 0.9 and zeros == 0.0, f"lr {default}: entropy share {spread:.2f}, exact zeros {zeros:.2f}"
    spread, zeros = after_ten_steps(5 * default)  # the old default, 1e-3
    assert spread < 0.5, f"lr {5 * default}: entropy share {spread:.2f}, exact zeros {zeros:.2f}"
