"""Baselines: tf-idf + naive Bayes / logistic regression ("bag"), Kim's CNN, Bi-LSTMs, fastText.

The flat neural baselines also go through every check of test_models.py (shapes, masks,
batch independence, finite gradients); here: what is particular to each baseline, save/load of
the non-neural ones, and a short learning check for each family.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from docattn.classifier import DocumentClassifier
from docattn.data.encoding import EncodedCorpus, encode_ids
from docattn.data.synthetic import make_splits
from docattn.errors import CheckpointError, DocattnError
from docattn.models import create_model, get_spec, list_models
from docattn.training.inference import make_batch

BAG = ["logreg", "nb", "logreg-l1"]
# measured on make_splits(2000, 500) (4 classes, seed 0): logreg 0.878, nb 0.742, logreg-l1 1.0.
# The synthetic labels hide in negated cues ("not good"), which only bigrams capture, and most
# n-grams are distractors: L1 finds the few that matter; naive Bayes counts everything.
BAG_MIN_ACCURACY = {"logreg": 0.85, "nb": 0.70, "logreg-l1": 0.95}
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib", ".pt", ".pth", ".ckpt", ".npy", ".npz")


def hand_made_corpus(docs: list[list[int]], labels=None) -> EncodedCorpus:
    """Documents as id lists, sentences separated by SEP (id 2)."""
    tokens, sent_off, doc_off = encode_ids(docs)
    labels = np.zeros(len(docs), dtype=np.int64) if labels is None else np.asarray(labels, dtype=np.int64)
    return EncodedCorpus(tokens, sent_off, doc_off, labels)


@pytest.fixture(scope="module")
def synthetic():
    return make_splits(2000, 500)


@pytest.fixture(scope="module")
def fitted_bag(synthetic):
    """Each bag model fitted once on the synthetic training split (each fit takes about a second)."""
    cache: dict[str, DocumentClassifier] = {}

    def get(name: str) -> DocumentClassifier:
        if name not in cache:
            cache[name] = DocumentClassifier(name).fit(synthetic["train"].texts, synthetic["train"].labels)
        return cache[name]

    return get


@pytest.fixture
def one_thread():
    """Torch on one thread: on a shared 2-core machine, two OpenMP threads ran several times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --------------------------------------------------------------------------- registry


def test_baselines_are_registered_with_their_layouts():
    layouts = {n: get_spec(n).layout for n in list_models()}
    for name in BAG:
        assert layouts[name] == "bag"
    for name in ("kim-cnn", "bilstm", "bilstm-max", "bilstm-attention", "fasttext"):
        assert layouts[name] == "flat"
        assert get_spec(name).training.get("optimizer") == "adam"
    assert get_spec("logreg-l1").defaults == {"classifier": "logreg", "penalty": "l1", "C": 1.0}
    assert get_spec("nb").defaults["alpha"] == 0.1 and get_spec("logreg").defaults["C"] == 10.0


def test_l1_penalty_reaches_every_supported_scikit_learn(monkeypatch):
    """scikit-learn < 1.8 ignores l1_ratio outside elastic-net: logreg-l1 must pass penalty there."""
    import sklearn

    from docattn.models.baselines import _penalty_arguments

    monkeypatch.setattr(sklearn, "__version__", "1.7.2")
    assert _penalty_arguments("l1") == {"penalty": "l1"} and _penalty_arguments("l2") == {"penalty": "l2"}
    monkeypatch.setattr(sklearn, "__version__", "1.10.0rc1")
    assert _penalty_arguments("l1") == {"l1_ratio": 1.0} and _penalty_arguments("l2") == {"l1_ratio": 0.0}


# --------------------------------------------------------------------------- tf-idf features


def test_ngrams_never_cross_document_boundaries():
    from docattn.models.baselines import ngram_keys

    V = 10
    enc = hand_made_corpus([[3, 4, 2, 5], [6, 7], [8]])  # doc 0 has two sentences: [3 4] [5]
    docs, keys = ngram_keys(enc, V, 2)
    pairs = sorted(zip(docs.tolist(), keys.tolist()))
    bigram = lambda a, b: V + a * V + b  # noqa: E731
    expected = [(0, 3), (0, 4), (0, 5), (0, bigram(3, 4)), (0, bigram(4, 5)), (1, 6), (1, 7), (1, bigram(6, 7)), (2, 8)]
    assert pairs == sorted(expected)
    assert bigram(5, 6) not in keys and bigram(7, 8) not in keys  # across documents: never
    # trigrams get their own key range and also stay inside documents
    docs3, keys3 = ngram_keys(enc, V, 3)
    trigrams = keys3[keys3 >= V + V * V]
    assert sorted(trigrams.tolist()) == [V + V * V + 345]


