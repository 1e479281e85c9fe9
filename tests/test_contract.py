"""The declared model contract: protocols, layouts, and attention records that match what forward returns."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_models import NEURAL, build, tiny_corpus

from docattn.models import create_model, get_spec, list_models
from docattn.models.contract import (
    BAG,
    LAYOUTS,
    AttentionKind,
    NeuralModel,
    OneShotModel,
    is_bag,
    is_flat,
    is_hierarchical,
    is_one_shot,
    layout_of,
    word_embedding,
)
from docattn.training.inference import make_batch


@pytest.mark.parametrize("name", list_models())
def test_every_model_keeps_one_of_the_two_contracts(name):
    model = create_model(name, vocab_size=20, num_classes=2)
    spec = get_spec(name)
    assert model.layout == spec.layout in LAYOUTS and model.num_classes == 2
    assert isinstance(model, NeuralModel)  # bag models answer forward too (evaluation, explanations)
    assert is_one_shot(model) == isinstance(model, OneShotModel) == (spec.layout == BAG) == is_bag(spec)
    # what training fills with word vectors and gradient explanations differentiate at
    assert isinstance(word_embedding(model), torch.nn.Embedding) != is_one_shot(model)


@pytest.mark.parametrize("name", [n for n in list_models() if is_hierarchical(get_spec(n))])
def test_every_hierarchical_model_has_the_padded_reference_path(name):
    """``encode_words`` (one group, what an export traces) gives the sentence vectors of ``encode_sentences``."""
    torch.manual_seed(0)
    model = create_model(name, vocab_size=20, num_classes=2).eval()
    lengths = torch.tensor([1, 7, 3, 7, 2])
    word_mask = torch.arange(7)[None, :] < lengths[:, None]
    words = torch.randint(2, 20, (5, 7)) * word_mask.long()
    with torch.no_grad():
        reference, grouped = model.encode_words(words, word_mask)[0], model.encode_sentences(words, word_mask)[0]
    torch.testing.assert_close(reference, grouped, rtol=1e-5, atol=1e-6)


def test_layout_helpers_read_models_specs_batches_and_strings():
    han, cnn = create_model("han", vocab_size=20, num_classes=2), create_model("kim-cnn", vocab_size=20, num_classes=2)
    assert is_hierarchical(han) and is_hierarchical(get_spec("han")) and is_hierarchical("hierarchical")
    assert is_flat(cnn) and not is_flat(han) and not is_bag(cnn)
    corpus = tiny_corpus()
    assert layout_of(make_batch(corpus, np.arange(2), "flat", {})) == "flat"
    with pytest.raises(ValueError, match="layout must be one of"):
        layout_of("tree")


def _known_sizes(model, batch) -> dict[str, int]:
    hp = model.hparams()
    sizes = {"B": len(batch.labels), "h": hp.get("heads"), "m": hp.get("queries"), "N": hp.get("layers")}
    if is_hierarchical(model):
        sizes.update(L=batch.sentence_mask.shape[1], W=batch.words.shape[1], S=batch.words.shape[0])
    else:
        sizes.update(T=batch.tokens.shape[1])
    return sizes


@pytest.mark.parametrize("name", NEURAL)
def test_attention_kinds_describe_what_forward_returns(name):
    """The records name exactly the keys forward returns, with their shapes; pooling records sum to 1."""
    model = build(name)
    corpus = tiny_corpus()
    batch = make_batch(corpus, np.arange(len(corpus)), model.layout, {})
    kinds = model.attention_kinds()
    assert all(isinstance(k, AttentionKind) for k in kinds)
    attentions = model(batch, return_attention=True).attentions
    assert sorted(attentions) == sorted(k.key for k in kinds)
    sizes = _known_sizes(model, batch)
    for kind in kinds:
        w = attentions[kind.key]
        assert w.dim() == len(kind.dims), f"{name}: {kind.key} is {tuple(w.shape)}, declared {kind.shape}"
        for axis, dim in zip(w.shape, kind.dims):
            assert sizes.get(dim) in (None, axis), f"{name}: {kind.key} is {tuple(w.shape)}, declared {kind.shape}"
        if kind.kind == "pooling" and kind.level != "word":
            torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-5, rtol=0)
