"""Training's first embeddings: vectors from a GloVe file, frozen random ones, word2vec trained and cached."""

from __future__ import annotations

import numpy as np
import pytest

from docattn.classifier import DocumentClassifier
from docattn.errors import ConfigError, DataError

TINY = dict(embedding_dim=16, hidden_size=8, context_dim=8, progress=False, min_count=2)


def test_embeddings_from_glove_file(data, tmp_path):
    words = data.vocab.tokens[3:13]
    glove = tmp_path / "glove.txt"
    glove.write_text(
        "".join(f"{w} " + " ".join(["0.5"] * 16) + "\n" for w in words) + "zzzunseen " + " ".join(["1"] * 16) + "\n"
    )
    clf = DocumentClassifier("han", max_epochs=1, embeddings=str(glove), freeze_embeddings=True, **TINY).fit_prepared(
        data
    )
    cov = clf.results["coverage"]
    assert cov["words"] == 10 and 0 < cov["token_share"] <= 1
    emb = clf.model.embedding.weight
    assert not emb.requires_grad
    np.testing.assert_allclose(emb[data.vocab.index[words[0]]].detach().numpy(), 0.5)
    bad = tmp_path / "bad.txt"
    bad.write_text("x 1 2\ny 1\n")
    with pytest.raises((DataError, ConfigError)):
        DocumentClassifier("han", max_epochs=1, embeddings=str(bad), **TINY).fit_prepared(data)


def test_frozen_random_embeddings_stay_as_they_started(data):
    """freeze_embeddings holds for the model's own random vectors too, not only for loaded ones."""
    import copy

    clf = DocumentClassifier("han", max_epochs=1, embeddings="random", freeze_embeddings=True, **TINY)
    seen = {}
    from docattn.training import trainer

    real = trainer.init_embeddings

    def spy(model, d, cfg):
        info = real(model, d, cfg)
        seen["start"] = copy.deepcopy(model.embedding.weight.detach())
        return info

    trainer.init_embeddings = spy
    try:
        clf.fit_prepared(data)
    finally:
        trainer.init_embeddings = real
    assert not clf.model.embedding.weight.requires_grad
    assert bool((clf.model.embedding.weight.detach() == seen["start"]).all())


def test_word2vec_initialisation(data):
    from docattn.data.embeddings import train_word2vec

    m = train_word2vec(data.splits["train"], data.vocab, dim=16, epochs=1, workers=1)
    assert m.shape == (len(data.vocab), 16) and np.all(m[0] == 0) and np.isfinite(m).all()
    sg = train_word2vec(data.splits["train"], data.vocab, dim=16, epochs=1, workers=1, skipgram=True)
    assert sg.shape == m.shape and np.isfinite(sg).all() and not np.allclose(sg[3:], m[3:])
    again = train_word2vec(data.splits["train"], data.vocab, dim=16, epochs=1, workers=1, skipgram=True)
    np.testing.assert_array_equal(sg, again)  # one worker thread: reproducible


def test_word2vec_with_one_worker_is_the_same_in_another_process(data, tmp_path):
    """gensim seeds each word's start vector with a hash of it; Python's str hash differs per process."""
    import os
    import subprocess
    import sys

    from docattn.data.embeddings import train_word2vec

    here = train_word2vec(data.splits["train"], data.vocab, dim=16, epochs=1, workers=1)
    code = (
        "import numpy as np; from docattn.data import synthetic; "
        "from docattn.data.prepare import prepare, DataSettings; "
        "from docattn.data.embeddings import train_word2vec; "
        "sp = synthetic.make_splits(n_train=300, n_test=100, seed=5); "
        "d = prepare(sp['train'], None, sp['test'], DataSettings(min_count=2)); "
        f"np.save({str(tmp_path / 'there.npy')!r}, "
        "train_word2vec(d.splits['train'], d.vocab, dim=16, epochs=1, workers=1))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONHASHSEED": "12345"})
    np.testing.assert_array_equal(here, np.load(tmp_path / "there.npy"))