def test_fit_keeps_ngrams_by_document_frequency():
    model = create_model("logreg", vocab_size=10, num_classes=2, min_df=2)
    # (3, 4) occurs in three documents, 9 three times but in one document only
    enc = hand_made_corpus([[3, 4, 9, 9, 9], [3, 4, 5], [3, 4, 6], [7, 8]], labels=[0, 0, 1, 1])
    model.fit_encoded(enc)
    assert model.arrays["feature_keys"].tolist() == [3, 4, 10 + 34]
    # a document with no known n-gram scores on the biases alone, without NaN
    probs = model.predict_proba_encoded(hand_made_corpus([[7], [3, 4]]))
    assert np.isfinite(probs).all()
    np.testing.assert_allclose(probs.sum(1), 1.0)


def test_tfidf_matches_sklearn():
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import TfidfTransformer

    from docattn.models.baselines import tfidf

    rng = np.random.default_rng(0)
    dense = rng.integers(1, 5, (30, 40)) * (rng.random((30, 40)) < 0.2)
    dense[3] = 0  # an empty row
    counts = sp.csr_matrix(dense)
    for sublinear in (True, False):
        ref = TfidfTransformer(sublinear_tf=sublinear).fit(counts)
        np.testing.assert_allclose(
            tfidf(counts, ref.idf_, sublinear).toarray(), ref.transform(counts).toarray(), atol=1e-12
        )


# --------------------------------------------------------------------------- bag models end to end


@pytest.mark.parametrize("name", BAG)
def test_bag_models_learn_synthetic(name, synthetic, fitted_bag):
    clf = fitted_bag(name)
    accuracy = clf.score(synthetic["test"].texts, synthetic["test"].labels)
    assert accuracy >= BAG_MIN_ACCURACY[name], f"{name}: test accuracy {accuracy:.3f}"
    assert clf.results["train_seconds"] > 0 and "valid" in clf.results


@pytest.mark.parametrize("name", ["logreg", "nb"])
def test_bag_save_load_round_trip(name, synthetic, fitted_bag, tmp_path):
    clf = fitted_bag(name)
    texts = synthetic["test"].texts[:100]
    before = clf.predict_proba(texts)
    run = clf.save(tmp_path / "run")
    files = sorted(p.name for p in Path(run).iterdir())
    assert files == [
        ".docattn-files.json",
        "config.json",
        "model.safetensors",
        "vocab.json",
    ]  # + what docattn wrote there
    modes = {p.name: p.stat().st_mode & 0o777 for p in Path(run).iterdir()}
    assert modes["model.safetensors"] == modes["config.json"]  # not a private 0600 file among 0644 ones
    assert clf.model.n_parameters() == clf.model.arrays["weight"].size + clf.model.arrays["bias"].size > 0
    for p in Path(run).iterdir():
        assert not p.name.endswith(PICKLE_SUFFIXES)
        assert not p.read_bytes().startswith(b"\x80"), f"{p.name} looks like a pickle"
    loaded = DocumentClassifier.load(run)
    after = loaded.predict_proba(texts)
    assert np.array_equal(before, after)  # bit-identical
    assert loaded.classes_ == clf.classes_ and loaded.model.hparams() == clf.model.hparams()


def test_bag_checkpoint_errors(synthetic, fitted_bag, tmp_path):
    from docattn.training.run import load_run

    clf = fitted_bag("nb")
    run = Path(clf.save(tmp_path / "run"))
    weights = run / "model.safetensors"
    data = weights.read_bytes()
    # built for another number of classes or another vocabulary: mismatch
    for kwargs in ({"num_classes": 3, "vocab_size": len(clf.vocab)}, {"num_classes": 4, "vocab_size": 7}):
        with pytest.raises(CheckpointError, match="does not match"):
            create_model("nb", **kwargs).load_artifacts(run)
    with pytest.raises(CheckpointError, match="does not match"):  # an nb file read as logreg
        create_model("logreg", vocab_size=len(clf.vocab), num_classes=4).load_artifacts(run)
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError):
        load_run(run)
    weights.unlink()
    with pytest.raises(CheckpointError, match="missing"):
        load_run(run)
    assert not any(p.name.endswith(".tmp") for p in run.iterdir())


