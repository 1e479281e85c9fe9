"""The recipe sized to the data (training/recipe.py), class weights, the tf-idf guardrail, data without a
test split (--test-fraction, --cv) and evaluate's warning on documents a run trained on."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import killed_in_epoch

from docattn.classifier import DocumentClassifier
from docattn.data import synthetic
from docattn.data.prepare import DataSettings, prepare
from docattn.errors import ConfigError, DataError
from docattn.training.config import TrainConfig
from docattn.training.recipe import class_weights, data_sized_settings, planned_epochs, resolve, word2vec_passes

TINY = dict(embedding_dim=16, hidden_size=8, context_dim=8, progress=False, min_count=2)


@pytest.fixture(scope="module")
def data200():
    """200 synthetic documents, prepared once: the training runs of this file only read them."""
    sp = synthetic.make_splits(n_train=200, n_test=20, seed=2)
    return prepare(sp["train"], None, sp["test"], DataSettings(min_count=2))


# ---------------------------------------------------------------------------------------- the recipe
def test_epochs_follow_the_data_between_the_models_own_and_the_limit():
    cfg = TrainConfig(min_steps=1000, min_epochs=3, epoch_limit=50, batch_size=64)
    assert planned_epochs(cfg, 2_000) == math.ceil(1000 / 32)  # 32 steps an epoch: 32 epochs, not 3
    assert planned_epochs(cfg, 25_000) == 3  # 391 steps an epoch: the model's own 3 already pass 1,000 steps
    assert planned_epochs(cfg, 100) == 50  # 2 steps an epoch: capped
    assert planned_epochs(TrainConfig(max_epochs=7), 100) == 7  # asked for: that many
    assert planned_epochs(TrainConfig(recipe="paper"), 100) == 10


def test_a_model_registered_with_epochs_gets_at_least_them_under_auto_and_exactly_them_under_paper():
    auto, paper = DocumentClassifier("han"), DocumentClassifier("han", recipe="paper")
    assert auto.train_config.max_epochs is None and auto.train_config.min_epochs == 3
    assert paper.train_config.max_epochs == 3
    resolved, _ = resolve(paper.train_config, 2_000, 10**6, np.zeros(2_000, dtype=np.int64), ["a", "b"])
    assert resolved.max_epochs == 3 and resolved.patience is None and resolved.word2vec_epochs == 5


def test_cspan_and_sanet_on_a_cpu_train_twice_the_step_minimum_unless_told_otherwise():
    cpu = DocumentClassifier("cspan", accelerator="cpu").train_config
    assert cpu.min_steps == 2000 and DocumentClassifier("han", accelerator="cpu").train_config.min_steps == 1000
    assert DocumentClassifier("sanet", accelerator="cpu").train_config.min_steps == 2000
    assert DocumentClassifier("hcan", accelerator="cpu").train_config.min_steps == 1000
    assert planned_epochs(cpu, 10_000) == math.ceil(2000 / math.ceil(10_000 / 64))  # 157 steps an epoch: 13
    assert DocumentClassifier("cspan", accelerator="cpu", min_steps=500).train_config.min_steps == 500
    assert DocumentClassifier("cspan", recipe="paper", accelerator="cpu").train_config.min_steps == 1000


def test_patience_is_three_epochs_of_validations_only_when_the_recipe_chose_the_length():
    labels = np.arange(2_000) % 2
    cfg, _ = resolve(TrainConfig(val_per_epoch=3), 2_000, 10**6, labels, ["a", "b"])
    assert cfg.patience == 9 and cfg.max_epochs == 32
    fixed, _ = resolve(TrainConfig(max_epochs=5), 2_000, 10**6, labels, ["a", "b"])
    assert fixed.patience is None and fixed.max_epochs == 5
    off, _ = resolve(TrainConfig(patience=0), 2_000, 10**6, labels, ["a", "b"])
    assert off.patience == 0


def test_warmup_fraction_becomes_a_share_of_the_planned_steps():
    labels = np.arange(2_000) % 2
    cfg, _ = resolve(TrainConfig(warmup_fraction=0.1), 2_000, 10**6, labels, ["a", "b"])
    assert cfg.max_epochs == 32 and cfg.warmup_steps == math.ceil(0.1 * 32 * 32)  # 32 steps an epoch
    fixed, _ = resolve(TrainConfig(warmup_fraction=0.1, max_epochs=5), 2_000, 10**6, labels, ["a", "b"])
    assert fixed.warmup_steps == 16  # the plan is what was asked for, not the step minimum
    given, _ = resolve(TrainConfig(warmup_fraction=0.1, warmup_steps=7), 2_000, 10**6, labels, ["a", "b"])
    assert given.warmup_steps == 7  # the user's steps win
    off, _ = resolve(TrainConfig(), 2_000, 10**6, labels, ["a", "b"])
    assert off.warmup_steps == 0
    again, _ = resolve(cfg, 2_000, 10**6, labels, ["a", "b"])  # a resumed run keeps its steps
    assert again.warmup_steps == cfg.warmup_steps
    with pytest.raises(ConfigError, match="warmup_fraction"):
        TrainConfig(warmup_fraction=1.0)
    with pytest.raises(ConfigError, match="sparse_warmup_fraction"):
        TrainConfig(sparse_warmup_fraction=1.5)


def test_word2vec_passes_grow_as_the_corpus_shrinks():
    cfg = TrainConfig(word2vec_tokens=40_000_000)
    assert word2vec_passes(cfg, 700_000) == 50  # BBC-sized: capped
    assert word2vec_passes(cfg, 4_000_000) == 10
    assert word2vec_passes(cfg, 100_000_000) == 5
    assert word2vec_passes(TrainConfig(word2vec_epochs=3), 10) == 3
    assert word2vec_passes(TrainConfig(recipe="paper"), 10) == 5


def test_label_smoothing_is_the_recipes_for_single_label_data_only():
    labels, sets = np.arange(2_000) % 2, np.eye(2, dtype=np.float32)[np.arange(2_000) % 2]
    auto, _ = resolve(TrainConfig(), 2_000, 10**6, labels, ["a", "b"])
    assert auto.label_smoothing == 0.1
    multi, _ = resolve(TrainConfig(), 2_000, 10**6, sets, ["a", "b"])
    assert multi.label_smoothing == 0.0  # its thresholds are tuned on the plain probabilities
    paper, _ = resolve(TrainConfig(recipe="paper"), 2_000, 10**6, labels, ["a", "b"])
    assert paper.label_smoothing == 0.0
    given, _ = resolve(TrainConfig(label_smoothing=0.0), 2_000, 10**6, labels, ["a", "b"])
    assert given.label_smoothing == 0.0


def test_the_auto_recipe_lays_the_familys_own_settings_over_the_registered_ones():
    auto, paper = DocumentClassifier("han"), DocumentClassifier("han", recipe="paper")
    assert auto.hparams["dropout"] == 0.2 and auto.train_config.embedding_lr is None
    assert "dropout" not in paper.hparams and paper.train_config.embedding_lr == 5e-4
    given = DocumentClassifier("han", dropout=0.0, embedding_lr=1e-4)  # the user's options win
    assert given.hparams["dropout"] == 0.0 and given.train_config.embedding_lr == 1e-4


def sized(model: str, recipe: str, n_documents: int, given: dict, n_tokens: int | None = None) -> dict:
    """``data_sized_settings`` for documents of 300 tokens unless told (IMDB's reviews are about 290), on a CPU:
    under the optimizer the classifier configures (sanet-big's SGD, the other families' Adam)."""
    optimizer = DocumentClassifier(model, recipe=recipe, accelerator="cpu", **given).train_config.optimizer
    tokens = 300 * n_documents if n_tokens is None else n_tokens
    return data_sized_settings(model, recipe, n_documents, tokens, given, optimizer)


def test_hans_width_follows_the_data_under_auto_unless_the_user_set_it():
    assert sized("han", "auto", 10_000, {}) == {"hidden_size": 100}
    assert sized("han-max", "auto", 50_000, {"lr": 1e-3}) == {"hidden_size": 100}
    assert sized("han", "auto", 9_999, {}) == {}  # a few thousand documents overfit it
    assert sized("han", "paper", 50_000, {}) == {}
    assert sized("han", "auto", 50_000, {"hidden_size": 64}) == {}  # the user's option wins
    assert sized("hpan", "auto", 50_000, {}) == {}


def test_cspans_cpu_words_widen_on_large_data_while_a_gpu_keeps_the_papers():
    assert sized("cspan", "auto", 10_000, {}) == {"embedding_dim": 128}
    assert sized("cspan-big", "auto", 50_000, {}) == {"embedding_dim": 128}
    assert sized("cspan", "auto", 9_999, {}) == {}
    assert sized("cspan", "paper", 50_000, {}) == {}
    assert sized("cspan", "auto", 50_000, {"embedding_dim": 32}) == {}  # the user's option wins
    # on a GPU the CPU configuration's 64 is not laid, so nothing narrows the paper's 300
    assert data_sized_settings("cspan", "auto", 50_000, 15_000_000, {}, "adam", gpu=True) == {}
    assert data_sized_settings("han", "auto", 50_000, 15_000_000, {}, "adam", gpu=True) == {"hidden_size": 100}


def test_every_attention_family_hides_words_on_small_data_under_auto_unless_the_user_set_it():
    from docattn.models import list_models
    from docattn.models.catalogue import ATTENTION_FAMILIES, CATALOGUE

    def hidden(model, n, given):
        return sized(model, "auto", n, given).get("word_dropout")

    assert hidden("han", 1_999, {}) == 0.3
    assert hidden("han-ave", 900, {"hidden_size": 64}) == 0.3
    assert hidden("han", 2_000, {}) is None  # from 2,000 documents it cost HAN accuracy
    assert sized("han", "paper", 900, {}) == {}
    assert hidden("han", 900, {"word_dropout": 0.0}) is None  # the user's option wins
    families = [n for n in list_models() if CATALOGUE[n].paper in ATTENTION_FAMILIES]
    assert {"hpan", "hsan-entmax15", "hcan", "can-one-max", "sanet-big-noatt", "cspan", "cspan-fusion-c"} <= set(
        families
    )
    for variant in families:
        assert hidden(variant, 900, {}) == 0.3, variant
    for baseline in ("kim-cnn", "bilstm", "fasttext"):  # no word_dropout option
        assert sized(baseline, "auto", 900, {}) == {}


def test_words_start_beside_the_packaged_table_on_small_data_unless_the_user_set_them():
    """HCAN (every variant) gained with the table beside word2vec under 2,000 documents, HAN and CSPAN under 1M
    training tokens."""
    small = {"embeddings": "word2vec+wordllama", "word_dropout": 0.3}
    for variant in ("han", "han-ave", "han-max", "hcan", "hcan-one-max", "can-two-target", "cspan", "cspan-big"):
        assert sized(variant, "auto", 1_999, {}) == small, variant
    for variant in ("han", "han-ave", "han-max", "cspan", "cspan-big"):
        assert "embeddings" not in sized(variant, "auto", 4_000, {}), variant  # word2vec alone
    assert sized("han", "paper", 900, {}) == {}
    assert sized("han", "auto", 900, {"embeddings": "word2vec"}) == {"word_dropout": 0.3}
    assert sized("han", "auto", 900, {"embedding_dim": 16}) == {"word_dropout": 0.3}  # its width
    assert sized("hcan", "auto", 900, {"embedding_dim": 16}) == {"word_dropout": 0.3}
    assert sized("cspan-fusion-c", "auto", 900, {"embedding_dim": 16}) == {"word_dropout": 0.3}
    # hpan and hsan lost with it, sanet came out even there: they keep word2vec alone however few the tokens
    for other in ("kim-cnn", "fasttext"):
        assert "embeddings" not in sized(other, "auto", 900, {}, n_tokens=10_000), other
    for variant in ("hpan", "hsan", "hsan-entmax15", "sanet", "sanet-big-noatt"):
        alone = {"embeddings": "word2vec", "word_dropout": 0.3, **sanets_small(variant)}
        assert sized(variant, "auto", 900, {}, n_tokens=10_000) == alone, variant


def sanets_small(variant: str) -> dict:
    """What SANet also lays under SMALL_DATA documents: its rate warms up over a tenth of the planned steps, and
    its weights decay, decoupled from Adam's step."""
    if not variant.startswith("sanet"):
        return {}
    adam = variant in ("sanet", "sanet-noatt")  # on a CPU; sanet-big's SGD keeps its own
    return {"warmup_fraction": 0.1, **({"optimizer": "adamw", "weight_decay": 0.5} if adam else {})}


def test_sanets_rate_warms_up_on_small_data_only_unless_the_user_set_it(data):
    from docattn.models import SMALL_DATA

    for variant in ("sanet", "sanet-big", "sanet-noatt", "sanet-big-noatt"):
        assert sized(variant, "auto", SMALL_DATA - 1, {})["warmup_fraction"] == 0.1, variant
        assert "warmup_fraction" not in sized(variant, "auto", SMALL_DATA, {}), variant
    assert "warmup_fraction" not in sized("sanet", "auto", 900, {"warmup_fraction": 0.0})  # the user's option wins
    assert "warmup_fraction" not in sized("sanet", "auto", 900, {"warmup_steps": 0})  # steps too, none among them
    assert sized("sanet", "paper", 900, {}) == {}
    for other in ("han", "hpan", "hsan", "hcan", "cspan"):  # their pairs did not gain
        assert "warmup_fraction" not in sized(other, "auto", 900, {}), other
    clf = DocumentClassifier(
        "sanet", accelerator="cpu", d_model=8, embedding_dim=16, max_steps=2, word2vec_epochs=1, guardrail=False
    ).fit_prepared(data)
    cfg = clf.train_config  # the run's resolved config: the share became steps of the planned ones
    planned = cfg.max_epochs * math.ceil(len(data.splits["train"]) / cfg.batch_size)
    assert cfg.warmup_fraction == 0.1 and cfg.warmup_steps == math.ceil(0.1 * planned) > 0


def test_sanets_weights_decay_on_small_data_under_adam_only_unless_the_user_set_them(data):
    from docattn.models import SMALL_DATA

    decay = {"optimizer": "adamw", "weight_decay": 0.5}
    for variant in ("sanet", "sanet-noatt"):
        assert decay.items() <= sized(variant, "auto", SMALL_DATA - 1, {}).items(), variant
        assert "weight_decay" not in sized(variant, "auto", SMALL_DATA, {}), variant
    for given in ({"optimizer": "adam"}, {"weight_decay": 0.0}, {"optimizer": "sgd", "lr": 0.01}):
        got = sized("sanet", "auto", 900, given)  # the user's optimizer or decay wins, and keeps the other
        assert not {"optimizer", "weight_decay"} & got.keys(), given
        assert got["warmup_fraction"] == 0.1
    # SGD (sanet-big's registered optimizer, and sanet's on a GPU, where its CPU configuration is not laid)
    # keeps its own: a decay of 0.5 coupled to SGD's step would be another regulariser altogether
    for variant in ("sanet-big", "sanet-big-noatt"):
        got = sized(variant, "auto", 900, {})
        assert not {"optimizer", "weight_decay"} & got.keys() and got["warmup_fraction"] == 0.1, variant
    got = data_sized_settings("sanet", "auto", 900, 270_000, {}, "sgd")
    assert not {"optimizer", "weight_decay"} & got.keys() and got["warmup_fraction"] == 0.1
    assert sized("sanet", "paper", 900, {}) == {}
    for other in ("han", "hpan", "hsan", "hcan", "cspan", "kim-cnn"):  # HPAN's and HSAN's pairs lost on topics
        assert "weight_decay" not in sized(other, "auto", 900, {}), other
    clf = DocumentClassifier(
        "sanet", accelerator="cpu", d_model=8, embedding_dim=16, max_steps=2, word2vec_epochs=1, guardrail=False
    ).fit_prepared(data)
    assert (clf.train_config.optimizer, clf.train_config.weight_decay) == ("adamw", 0.5)
    big = DocumentClassifier(
        "sanet-big", accelerator="cpu", d_model=8, embedding_dim=16, max_steps=2, word2vec_epochs=1, guardrail=False
    ).fit_prepared(data)
    assert (big.train_config.optimizer, big.train_config.weight_decay) == ("sgd", 0.0)


def test_words_start_beside_the_table_under_a_million_training_tokens():
    """What word2vec learns of a word follows the text it reads: HAN, CSPAN, HPAN, HSAN and SANet read the table
    beside it under FEW_TOKENS training tokens, however many documents hold them, and not above, however few;
    HPAN, HSAN and SANet not under SMALL_DATA documents either, where their sizes by documents keep word2vec
    alone."""
    from docattn.models import FEW_TOKENS

    table = {"embeddings": "word2vec+wordllama"}
    alone_when_small = ("hpan", "hsan", "hsan-entmax15", "sanet", "sanet-noatt")
    large = {"han": {"hidden_size": 100}, "cspan": {"embedding_dim": 128}}  # HAN's width, CSPAN's CPU words
    for variant in ("han", "han-ave", "han-max", "cspan", "cspan-big", "cspan-fusion-c", *alone_when_small):
        wider = large.get(variant.split("-")[0], {})
        assert sized(variant, "auto", 7_600, {}, n_tokens=60_000) == table, variant  # short titles
        assert sized(variant, "auto", 2_000, {}, n_tokens=600_000) == table, variant
        assert sized(variant, "auto", 50_000, {}, n_tokens=FEW_TOKENS - 1) == {**table, **wider}, variant
        hidden = {"word_dropout": 0.3, **({"embeddings": "word2vec"} if variant in alone_when_small else {})}
        hidden.update(sanets_small(variant))
        assert sized(variant, "auto", 1_500, {}, n_tokens=FEW_TOKENS) == hidden, variant  # long documents
        assert sized(variant, "auto", 4_000, {}, n_tokens=FEW_TOKENS) == {}, variant
    for variant in ("hpan", "hsan", "sanet", "sanet-big"):  # even under FEW_TOKENS, small data keeps word2vec alone
        alone = {"embeddings": "word2vec", "word_dropout": 0.3, **sanets_small(variant)}
        assert sized(variant, "auto", 1_999, {}, n_tokens=60_000) == alone, variant
    for model in ("han", "cspan", "hpan", "hsan", "sanet"):
        assert sized(model, "auto", 7_600, {"embeddings": "word2vec"}, n_tokens=60_000) == {}  # the user's option
        hidden = {"word_dropout": 0.3, **sanets_small(model)}
        assert sized(model, "auto", 900, {"embeddings": "wordllama"}, n_tokens=60_000) == hidden, model
        assert sized(model, "paper", 7_600, {}, n_tokens=60_000) == {}
    for other in ("kim-cnn", "fasttext"):  # no family's recipe: no table
        assert "embeddings" not in sized(other, "auto", 7_600, {}, n_tokens=60_000), other


def test_hcan_keeps_the_table_at_every_size_without_the_word_dropout():
    """HCAN's 64-d word2vec vectors gained beside the table on 4,500-22,500 documents too: every hcan/can variant
    keeps it from 2,000 training documents on, where words are no longer hidden; HAN's, CSPAN's and SANet's stop
    at 1M training tokens."""
    for variant in ("hcan", "hcan-one-max", "can-two-target"):
        for n in (2_000, 9_999, 10_000, 1_000_000):
            assert sized(variant, "auto", n, {}) == {"embeddings": "word2vec+wordllama"}, (variant, n)
    for model in ("han", "cspan", "hpan", "hsan", "sanet"):
        assert "embeddings" not in sized(model, "auto", 4_000, {})
        assert "embeddings" not in sized(model, "auto", 10_000, {})
    assert sized("hcan", "paper", 5_000, {}) == {}
    assert sized("hcan", "auto", 50_000, {"embedding_dim": 16}) == {}  # the user's width and words
    assert sized("hcan", "auto", 50_000, {"embeddings": "word2vec"}) == {}


def test_the_table_widens_a_cpu_configurations_own_width_not_a_width_the_user_set():
    """On a CPU, HCAN's words are 64-d and SANet's 200-d (their measured configurations): the table's 256,
    asked for or laid by the recipe, comes on top of those, as on top of HAN's registered 200; a width the user
    asks for is the whole width."""
    beside = {"embeddings": "word2vec+wordllama", "accelerator": "cpu"}
    assert DocumentClassifier("hcan", **beside)._sized_hparams({})["embedding_dim"] == 64 + 256
    assert DocumentClassifier("sanet", **beside)._sized_hparams({})["embedding_dim"] == 200 + 256
    assert DocumentClassifier("han", **beside)._sized_hparams({})["embedding_dim"] == 200 + 256
    assert DocumentClassifier("hcan", embedding_dim=300, **beside)._sized_hparams({})["embedding_dim"] == 300
    # CSPAN's features are as wide as its words: it keeps its own 64 and projects the 320-d words to it
    cspan = DocumentClassifier("cspan", **beside)._sized_hparams({})
    assert (cspan["embedding_dim"], cspan["d_model"]) == (64 + 256, 64)
    assert DocumentClassifier("cspan", d_model=32, **beside)._sized_hparams({})["d_model"] == 32
    assert "d_model" not in DocumentClassifier("cspan", accelerator="cpu")._sized_hparams({})  # word2vec alone
    table = {"embeddings": "wordllama", "accelerator": "cpu"}  # the table alone: its own width
    assert DocumentClassifier("hcan", **table)._sized_hparams({})["embedding_dim"] == 256
    assert DocumentClassifier("hcan", accelerator="cpu")._sized_hparams({})["embedding_dim"] == 64  # word2vec


def test_a_small_training_split_trains_hcan_on_both_vectors(data):
    clf = DocumentClassifier(
        "hcan", accelerator="cpu", d_model=8, heads=2, max_steps=2, word2vec_epochs=1, guardrail=False, min_count=2
    ).fit_prepared(data)
    assert clf.train_config.embeddings == "word2vec+wordllama" and clf.model.config.embedding_dim == 64 + 256
    assert clf.results["recipe"]["hparams"] == {"embeddings": "word2vec+wordllama", "word_dropout": 0.3}


def test_a_small_training_split_trains_han_on_both_vectors_and_its_run_says_so(data):
    options = {k: v for k, v in TINY.items() if k != "embedding_dim"}
    clf = DocumentClassifier("han", max_epochs=1, word2vec_epochs=1, guardrail=False, **options).fit_prepared(data)
    assert clf.train_config.embeddings == "word2vec+wordllama" and clf.model.config.embedding_dim == 200 + 256
    assert clf.results["recipe"]["embeddings"] == "word2vec+wordllama"
    assert clf.results["recipe"]["hparams"] == {"embeddings": "word2vec+wordllama", "word_dropout": 0.3}
    assert clf._requested.embeddings == "word2vec"  # a refit on other data sizes its vectors again


def test_han_counts_the_training_splits_own_tokens_for_the_table(data, monkeypatch):
    import docattn.models

    # the training split's token count reaches the rule: at the threshold, word2vec alone, words still hidden
    monkeypatch.setattr(docattn.models, "FEW_TOKENS", len(data.splits["train"].tokens))
    options = {k: v for k, v in TINY.items() if k != "embedding_dim"}
    clf = DocumentClassifier("han", max_epochs=1, word2vec_epochs=1, guardrail=False, **options).fit_prepared(data)
    assert clf.train_config.embeddings == "word2vec" and clf.model.config.embedding_dim == 200
    assert clf.results["recipe"]["hparams"] == {"word_dropout": 0.3}


def test_a_large_training_split_builds_the_wider_model_and_its_run_says_so(data200, tmp_path, monkeypatch):
    import docattn.models

    monkeypatch.setattr(docattn.models, "LARGE_DATA", 100)  # 200 synthetic documents count as large
    tiny = {k: v for k, v in TINY.items() if k != "hidden_size"}
    clf = DocumentClassifier("han", embeddings="random", max_steps=2, guardrail=False, **tiny)
    clf.fit_prepared(data200, run_dir=tmp_path / "run")
    assert clf.model.hparams()["hidden_size"] == 100
    assert clf.results["recipe"]["hparams"] == {"hidden_size": 100}
    assert DocumentClassifier.load(tmp_path / "run").model.hparams()["hidden_size"] == 100
    given = DocumentClassifier("han", embeddings="random", max_steps=2, guardrail=False, **TINY).fit_prepared(data200)
    assert given.model.hparams()["hidden_size"] == 8 and "hparams" not in given.results["recipe"]


def test_cspans_large_data_width_trains_as_the_same_width_asked_for(data200, monkeypatch):
    """What the recipe lays on large data is the model ``--set embedding_dim=128`` builds, weight for weight."""
    import docattn.models

    monkeypatch.setattr(docattn.models, "LARGE_DATA", 100)  # 200 synthetic documents count as large
    monkeypatch.setattr(docattn.models, "FEW_TOKENS", 0)  # word2vec alone, as on a large corpus
    options = dict(max_steps=2, word2vec_epochs=1, word2vec_workers=1, guardrail=False, progress=False, min_count=2)
    sized = DocumentClassifier("cspan", **options).fit_prepared(data200)
    asked = DocumentClassifier("cspan", embedding_dim=128, **options).fit_prepared(data200)
    assert sized.model.hparams()["embedding_dim"] == 128 and sized.results["recipe"]["hparams"] == {
        "embedding_dim": 128
    }
    assert sized.model.state_dict().keys() == asked.model.state_dict().keys()
    for name, weight in sized.model.state_dict().items():
        assert torch.equal(weight, asked.model.state_dict()[name]), name


def test_a_fit_eases_hpans_pruning_in_over_the_planned_steps(data200, monkeypatch):
    import docattn.training.callbacks as callbacks
    from docattn.models.layers import AttentionPooling

    shares, setter = [], callbacks._set_softmax_share
    monkeypatch.setattr(
        callbacks, "_set_softmax_share", lambda module, share: (shares.append(share), setter(module, share))
    )
    clf = DocumentClassifier(
        "hpan", embeddings="random", max_steps=4, max_epochs=1, sparse_warmup_fraction=1.0, guardrail=False, **TINY
    )
    clf.fit_prepared(data200)
    planned = math.ceil(180 / 64)  # 180 training documents after the validation's tenth, one epoch
    assert shares[:3] == pytest.approx([1 - s / planned for s in range(3)]) and shares[-1] == 0.0
    pools = [layer for layer in clf.model.modules() if isinstance(layer, AttentionPooling)]
    assert len(pools) == 2 and all(pool.softmax_share == 0.0 for pool in pools)  # the paper's model once trained


def test_a_model_without_sparse_attention_refuses_the_sparse_warm_up():
    """On HAN's softmax, a self-attention family or a linear baseline the option would change nothing, silently."""
    for model, options in (("hpan", {}), ("hsan-entmax15", {}), ("han", {"normalizer": "sparsemax"})):
        DocumentClassifier(model, sparse_warmup_fraction=0.1, **options)
    for model in ("han", "sanet", "nb"):
        with pytest.raises(ConfigError, match=f"sparse_warmup_fraction .*; {model} has none"):
            DocumentClassifier(model, sparse_warmup_fraction=0.1)
    DocumentClassifier("han", sparse_warmup_fraction=0.0)  # off is off for every model


def test_the_cosine_runs_over_the_planned_steps_and_continues_the_same_curve():
    from docattn.training.engine import RatePlan

    factor = RatePlan("cosine", 4, 100)
    assert [factor(s) for s in range(4)] == pytest.approx([0.25 * c for c in (1, 2, 3, 4)], rel=0.01)
    assert factor(50) == pytest.approx(0.5) and factor(100) == pytest.approx(0.0) and factor(150) == pytest.approx(0.0)
    values = [factor(s) for s in range(4, 101)]
    assert values == sorted(values, reverse=True)  # warm-up, then down to 0 at the planned end, never back up
    assert RatePlan("none", 0, 100)(70) == 1.0
    factor.total = 150  # lengthened at its end: back to a quarter of the peak, then down to 0 at the new end
    assert factor(100) == pytest.approx(0.25) and factor(150) == pytest.approx(0.0)


def _improving_at_every_validation(monkeypatch, always: bool) -> None:
    """Every validation keeps its weights (a run still improving at its end), or only the first one does."""
    from docattn.training import callbacks

    monkeypatch.setattr(callbacks.BestWeights, "keeps", lambda self, score, loss=0.0: always or self.best_score is None)


def test_a_run_still_improving_at_its_planned_end_trains_longer_with_the_cosine_stretched(
    data200, monkeypatch, tmp_path
):
    from docattn.card import model_card

    _improving_at_every_validation(monkeypatch, always=True)
    steps_per_epoch = math.ceil(len(data200.splits["train"]) / 32)
    options = dict(embeddings="random", min_steps=4 * steps_per_epoch, batch_size=32, guardrail=False, **TINY)
    clf = DocumentClassifier("han", epoch_limit=7, extend_plan=True, **options).fit_prepared(
        data200, run_dir=tmp_path / "run"
    )
    assert clf.train_config.max_epochs == 4  # planned 4; then 4 + 2, then 7
    assert clf.results["extended_to_epochs"] == 7
    assert "still improving at the end of its 4 planned epochs, so lengthened to 7" in model_card(tmp_path / "run")
    history = clf.results["history"]
    assert history[-1]["step"] == 7 * steps_per_epoch
    rates = [row["lr"] for row in history]
    planned_end = max(i for i, row in enumerate(history) if row["step"] <= 4 * steps_per_epoch)
    assert rates[planned_end + 1] > rates[planned_end]  # stretched: the rate rose again after the planned end
    assert rates[-1] < 0.05 * clf.train_config.lr  # and fell to near 0 at the lengthened end
    kept = DocumentClassifier("han", epoch_limit=7, **options).fit_prepared(data200)  # the default keeps the plan
    assert kept.results["extended_to_epochs"] is None and kept.results["history"][-1]["step"] == 4 * steps_per_epoch
    with pytest.raises(ConfigError, match="extend_plan lengthens the auto recipe"):
        TrainConfig(recipe="paper", extend_plan=True)


def test_a_run_that_peaked_early_is_not_lengthened(data200, monkeypatch):
    _improving_at_every_validation(monkeypatch, always=False)
    steps_per_epoch = math.ceil(len(data200.splits["train"]) / 32)
    clf = DocumentClassifier(
        "han",
        embeddings="random",
        min_steps=4 * steps_per_epoch,
        patience=0,
        extend_plan=True,
        batch_size=32,
        guardrail=False,
        **TINY,
    ).fit_prepared(data200)
    assert clf.results["extended_to_epochs"] is None and clf.results["history"][-1]["step"] == 4 * steps_per_epoch


def test_a_lengthened_run_resumes_its_longer_plan(data200, monkeypatch, tmp_path):
    """Killed in an epoch the plan was lengthened by, it continues to the lengthened end on the same curve."""
    _improving_at_every_validation(monkeypatch, always=True)
    steps_per_epoch = math.ceil(len(data200.splits["train"]) / 32)
    options = dict(
        embeddings="random", min_steps=4 * steps_per_epoch, extend_plan=True, batch_size=32, guardrail=False, **TINY
    )
    whole = DocumentClassifier("han", epoch_limit=6, **options).fit_prepared(data200, run_dir=tmp_path / "whole")
    run = tmp_path / "run"
    with killed_in_epoch(monkeypatch, 5):
        DocumentClassifier("han", epoch_limit=6, **options).fit_prepared(data200, run_dir=run)
    resumed = DocumentClassifier("han", epoch_limit=6, **options).fit_prepared(data200, run_dir=run, resume=True)
    assert resumed.results["extended_to_epochs"] == whole.results["extended_to_epochs"] == 6
    steps = [row["step"] for row in resumed.results["history"]]
    assert steps == [row["step"] for row in whole.results["history"]] and steps[-1] == 6 * steps_per_epoch
    rates = [row["lr"] for row in resumed.results["history"]]
    assert rates == pytest.approx([row["lr"] for row in whole.results["history"]], abs=1e-6)  # CSV: 6 decimals


def test_the_recipe_averages_the_five_best_weights_under_auto_only():
    labels = np.arange(2_000) % 2
    assert resolve(TrainConfig(), 2_000, 10**6, labels, ["a", "b"])[0].average_best == 5
    assert resolve(TrainConfig(recipe="paper"), 2_000, 10**6, labels, ["a", "b"])[0].average_best == 1
    assert resolve(TrainConfig(ema_decay=0.99), 2_000, 10**6, labels, ["a", "b"])[0].average_best == 1  # averages
    assert resolve(TrainConfig(average_best=2), 2_000, 10**6, labels, ["a", "b"])[0].average_best == 2
    with pytest.raises(ConfigError, match="average_best must be at least 1"):
        TrainConfig(average_best=0)
    with pytest.raises(ConfigError, match="both average the weights"):
        TrainConfig(ema_decay=0.99, average_best=3)


def _validated(best, scores: list[float], losses: list[float] | None = None) -> None:
    """``best`` sees validations scoring ``scores`` (validation losses ``losses``, else 1) in turn, the weights of
    each a tensor holding its index."""
    from types import SimpleNamespace

    import torch
    from lightning.pytorch.trainer.states import TrainerFn

    for i, score in enumerate(scores):
        loss = 1.0 if losses is None else losses[i]
        metrics = {"val_acc": score, "val_macro_f1": score, "val_micro_f1": score, "val_loss": loss}
        trainer = SimpleNamespace(
            state=SimpleNamespace(fn=TrainerFn.FITTING),
            sanity_checking=False,
            callback_metrics={k: torch.tensor(v) for k, v in metrics.items()},
            current_epoch=i,
            global_step=10 * (i + 1),
            is_global_zero=True,
        )
        model = torch.nn.Linear(1, 1)
        with torch.no_grad():
            model.weight.fill_(i)
        best.on_validation_end(trainer, SimpleNamespace(model=model))


def test_the_best_weights_keep_the_k_best_validations_the_earlier_of_equal_ones():
    from docattn.training.callbacks import BestWeights

    best = BestWeights("val_acc", keep=3)
    _validated(best, [0.5, 0.7, 0.6, 0.7, 0.4, 0.65])
    assert [kept["metrics"]["step"] for kept in best.top] == [20, 40, 60]  # 0.7, 0.7 (the later), 0.65
    assert best.best_metrics["step"] == 20 and best.best_state is best.top[0]["state"]  # one copy of the best
    assert best.mean_state()["weight"].item() == pytest.approx((1 + 3 + 5) / 3)
    restored = BestWeights("val_acc", keep=3)
    restored.load_state_dict(best.state_dict())  # a resume checkpoint carries the weights averaged
    assert restored.mean_state()["weight"].item() == pytest.approx(3.0) and restored.best_state["weight"].item() == 1
    alone = BestWeights("val_acc")
    _validated(alone, [0.5, 0.7, 0.6])
    assert alone.top == [] and alone.state_dict()["top"] == []  # average_best 1: no extra weights kept


def test_a_validation_loss_breaks_ties_between_equal_scores_when_asked():
    from docattn.training.callbacks import BestWeights

    scores, losses = [0.5, 0.7, 0.6, 0.7, 0.4, 0.7, 0.7], [1.0, 0.5, 0.9, 0.4, 1.0, 0.45, 0.6]
    plain = BestWeights("val_acc", keep=3)
    _validated(plain, scores, losses)
    assert [kept["metrics"]["step"] for kept in plain.top] == [20, 40, 60] and plain.best_metrics["step"] == 20
    ties = BestWeights("val_acc", keep=3, loss_breaks_ties=True)
    _validated(ties, scores, losses)
    assert [kept["metrics"]["step"] for kept in ties.top] == [40, 60, 20]  # 0.7 at losses 0.4, 0.45, 0.5
    assert ties.best_metrics["step"] == 40 and ties.best_state is ties.top[0]["state"]
    alone = BestWeights("val_acc", loss_breaks_ties=True)
    _validated(alone, scores, losses)
    assert alone.best_metrics["step"] == 40 and alone.best_state["weight"].item() == 3
    by_loss = BestWeights("val_loss", keep=2, loss_breaks_ties=True)  # the loss is the score: nothing to break
    _validated(by_loss, losses, losses)
    assert [kept["metrics"]["step"] for kept in by_loss.top] == [40, 60]


def _fit_averaging(data200, monkeypatch, mean, run_dir=None, **options):
    """A run of average_best=3 whose mean of weights is ``mean(best)``; (the classifier, the best alone's
    weights, the weights handed to validation as the mean)."""
    from docattn.training import callbacks

    seen = {}

    def stand_in(self):
        seen["best"], seen["mean"] = self.best_state, mean(self)
        return seen["mean"]

    monkeypatch.setattr(callbacks.BestWeights, "mean_state", stand_in)
    clf = DocumentClassifier(
        "han", embeddings="random", min_steps=40, average_best=3, batch_size=32, guardrail=False, **TINY, **options
    ).fit_prepared(data200, run_dir=run_dir)
    return clf, seen["best"], seen["mean"]


def _same_weights(model, state) -> bool:
    return all(np.allclose(value.numpy(), state[name].numpy()) for name, value in model.state_dict().items())


def test_the_mean_of_the_best_weights_is_kept_where_it_validates_as_well_as_the_best_alone(
    data200, monkeypatch, tmp_path
):
    from docattn.card import model_card
    from docattn.training import callbacks

    real = callbacks.BestWeights.mean_state
    clf, best, mean = _fit_averaging(data200, monkeypatch, real)
    averaged = clf.results["averaged"]
    assert len(averaged["validation"]["averaged_steps"]) == 3
    if averaged["kept"]:  # which way it goes depends on the data: either, the model holds what was decided
        assert _same_weights(clf.model, mean) and clf.results["best"] == averaged["validation"]
    else:
        assert _same_weights(clf.model, best) and not clf.results["best"]["averaged_steps"]
    # the best alone scores the same as itself: a tie keeps the mean, and the run says so
    clf, best, _ = _fit_averaging(data200, monkeypatch, lambda self: dict(self.best_state), tmp_path / "run")
    assert clf.results["averaged"]["kept"] and _same_weights(clf.model, best)
    assert clf.results["best"]["val_acc"] == pytest.approx(clf.results["averaged"]["best_alone"])
    steps = clf.results["best"]["averaged_steps"]
    card = model_card(tmp_path / "run")
    assert len(steps) == 3 and f"Weights: the mean of the weights of 3 validations (steps {steps[0]}, " in card


def test_a_mean_that_validates_worse_is_refused_and_the_best_weights_kept(data200, monkeypatch):
    import torch

    def confidently_wrong(self):  # every document given to one class, its logit 50 above the others
        state = {k: torch.zeros_like(v) if v.is_floating_point() else v for k, v in self.best_state.items()}
        state["classifier.bias"][0] = 50.0
        return state

    clf, best, _ = _fit_averaging(data200, monkeypatch, confidently_wrong, monitor="val_loss")
    averaged = clf.results["averaged"]
    assert not averaged["kept"] and averaged["validation"]["val_loss"] > 10 * averaged["best_alone"]
    assert _same_weights(clf.model, best) and not clf.results["best"]["averaged_steps"]
    assert clf.results["best"]["val_loss"] == pytest.approx(averaged["best_alone"])


def test_the_mean_may_validate_one_standard_error_under_the_best_on_accuracy_not_on_loss():
    from docattn.training.engine import averaging_tolerance

    assert averaging_tolerance("val_acc", 0.9, 100) == pytest.approx(0.03)  # 3 of 100 documents
    assert averaging_tolerance("val_macro_f1", 0.9, 400) == pytest.approx(0.015)
    assert averaging_tolerance("val_acc", 1.0, 178) == 0.0  # a perfect validation: only a tie keeps the mean
    assert averaging_tolerance("val_loss", 0.3, 100) == 0.0


def test_a_mean_within_the_tolerance_is_kept_though_it_validates_lower(data200, monkeypatch):
    import torch

    from docattn.training import engine

    def one_class(self):  # every document given to class 0: a quarter of them right, under the best
        state = {k: torch.zeros_like(v) if v.is_floating_point() else v for k, v in self.best_state.items()}
        state["classifier.bias"][0] = 50.0
        return state

    def fit(tolerance=None):
        if tolerance is not None:
            monkeypatch.setattr(engine, "averaging_tolerance", lambda monitor, best, documents: tolerance)
        clf, best, mean = _fit_averaging(data200, monkeypatch, one_class, monitor="val_acc", lr=0.01)
        averaged = clf.results["averaged"]
        assert averaged["validation"]["val_acc"] < averaged["best_alone"]  # the case at stake: a lower mean
        return clf, averaged, best, mean

    clf, averaged, best, mean = fit()
    p, n = averaged["best_alone"], len(data200.splits["valid"])
    assert averaged["tolerance"] == pytest.approx(math.sqrt(p * (1 - p) / n))  # one standard error on 20
    assert averaged["kept"] == (averaged["validation"]["val_acc"] >= p - averaged["tolerance"])
    assert _same_weights(clf.model, mean if averaged["kept"] else best)
    clf, averaged, best, _ = fit(tolerance=0.0)  # the strict rule: lower is refused
    assert not averaged["kept"] and _same_weights(clf.model, best)
    clf, averaged, _, mean = fit(tolerance=1.0)
    assert averaged["kept"] and averaged["tolerance"] == 1.0 and _same_weights(clf.model, mean)


def test_a_resumed_run_averages_the_same_weights_as_a_straight_one(data200, monkeypatch, tmp_path):
    options = dict(
        embeddings="random", min_steps=40, patience=0, average_best=3, batch_size=32, guardrail=False, **TINY
    )
    whole = DocumentClassifier("han", **options).fit_prepared(data200, run_dir=tmp_path / "whole")
    run = tmp_path / "run"
    with killed_in_epoch(monkeypatch, 4):
        DocumentClassifier("han", **options).fit_prepared(data200, run_dir=run)
    resumed = DocumentClassifier("han", **options).fit_prepared(data200, run_dir=run, resume=True)
    kept, again = whole.results["averaged"], resumed.results["averaged"]
    assert again["validation"]["averaged_steps"] == kept["validation"]["averaged_steps"]
    assert again["kept"] == kept["kept"] and again["best_alone"] == pytest.approx(kept["best_alone"])
    assert _same_weights(resumed.model, whole.model.state_dict())


def test_a_small_data_set_trains_to_its_planned_steps_with_the_rate_ending_near_zero(data200, tmp_path):
    clf = DocumentClassifier(
        "han", embeddings="random", patience=0, min_steps=40, batch_size=32, guardrail=False, **TINY
    ).fit_prepared(data200)
    steps_per_epoch = math.ceil(len(data200.splits["train"]) / 32)
    assert clf.train_config.max_epochs == math.ceil(40 / steps_per_epoch)
    history = clf.results["history"]
    assert history[-1]["step"] == clf.train_config.max_epochs * steps_per_epoch
    assert history[-1]["lr"] < 0.05 * clf.train_config.lr  # the cosine spans the run's own steps
    assert clf.results["recipe"]["max_epochs"] == clf.train_config.max_epochs


def test_max_steps_ends_the_run_mid_epoch_with_its_last_weights_validated(data200):
    clf = DocumentClassifier(
        "han", embeddings="random", max_steps=5, val_every_n_steps=2, batch_size=16, guardrail=False, **TINY
    ).fit_prepared(data200)
    assert [row["step"] for row in clf.results["history"]] == [2, 4, 5]  # 12 steps an epoch: stopped in the first
    with pytest.raises(ConfigError, match="max_steps"):
        TrainConfig(max_steps=0)


def test_early_stopping_waits_for_the_minimum_steps(data200):
    # patience 1 on a validation score that stops moving at once: only the minimum bounds the run
    clf = DocumentClassifier(
        "han",
        embeddings="random",
        patience=1,
        min_steps=30,
        min_epochs=10,
        batch_size=32,
        lr=1e-6,
        guardrail=False,
        **TINY,
    ).fit_prepared(data200)
    assert clf.results["history"][-1]["step"] >= 30 and clf.results["stopped_early"]
    assert clf.results["history"][-1]["step"] < clf.train_config.max_epochs * math.ceil(
        len(data200.splits["train"]) / 32
    )


def test_old_runs_without_a_recipe_keep_training_as_they_did():
    old = TrainConfig.from_json({"max_epochs": 3, "word2vec_epochs": 5, "patience": None})
    assert old.recipe == "paper" and old.class_weight is None and old.monitor == "val_acc"


# ------------------------------------------------------------------------------------- class weights
def test_balanced_weights_are_scikit_learns_and_auto_weighs_only_imbalanced_data():
    labels = np.array([0] * 80 + [1] * 20)
    w = class_weights(TrainConfig(class_weight="balanced"), labels, ["a", "b"])
    assert w == pytest.approx([100 / (2 * 80), 100 / (2 * 20)])
    roots = class_weights(TrainConfig(class_weight="sqrt_balanced"), labels, ["a", "b"], neural=False)
    assert roots == pytest.approx(np.sqrt(w))  # named: the same for every model
    # 4x: weighed, by the square roots for a neural model and in full for a linear one
    assert class_weights(TrainConfig(), labels, ["a", "b"]) == pytest.approx(roots)
    assert class_weights(TrainConfig(), labels, ["a", "b"], neural=False) == pytest.approx(w)
    assert class_weights(TrainConfig(), np.array([0] * 60 + [1] * 40), ["a", "b"]) is None  # 1.5x: not
    assert class_weights(TrainConfig(recipe="paper"), labels, ["a", "b"]) is None
    assert class_weights(TrainConfig(class_weight={"b": 3}), labels, ["a", "b"]) == pytest.approx([1, 3])
    with pytest.raises(ConfigError, match="classes the data does not have: c"):
        class_weights(TrainConfig(class_weight={"c": 3}), labels, ["a", "b"])
    for bad in ("heavy", {"a": -1}, 5):
        with pytest.raises(ConfigError, match="class_weight"):
            TrainConfig(class_weight=bad)


def test_imbalanced_data_is_weighed_and_chosen_by_macro_f1():
    labels = np.array([0] * 90 + [1] * 10)
    cfg, weights = resolve(TrainConfig(), 100, 10_000, labels, ["a", "b"])
    assert cfg.monitor == "val_macro_f1" and cfg.class_weight == "sqrt_balanced" and weights is not None
    cfg, weights = resolve(TrainConfig(), 100, 10_000, labels, ["a", "b"], neural=False)
    assert cfg.monitor == "val_macro_f1" and cfg.class_weight == "balanced" and weights == pytest.approx([5 / 9, 5])


def test_the_guardrail_weighs_classes_as_logreg_does_on_its_own(monkeypatch):
    """A neural model's square-root weights are its own: the baseline beside it takes logreg's full ones."""
    from docattn.models.baselines import TfidfBaseline
    from docattn.training.trainer import fit_guardrail

    seen = []
    fit = TfidfBaseline.fit_encoded
    monkeypatch.setattr(
        TfidfBaseline,
        "fit_encoded",
        lambda self, enc, *a, **kw: seen.append(kw["class_weights"]) or fit(self, enc, *a, **kw),
    )
    from docattn.data.corpus import to_corpus

    labels = ["fruit"] * 80 + ["vehicle"] * 20
    data = prepare(to_corpus(_keyword_corpus(100).texts, labels), None, None, DataSettings(min_count=1))
    counts = np.bincount(data.splits["train"].labels)
    full = len(data.splits["train"]) / (2 * counts)
    named = {"fruit": 2.0, "vehicle": 3.0}
    for option, given, logreg in [
        ("sqrt_balanced", np.sqrt(full), full),
        ("balanced", full, full),
        (named, np.array([2.0, 3.0]), np.array([2.0, 3.0])),
        (None, None, None),
    ]:
        seen.clear()
        fit_guardrail(data, TrainConfig(class_weight=option), given)
        assert seen[0] is None if logreg is None else seen[0] == pytest.approx(logreg), option


def test_class_weights_reach_the_loss():
    import torch

    from docattn.models import create_model
    from docattn.training.engine import ClassifierModule
    from docattn.training.inference import make_batch

    sp = synthetic.make_splits(n_train=40, n_test=4, seed=1)
    data = prepare(sp["train"], None, None, DataSettings(min_count=1))
    torch.manual_seed(0)
    model = create_model(
        "han", vocab_size=len(data.vocab), num_classes=len(data.labels), embedding_dim=8, hidden_size=4, context_dim=4
    )
    batch = make_batch(data.splits["train"], np.arange(8), "hierarchical", {})
    cfg = TrainConfig(max_epochs=1, monitor="val_acc")
    plain = ClassifierModule(model, cfg)
    plain.log = lambda *a, **k: None
    weights = np.linspace(0.5, 2.0, len(data.labels))
    weighed = ClassifierModule(model, cfg, weights)
    weighed.log = lambda *a, **k: None
    model.eval()
    with torch.no_grad():
        logits = model(batch).logits.float()
        expected = torch.nn.functional.cross_entropy(
            logits, batch.labels, weight=torch.tensor(weights, dtype=torch.float32)
        )
    assert float(weighed.training_step(batch, 0).detach()) == pytest.approx(float(expected), rel=1e-5)
    assert float(plain.training_step(batch, 0).detach()) != pytest.approx(float(expected), rel=1e-3)


def test_smoothed_loss_weighs_each_document_by_its_own_class():
    import torch
    import torch.nn.functional as F

    from docattn.training.engine import weighted_cross_entropy

    torch.manual_seed(0)
    logits, labels, weights = torch.randn(32, 5), torch.randint(0, 5, (32,)), torch.rand(5) + 0.1
    # one of the two alone: PyTorch's own loss
    assert float(weighted_cross_entropy(logits, labels, None, 0.1)) == pytest.approx(
        float(F.cross_entropy(logits, labels, label_smoothing=0.1)), rel=1e-6
    )
    assert float(weighted_cross_entropy(logits, labels, weights, 0.0)) == pytest.approx(
        float(F.cross_entropy(logits, labels, weight=weights)), rel=1e-6
    )
    # both: each document's smoothed loss, weighed by its class's weight
    target = F.one_hot(labels, 5) * 0.9 + 0.1 / 5
    each = -(target * F.log_softmax(logits, -1)).sum(-1)
    w = weights[labels]
    expected = float((w * each).sum() / w.sum())
    assert float(weighted_cross_entropy(logits, labels, weights, 0.1)) == pytest.approx(expected)
    # R8's balanced weights: a batch of its largest class must prefer being right to spreading onto the rarest
    r8 = torch.tensor([0.24, 0.43, 2.7, 2.7, 3.1, 3.6, 6.4, 16.8])
    common = torch.zeros(64, dtype=torch.long)
    right = torch.tensor([5.0, 0, 0, 0, 0, 0, 0, 0]).expand(64, -1)
    spread = torch.tensor([1.0, 0, 0, 0, 0, 0, 0, 2.0]).expand(64, -1)
    assert weighted_cross_entropy(right, common, r8, 0.1) < weighted_cross_entropy(spread, common, r8, 0.1)
    assert F.cross_entropy(right, common, weight=r8, label_smoothing=0.1) > F.cross_entropy(
        spread, common, weight=r8, label_smoothing=0.1
    )  # what PyTorch's weighted smoothing did, and why it is not used


def test_linear_baselines_take_class_weights():
    sp = synthetic.make_splits(n_train=200, n_test=10, seed=3)
    data = prepare(sp["train"], None, None, DataSettings(min_count=1))
    from docattn.models import create_model

    enc = data.splits["train"]
    for name in ("logreg", "nb"):
        plain = create_model(name, vocab_size=len(data.vocab), num_classes=len(data.labels)).fit_encoded(enc)
        heavy = np.ones(len(data.labels))
        heavy[0] = 50.0
        weighed = create_model(name, vocab_size=len(data.vocab), num_classes=len(data.labels)).fit_encoded(
            enc, class_weights=heavy
        )
        p0, w0 = plain.predict_proba_encoded(enc)[:, 0].mean(), weighed.predict_proba_encoded(enc)[:, 0].mean()
        assert w0 > p0, name  # class 0 weighed up: more probability on it


# ----------------------------------------------------------------------------------------- guardrail
def _keyword_corpus(n: int, seed: int = 0):
    """Two classes told apart by which of two word sets a document uses: a bag of words gets all of them."""
    from docattn.data.corpus import to_corpus

    rng = np.random.default_rng(seed)
    words = [["apple", "pear", "plum", "fig", "lime", "kiwi"], ["train", "boat", "car", "plane", "bus", "tram"]]
    filler = ["the", "a", "one", "some", "and", "then", "this", "that"]
    labels = [i % 2 for i in range(n)]
    texts = [" ".join(rng.choice(words[y] + filler, 12)) + " ." for y in labels]
    return to_corpus(texts, [["fruit", "vehicle"][y] for y in labels])


def test_the_guardrail_fits_the_baseline_and_warns_when_the_model_is_behind(tmp_path):
    data = prepare(_keyword_corpus(300), None, _keyword_corpus(40, seed=1), DataSettings(min_count=2))
    # one epoch at a rate that barely moves the weights: a model far under the baseline
    clf = DocumentClassifier("han", embeddings="random", max_epochs=1, lr=1e-6, **TINY).fit_prepared(
        data, run_dir=tmp_path / "run"
    )
    base = clf.results["baseline"]
    assert base["model"] == "logreg" and base["documents"] == len(data.splits["train"]) and not base["sampled"]
    assert set(base) >= {"valid", "test"} and base["valid"]["accuracy"] > 0.9
    assert clf.results["guardrail"]["behind"] is True
    assert (tmp_path / "run" / "baseline" / "model.safetensors").exists()
    off = DocumentClassifier("han", embeddings="random", max_epochs=1, guardrail=False, **TINY).fit_prepared(data)
    assert "baseline" not in off.results
    corpus = _keyword_corpus(300)
    with pytest.warns(UserWarning, match="under the tf-idf baseline"):  # the Python API is told too
        DocumentClassifier("han", embeddings="random", max_epochs=1, lr=1e-6, **TINY).fit(corpus.texts, corpus.labels)


def test_the_guardrail_advises_only_what_the_run_has_not_tried():
    from docattn.training.config import TrainConfig
    from docattn.training.trainer import guardrail_advice

    cut_short = {"best": {"epoch": 4}, "stopped_early": False, "stopped_on_budget": False}
    advice = guardrail_advice(TrainConfig(max_epochs=5, word2vec_epochs=12), cut_short)
    assert "train longer (--epochs 10)" in advice and "word2vec_epochs=50" in advice and "word2vec_text" in advice
    stopped = {"best": {"epoch": 2}, "stopped_early": True}
    advice = guardrail_advice(TrainConfig(max_epochs=9, word2vec_epochs=50, word2vec_text="more.txt"), stopped)
    assert "longer" not in advice and "word2vec_text" not in advice and "--embeddings FILE" in advice
    advice = guardrail_advice(TrainConfig(max_epochs=9, embeddings="random"), {"stopped_on_budget": True})
    assert "--max-time" in advice and "--embeddings word2vec" in advice and advice.endswith("(--model logreg)")


def test_train_prints_both_scores_and_the_warning(tmp_path):
    synthetic.write_jsonl(_keyword_corpus(300), tmp_path / "train.jsonl")
    env = {**os.environ, "DOCATTN_CACHE": str(tmp_path / "cache"), "COLUMNS": "400"}  # one message, one line
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "docattn",
            "train",
            "--train",
            str(tmp_path / "train.jsonl"),
            "--out",
            str(tmp_path / "run"),
            "--epochs",
            "1",
            "--lr",
            "1e-6",
            "--test-fraction",
            "0.2",
            "--set",
            "embeddings=random",
            "--set",
            "embedding_dim=16",
            "--set",
            "hidden_size=8",
            "--set",
            "context_dim=8",
            "--set",
            "min_count=2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert "tf-idf logreg baseline accuracy" in res.stderr and "warning" in res.stderr and "word2vec" in res.stderr
    assert "test: accuracy" in res.stderr  # the held-out fifth was tested on
    evaluated = subprocess.run(
        [
            sys.executable,
            "-m",
            "docattn",
            "evaluate",
            str(tmp_path / "run"),
            "--data",
            str(tmp_path / "train.jsonl"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads(evaluated.stdout)
    seen = report["seen_in_training"]
    assert seen["train"] + seen["valid"] == 240 and "overstate" in evaluated.stderr  # 300 less the 60 tested on
    assert report["baseline"]["documents"] == 300


# ------------------------------------------------------------------------------ data without a test split
def test_test_fraction_is_stratified_seeded_and_disjoint():
    sp = synthetic.make_splits(n_train=400, n_test=10, seed=6)
    a = prepare(sp["train"], None, None, DataSettings(min_count=2, test_fraction=0.25))
    b = prepare(sp["train"], None, None, DataSettings(min_count=2, test_fraction=0.25))
    assert len(a.splits["test"]) == 100 and np.array_equal(a.splits["test"].tokens, b.splits["test"].tokens)
    counts = np.bincount(a.splits["test"].labels)
    assert counts.max() - counts.min() <= 1  # balanced data: each class a quarter of its documents
    total = sum(len(a.splits[k]) for k in ("train", "valid", "test"))
    assert total == 400
    with pytest.raises(DataError, match="test split of its own"):
        prepare(sp["train"], None, sp["test"], DataSettings(min_count=2, test_fraction=0.25))


def test_cv_folds_are_stratified_disjoint_cover_everything_and_are_seeded():
    from docattn.data.splits import held_out_split

    labels = np.array(["a"] * 50 + ["b"] * 30 + ["c"] * 20)
    tests = [held_out_split(labels, None, 5, f, seed=0)[1] for f in range(5)]
    assert sorted(np.concatenate(tests).tolist()) == list(range(100))  # disjoint and covering
    for t in tests:
        assert sorted(np.unique(labels[t], return_counts=True)[1].tolist()) == [4, 6, 10]
    assert all(np.array_equal(t, held_out_split(labels, None, 5, f, seed=0)[1]) for f, t in enumerate(tests))
    assert not np.array_equal(tests[0], held_out_split(labels, None, 5, 0, seed=1)[1])
    train, test = held_out_split(labels, None, 5, 2, seed=0)
    assert not set(train) & set(test) and len(train) + len(test) == 100
    with pytest.raises(DataError, match="smallest class has 3"):
        held_out_split(np.array(["a"] * 10 + ["b"] * 3), None, 5, 0)
    with pytest.raises(ConfigError, match="cv_fold must be from 0 to 4"):
        DataSettings(cv_folds=5, cv_fold=5)


def test_benchmark_cross_validates_and_accepts_data_without_a_test_split(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from docattn.cli import app

    monkeypatch.setenv("DOCATTN_CACHE", str(tmp_path / "cache"))
    synthetic.write_jsonl(synthetic.make_splits(n_train=150, n_test=10, seed=5)["train"], tmp_path / "all.jsonl")
    res = CliRunner().invoke(
        app,
        [
            "benchmark",
            "--data",
            str(tmp_path / "all.jsonl"),
            "--models",
            "nb,logreg",
            "--cv",
            "3",
            "--out",
            str(tmp_path / "cv"),
            "--set",
            "min_count=2",
        ],
    )
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "cv" / "results.json").read_text())
    assert [r["folds"] for r in rows] == [[0, 1, 2], [0, 1, 2]]
    assert sum(t["test_accuracy"] is not None for t in rows[0]["trials"]) == 3
    assert "3-fold cross-validation" in (tmp_path / "cv" / "results.md").read_text()
    res = CliRunner().invoke(
        app,
        [
            "benchmark",
            "--data",
            str(tmp_path / "all.jsonl"),
            "--models",
            "nb",
            "--out",
            str(tmp_path / "split"),
            "--set",
            "min_count=2",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "no test split: 20% of it" in res.output


def test_documents_read_only_in_part_are_counted_per_split():
    from docattn.data.corpus import to_corpus

    long = " . ".join(["a few words here"] * 30) + " ."  # 30 sentences
    texts = [long if i % 10 == 0 else "short text here ." for i in range(60)]
    data = prepare(to_corpus(texts, ["x", "y"] * 30), None, None, DataSettings(min_count=1))
    clf = DocumentClassifier(
        "han", embeddings="random", max_epochs=1, max_sentences=5, guardrail=False, **TINY
    ).fit_prepared(data)
    truncated = clf.results["truncated"]
    assert truncated["limits"]["max_sentences"] == 5
    assert truncated["train"] + truncated["valid"] == 6
    plain = DocumentClassifier("han", embeddings="random", max_epochs=1, guardrail=False, **TINY).fit_prepared(data)
    assert "truncated" not in plain.results  # 1,000 x 1,000 by default: nothing here is cut