def test_word2vec_reads_extra_unlabelled_text(data, tmp_path):
    """Text from word2vec_text moves the vectors, is cached under its own name, and needs word2vec."""
    from docattn.training.config import TrainConfig
    from docattn.training.trainer import _cached_word2vec

    words = data.vocab.tokens[3:40]
    extra = tmp_path / "unlabelled.txt"
    extra.write_text("".join(" ".join(words[i:] + words[:i]) + "\n" for i in range(200)), encoding="utf-8")
    data.info["cache"] = str(tmp_path)
    try:
        plain = _cached_word2vec(data, 16, TrainConfig(word2vec_epochs=1))
        more = _cached_word2vec(data, 16, TrainConfig(word2vec_epochs=1, word2vec_text=str(extra)))
    finally:
        data.info.pop("cache")
    assert more.shape == plain.shape and not np.allclose(more[3:40], plain[3:40])
    assert len(list(tmp_path.glob("word2vec-x*-d16-e1-s0.npy"))) == 1 and (tmp_path / "word2vec-d16-e1-s0.npy").exists()
    with pytest.raises(ConfigError, match="word2vec_text"):
        TrainConfig(embeddings="random", word2vec_text=str(extra))
    with pytest.raises(DataError, match="no such"):
        DocumentClassifier("han", max_epochs=1, word2vec_text=str(tmp_path / "missing.txt"), **TINY).fit_prepared(data)


def test_skipgram_vectors_are_cached_apart_from_cbow(data, tmp_path):
    """A skip-gram run never reads CBOW vectors cached for the same corpus, size, epochs and seed."""
    from docattn.training.config import TrainConfig
    from docattn.training.trainer import _cached_word2vec

    data.info["cache"] = str(tmp_path)
    try:
        cbow = _cached_word2vec(data, 16, TrainConfig(word2vec_epochs=1))
        sg = _cached_word2vec(data, 16, TrainConfig(word2vec_epochs=1, word2vec_skipgram=True))
        sg_again = _cached_word2vec(data, 16, TrainConfig(word2vec_epochs=1, word2vec_skipgram=True))
    finally:
        data.info.pop("cache")
    assert (tmp_path / "word2vec-d16-e1-s0.npy").exists() and (tmp_path / "word2vec-sg-d16-e1-s0.npy").exists()
    assert not np.allclose(sg[3:], cbow[3:])
    np.testing.assert_array_equal(sg, sg_again)


def test_pre_trained_vectors_set_the_embedding_width_unless_one_is_asked_for(tmp_path, data):
    """A 300-d GloVe file or the 256-d packaged table needs no embedding_dim: the model takes the vectors'
    width. One asked for that differs is still an error naming the width to set."""
    from docattn.data.embeddings import vector_dim

    words = data.vocab.tokens[3:40]
    glove = tmp_path / "vectors.txt"
    glove.write_text(
        "".join(
            f"{w} " + " ".join(f"{(i * 7 + j) % 5 / 10:.1f}" for j in range(12)) + "\n" for i, w in enumerate(words)
        )
    )
    assert vector_dim(str(glove)) == 12 and vector_dim("wordllama") == 256 and vector_dim(str(tmp_path / "no")) is None
    options = {k: v for k, v in TINY.items() if k != "embedding_dim"}
    clf = DocumentClassifier("han", max_epochs=1, embeddings=str(glove), **options).fit_prepared(data)
    assert clf.model.embedding.weight.shape[1] == 12
    with pytest.raises(
        ConfigError, match=r"vectors are 12-d but the model's embedding is 16-d \(set embedding_dim=12\)"
    ):
        DocumentClassifier("han", max_epochs=1, embeddings=str(glove), **TINY).fit_prepared(data)