def test_bag_model_unfitted_and_forward(synthetic, fitted_bag):
    with pytest.raises(DocattnError, match="not fitted"):
        create_model("logreg", vocab_size=10, num_classes=2).predict_proba_encoded(hand_made_corpus([[3]]))
    clf = fitted_bag("logreg")
    enc = clf.encode(synthetic["test"].texts[:20])
    model = clf.model
    assert next(model.parameters()).device.type == "cpu"  # code written for neural models still works
    out = model(make_batch(enc, np.arange(20), model.layout, {}), return_attention=True)
    np.testing.assert_allclose(out.logits.exp().numpy(), model.predict_proba_encoded(enc), atol=1e-6)
    assert out.attentions == {}
    items = clf.explain(synthetic["test"].texts[:2])  # no attention: explained by its exact linear decomposition
    assert [it["method"] for it in items] == ["linear", "linear"]
    assert all(sum(it["token_contributions"]) + it["bias"] == pytest.approx(it["logit"]) for it in items)


# --------------------------------------------------------------------------- Kim CNN


def test_kim_cnn_documents_shorter_than_the_widest_window():
    torch.manual_seed(0)
    model = create_model("kim-cnn", vocab_size=30, num_classes=3, embedding_dim=8, feature_maps=6).eval()
    enc = hand_made_corpus([[5], [6, 7], [8, 9, 10, 11], list(range(3, 20))])  # 1, 2, 4 and 17 words
    batch = make_batch(enc, np.arange(4), "flat", {})
    out = model(batch, return_attention=True)
    assert torch.isfinite(out.logits).all()
    for d in range(3):
        alone = model(make_batch(enc, [d], "flat", {}), return_attention=True)
        torch.testing.assert_close(alone.logits[0], out.logits[d], atol=1e-5, rtol=1e-4)
        n = int(batch.mask[d].sum())
        torch.testing.assert_close(alone.attentions["token"][0, :n], out.attentions["token"][d, :n])
    w = out.attentions["token"]
    torch.testing.assert_close(w.sum(1), torch.ones(4))
    assert torch.all(w[~batch.mask] == 0)
    # one word: every map's only window covers it
    assert float(w[0, 0]) == pytest.approx(1.0)
    # two words: every window starts at word 0 and covers both, so each gets half
    torch.testing.assert_close(w[1, :2], torch.tensor([0.5, 0.5]))


# --------------------------------------------------------------------------- Bi-LSTM


def test_bilstm_max_attribution_counts_pooled_dimensions():
    from docattn.models.layers import max_pool_shares as max_share

    h = torch.tensor([[[1.0, 0.0, 5.0], [2.0, 3.0, 0.0], [9.0, 9.0, 9.0]]])  # (1, T=3, D=3), last is padding
    mask = torch.tensor([[True, True, False]])
    torch.testing.assert_close(max_share(h, mask), torch.tensor([[1 / 3, 2 / 3, 0.0]]))


# --------------------------------------------------------------------------- fastText


def test_fasttext_bigram_hashing_is_deterministic():
    from docattn.models.fasttext import HASH_MULTIPLIER, hash_ngrams

    buckets = 1000
    a = torch.tensor([[5, 7, 9, 0, 0], [3, 5, 7, 9, 11]])
    h = hash_ngrams(a, 2, buckets)  # (2, 4)
    assert h.shape == (2, 4) and h.dtype == torch.int64
    assert int(h[0, 0]) == (5 * HASH_MULTIPLIER + 7) % buckets
    assert h[0, 0] == h[1, 1] and h[0, 1] == h[1, 2]  # same bigram, same bucket, wherever it is
    assert torch.equal(hash_ngrams(a, 2, buckets), h)  # same call, same result
    assert torch.equal(hash_ngrams(a[1:, 1:], 2, buckets), h[1:, 1:])  # independent of batch and offset
    big = torch.tensor([[10**6, 2 * 10**6, 3 * 10**6]])
    for n in (2, 3):
        hb = hash_ngrams(big, n, 2**31 - 1)
        assert torch.all((hb >= 0) & (hb < 2**31 - 1))  # no int64 overflow


def test_fasttext_averages_words_and_bigrams_of_real_tokens():
    from docattn.models.fasttext import hash_ngrams

    torch.manual_seed(0)
    model = create_model("fasttext", vocab_size=20, num_classes=2, embedding_dim=4, buckets=50).eval()
    with torch.no_grad():
        model.classifier.weight.normal_()
    enc = hand_made_corpus([[3, 4, 5], [6, 7, 8, 9, 10, 11]])
    batch = make_batch(enc, [0, 1], "flat", {})
    ids = torch.tensor([3, 4, 5])
    bigrams = hash_ngrams(ids[None], 2, 50)[0]
    doc = torch.cat([model.embedding(ids), model.ngram_embedding(bigrams)]).mean(0)  # 3 words + 2 bigrams
    out = model(batch, return_attention=True)
    torch.testing.assert_close(out.logits[0], model.classifier(doc))
    assert out.attentions == {}


# --------------------------------------------------------------------------- learning checks


@pytest.fixture(scope="module")
def easy_splits():
    """Two classes, 1-3 sentences per document: the label's sentence is a large share of the text."""
    return make_splits(1500, 300, n_classes=2, min_sentences=1, max_sentences=3)


# small sizes, batch 16 and a higher rate so two epochs on 1,350 documents are enough (~3-10 s each)
QUICK = {
    "kim-cnn": {"embedding_dim": 32, "feature_maps": 32, "lr": 3e-3},
    "bilstm": {"embedding_dim": 32, "hidden_size": 32, "lr": 3e-3},
    "fasttext": {"embedding_dim": 32, "buckets": 20_000},
}


@pytest.mark.parametrize("name", list(QUICK))
def test_neural_baselines_learn(name, easy_splits, one_thread, tmp_path):
    train, test = easy_splits["train"], easy_splits["test"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on worker counts
        clf = DocumentClassifier(
            name, max_epochs=2, embeddings="random", progress=False, min_count=2, batch_size=16, **QUICK[name]
        )
        clf.fit(train.texts, train.labels, run_dir=tmp_path / "run")
    accuracy = clf.score(test.texts, test.labels)
    # measured: kim-cnn 0.95, bilstm 0.86, fasttext 0.93 (chance 0.5)
    assert accuracy >= 0.75, f"{name}: test accuracy {accuracy:.3f} after 2 epochs"
    loaded = DocumentClassifier.load(tmp_path / "run")
    np.testing.assert_allclose(loaded.predict_proba(test.texts[:20]), clf.predict_proba(test.texts[:20]), atol=1e-6)


# --------------------------------------------------------------------------- the fastText library (optional extra)


def test_fasttext_library_learns_saves_and_guards_its_file(tmp_path, monkeypatch):
    pytest.importorskip("fasttext", reason="the optional fastText library: pip install 'docattn[fasttext]'")
    rng = np.random.default_rng(0)
    filler = [f"w{i}" for i in range(200)]
    cues = {"pos": ["great", "superb", "loved"], "neg": ["awful", "boring", "hated"]}

    def docs(n):
        labels = rng.choice(["pos", "neg"], n).tolist()
        texts = [" ".join([*rng.choice(filler, 30), *rng.choice(cues[y], 2)]) + " ." for y in labels]
        return texts, labels

    (train_x, train_y), (test_x, test_y) = docs(600), docs(200)
    by_label = np.argsort(train_y, kind="stable")  # sorted by label, as IMDB's files are: must not matter
    train_x, train_y = [train_x[i] for i in by_label], [train_y[i] for i in by_label]
    clf = DocumentClassifier("fasttext-lib", learning_rate=0.5, bucket=100_000).fit(train_x, train_y)
    assert clf.score(test_x, test_y) >= 0.95  # measured 1.0; chance 0.5
    probs = clf.predict_proba(test_x[:20])
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-6)
    run = clf.save(tmp_path / "run")
    np.testing.assert_array_equal(DocumentClassifier.load(run).predict_proba(test_x[:20]), probs)
    assert not [p for p in Path(run).iterdir() if p.suffix in PICKLE_SUFFIXES]
    binary = Path(run) / "fasttext.bin"
    binary.write_bytes(binary.read_bytes()[:1000])  # truncated: the library itself would not notice
    with pytest.raises(CheckpointError, match="SHA-256"):
        DocumentClassifier.load(run)
    monkeypatch.setitem(__import__("sys").modules, "fasttext", None)  # the extra not installed
    from docattn.errors import ConfigError

    with pytest.raises(ConfigError, match=r"pip install 'docattn\[fasttext\]'"):
        DocumentClassifier("fasttext-lib").fit(train_x, train_y)


def test_fasttext_library_reads_its_training_lines_shuffled():
    """The library reads its file in order; label-sorted lines (IMDB's files) left it predicting one class."""
    from docattn.models.fasttext_lib import _shuffled

    lines = [f"__label__{0 if i < 500 else 1} w{i}" for i in range(1000)]
    once, again, other = _shuffled(lines, 0), _shuffled(lines, 0), _shuffled(lines, 1)
    assert sorted(once) == sorted(lines) and once == again and once != other
    first_half = [line.split()[0] for line in once[:500]]
    assert 200 < first_half.count("__label__0") < 300  # both labels throughout, not one block after the other