def test_word2vec_can_start_from_the_packaged_table(data, tmp_path):
    """word2vec_start=wordllama: word2vec begins at the packaged vectors' principal components instead of its own
    random ones, so its vectors differ from a random start's, are cached apart, and need word2vec as the embeddings."""
    from docattn.data.embeddings import start_vectors, train_word2vec
    from docattn.training.config import TrainConfig
    from docattn.training.trainer import _cached_word2vec

    start, coverage = start_vectors("wordllama", data.vocab, 16, spread=0.3)
    assert start.shape == (len(data.vocab), 16) and not start[:3].any() and abs(start[3:].std() - 0.3) < 1e-3
    assert coverage.words_found == len(data.vocab) - 3
    sizes = np.linalg.svd(start[3:] - start[3:].mean(axis=0), compute_uv=False)
    assert np.all(np.diff(sizes) <= 1e-4)  # principal components, largest first
    random_start = train_word2vec(data.splits["train"], data.vocab, dim=16, epochs=1, workers=1)
    from_table = train_word2vec(data.splits["train"], data.vocab, dim=16, epochs=1, workers=1, start=start)
    assert not np.allclose(from_table[3:], random_start[3:])
    # one pass moves the vectors from where they started, but they stay closer to it than a random start is
    assert 0 < np.abs(from_table[3:] - start[3:]).mean() < np.abs(random_start[3:] - start[3:]).mean()
    data.info["cache"] = str(tmp_path)
    try:
        cached = _cached_word2vec(data, 16, TrainConfig(word2vec_epochs=1, word2vec_workers=1))
        started = _cached_word2vec(
            data, 16, TrainConfig(word2vec_epochs=1, word2vec_workers=1, word2vec_start="wordllama")
        )
    finally:
        data.info.pop("cache")
    np.testing.assert_array_equal(cached, random_start)
    np.testing.assert_array_equal(started, from_table)
    assert (tmp_path / "word2vec-w1-iwordllama-d16-e1-s0.npy").exists()
    with pytest.raises(ConfigError, match="word2vec_start starts word2vec"):
        TrainConfig(embeddings="random", word2vec_start="wordllama")
    with pytest.raises(ConfigError, match="word2vec_start must be random or wordllama, got 'glove'"):
        TrainConfig(word2vec_start="glove")
    wide, _ = start_vectors("wordllama", data.vocab, 300, spread=0.3)  # a 300-d model: 256 from the table, 44 random
    full, _ = start_vectors("wordllama", data.vocab, 256, spread=0.3)
    np.testing.assert_allclose(wide[:, :256], full, rtol=1e-5, atol=1e-6)
    assert abs(wide[3:, 256:].std() - 0.3) < 0.01 and not wide[:3].any()
    with pytest.raises(DataError, match="unknown packaged vectors"):
        start_vectors("glove", data.vocab, 16, spread=0.3)


def test_word2vec_beside_the_packaged_table(data, tmp_path, monkeypatch):
    """embeddings="word2vec+wordllama": the first columns are word2vec's vectors trained on the corpus, the last
    256 the packaged table's; left to the recipe, the width is the model's own plus the table's, and a run loaded
    or resumed from its config keeps that width."""
    from docattn.data.embeddings import packaged_vectors
    from docattn.training.config import TrainConfig
    from docattn.training.trainer import VECTOR_SPREAD, _cached_word2vec

    options = {k: v for k, v in TINY.items() if k != "embedding_dim"}
    clf = DocumentClassifier(
        "han", max_epochs=1, embeddings="word2vec+wordllama", word2vec_epochs=1, word2vec_workers=1, **options
    )
    seen = {}
    from docattn.training import trainer

    real = trainer.init_embeddings

    def spy(model, d, cfg):
        info = real(model, d, cfg)
        seen["start"] = model.embedding.weight.detach().numpy().copy()
        return info

    monkeypatch.setattr(trainer, "init_embeddings", spy)
    clf.fit_prepared(data, run_dir=tmp_path / "run")
    monkeypatch.undo()
    own = clf.model.config.embedding_dim - 256
    assert own == 200  # HAN's registered width, then the table's
    word2vec = _cached_word2vec(data, own, TrainConfig(word2vec_epochs=1, word2vec_workers=1))
    table, _ = packaged_vectors("wordllama", data.vocab, spread=VECTOR_SPREAD)
    np.testing.assert_array_equal(seen["start"][:, :own], word2vec)
    np.testing.assert_array_equal(seen["start"][:, own:], table)
    loaded = DocumentClassifier.load(tmp_path / "run")
    assert loaded.model.config.embedding_dim == 456 and loaded.train_config.embeddings == "word2vec+wordllama"
    from docattn.training.run import resume_options

    _, again = resume_options(tmp_path / "run", None, {})  # what --resume builds the model from: no second 256
    assert DocumentClassifier("han", **again)._sized_hparams({})["embedding_dim"] == 456
    with pytest.raises(ConfigError, match=r"embedding_dim 16 leaves word2vec nothing \(set embedding_dim above 256\)"):
        DocumentClassifier("han", max_epochs=1, embeddings="word2vec+wordllama", **TINY).fit_prepared(data)
    with pytest.raises(ConfigError, match="no packaged vectors 'glove'; available: wordllama"):
        TrainConfig(embeddings="word2vec+glove")
    assert TrainConfig(embeddings="word2vec+wordllama", word2vec_start="wordllama", word2vec_text="x.txt")
