"""Linear explanations and a default explanation for every registered model.

The linear ones must decompose the logit exactly: for every class, the words' contributions plus the bias,
put through the model's own link, give back the model's probabilities.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from scipy.special import expit, softmax

from docattn.classifier import DocumentClassifier, to_corpus
from docattn.data import synthetic
from docattn.errors import ConfigError
from docattn.explain.attention import explain_documents
from docattn.explain.methods import METHODS, model_methods
from docattn.models import create_model, list_models
from docattn.models.contract import is_one_shot

# small enough for two shared cores; each model takes the ones it has
TINY = dict(
    embedding_dim=16,
    hidden_size=8,
    context_dim=8,
    d_model=16,
    heads=2,
    queries=3,
    layers=1,
    feature_maps=8,
    buckets=2000,  # fasttext's n-gram rows
    bucket=2000,  # fasttext-lib's
    dim=8,
    epoch=3,
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def make_splits(n_classes: int):
    return synthetic.make_splits(n_train=200, n_test=12, n_classes=n_classes, seed=5)


def tiny_classifier(name: str, splits, **options) -> DocumentClassifier:
    """``name`` on the synthetic training split: fitted if it is fitted in one call, else as initialised."""
    from docattn.data.prepare import prepare

    if name == "fasttext-lib":
        pytest.importorskip("fasttext")
    known = set(create_model(name, vocab_size=8, num_classes=2).hparams())
    hp = {k: v for k, v in TINY.items() if k in known}
    clf = DocumentClassifier(name, min_count=2, **hp, **options)
    train = splits["train"]
    data = prepare(to_corpus(train.sentences, train.labels), None, None, clf.data_settings)
    clf.vocab, clf.labels = data.vocab, data.labels
    torch.manual_seed(0)
    clf.model = create_model(name, vocab_size=len(data.vocab), num_classes=len(data.labels), **clf.hparams)
    if is_one_shot(clf.model):
        clf.model.fit_encoded(data.splits["train"], data.vocab)
    elif name == "fasttext":  # its output starts at zero, where no word would contribute anything
        with torch.no_grad():
            torch.nn.init.normal_(clf.model.classifier.weight)
            torch.nn.init.normal_(clf.model.classifier.bias)
    clf.model.eval()
    clf.results = {}
    return clf


def _logits(clf, corpus) -> np.ndarray:
    """(documents, classes): each class's logit as the linear explanation of that class gives it, checked to be
    the sum of the words' contributions and the bias."""
    columns = []
    for c in range(len(clf.labels.classes)):
        items = explain_documents(clf, corpus, method="linear", target=c)
        for it in items:
            assert it["method"] == "linear" and it["target"] == clf.labels.classes[c]
            assert sum(it["token_contributions"]) + it["bias"] == pytest.approx(it["logit"], abs=1e-9)
            weights = it["token_weights"]  # shares of |contribution|; an L1 model may give a document none
            assert min(weights) >= 0 and sum(weights) == pytest.approx(1.0 if any(it["token_contributions"]) else 0.0)
        columns.append([it["logit"] for it in items])
    return np.array(columns).T


@pytest.mark.parametrize(
    "name, n_classes, options, link",
    [
        ("nb", 2, {}, "softmax"),
        ("nb", 3, {}, "softmax"),
        ("logreg", 2, {}, "binary"),
        ("logreg", 3, {}, "ovr"),
        ("logreg", 3, {"solver": "lbfgs"}, "softmax"),
        ("logreg-l1", 3, {}, "ovr"),
    ],
)
def test_tfidf_baselines_decompose_their_logits_exactly(name, n_classes, options, link):
    splits = make_splits(n_classes)
    clf = tiny_classifier(name, splits, **options)
    assert clf.model.link == link
    logits = _logits(clf, splits["test"])
    probs = clf.model.predict_proba_encoded(clf.encode(splits["test"].without_labels()))
    if link == "softmax":
        np.testing.assert_allclose(softmax(logits, axis=1), probs, atol=1e-6)
    else:
        p = expit(logits)  # binary: the first class's logit is the negative of the second's
        np.testing.assert_allclose(p / p.sum(1, keepdims=True) if link == "ovr" else p, probs, atol=1e-6)


def test_a_bigram_gives_half_to_each_word_and_an_occurrence_its_share():
    """Hand-set weights: document "a b a" with unigram a (twice) and bigram "a b" kept; b alone was not."""
    from docattn.data.encoding import EncodedCorpus
    from docattn.explain.linear import tfidf_contributions
    from docattn.models.baselines import TfidfBaseline, count_matrix, ngram_keys, tfidf

    V, a, b = 5, 2, 3
    model = TfidfBaseline(V, 2, classifier="logreg")
    keys = np.array([a, V + a * V + b], dtype=np.int64)  # unigram a, bigram (a, b)
    model.arrays = {
        "feature_keys": keys,
        "idf": np.array([1.5, 2.0]),
        "weight": np.array([[0.0, 0.0], [3.0, -4.0]]),
        "bias": np.array([0.1, 0.2]),
        "classes": np.array([0, 1]),
    }
    model.link = "softmax"
    enc = EncodedCorpus(np.array([a, b, a], dtype=np.int32), np.array([0, 3]), np.array([0, 1]), np.array([-1]))
    docs, k = ngram_keys(enc, V, 2)
    hit = np.isin(k, keys)
    x = tfidf(count_matrix(docs[hit], np.searchsorted(keys, k[hit]), 1, 2), model.arrays["idf"], True).toarray()[0]
    out, bias = tfidf_contributions(model, enc, np.array([1]))
    unigram, bigram = 3.0 * x[0], -4.0 * x[1]
    np.testing.assert_allclose(out, [unigram / 2 + bigram / 2, bigram / 2, unigram / 2], atol=1e-12)
    assert bias.tolist() == [0.2]


def test_fasttext_decomposes_its_logits_exactly_within_what_it_reads():
    splits = make_splits(3)
    clf = tiny_classifier("fasttext", splits, max_tokens=9)  # documents cut at 9 words
    corpus = splits["test"]
    from docattn.training.inference import make_batch

    enc = clf.encode(corpus.without_labels())
    with torch.no_grad():  # the model itself, in float64: the reference the float64 decomposition must meet
        batch = make_batch(enc, np.arange(len(enc)), "flat", clf.limits)
        reference = copy.deepcopy(clf.model).double()(batch).logits.numpy()
    logits = _logits(clf, corpus)
    np.testing.assert_allclose(logits, reference, atol=1e-6)
    for it in explain_documents(clf, corpus):  # linear is fasttext's default
        assert it["method"] == "linear" and it["tokens_read"] == 9 < len(it["tokens"])
        assert all(c == 0 for c in it["token_contributions"][9:])  # words it never read weigh nothing


def test_fasttext_library_decomposes_its_logits_as_it_computes_them():
    splits = make_splits(3)
    clf = tiny_classifier("fasttext-lib", splits)
    corpus = splits["test"]
    probs = clf.model.predict_proba_encoded(clf.encode(corpus.without_labels()))
    np.testing.assert_allclose(softmax(_logits(clf, corpus), axis=1), probs, atol=1e-6)


@pytest.fixture(scope="module")
def splits3():
    return make_splits(3)


@pytest.mark.parametrize("name", list_models())
def test_every_registered_model_explains_itself_by_default(name, splits3, tmp_path):
    from docattn.explain.html import write_html

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = tiny_classifier(name, splits3)
    have = model_methods(clf.model)
    texts = splits3["test"].sentences[:3]
    items = clf.explain(texts)
    assert len(items) == 3 and all(it["method"] == have[0] for it in items)
    assert have[0] == ("linear" if name in ("nb", "logreg", "logreg-l1", "fasttext", "fasttext-lib") else "attention")
    for it in items:
        assert it["prediction"] in clf.labels.classes and it["layout"] == clf.model.layout
        if it["layout"] == "hierarchical":
            weights = [w for s in it["sentences"] for w in s["word_weights"]]
            assert all(len(s["word_weights"]) == len(s["tokens"]) for s in it["sentences"])
        else:
            weights = it["token_weights"]
            anything = it["token_contributions"] is None or any(it["token_contributions"])  # L1 may zero them all
            assert len(weights) == len(it["tokens"]) and sum(weights) == pytest.approx(float(anything), abs=1e-4)
        assert all(np.isfinite(w) and w >= -1e-7 for w in weights)
    page = write_html(items, tmp_path / "r.html").read_text()
    assert page.count('class="doc"') == 3
    missing = next(m for m in METHODS if m not in have)
    with pytest.raises(ConfigError, match=f"has no {missing} explanation; its methods: {', '.join(have)}"):
        explain_documents(clf, texts, method=missing)


# ---------------------------------------------------------------- the commands, on a linear run


@pytest.fixture(scope="module")
def nb_run(tmp_path_factory):
    splits = make_splits(3)
    root = tmp_path_factory.mktemp("nb")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DocumentClassifier("nb", min_count=2, progress=False).fit(
            splits["train"].sentences, splits["train"].labels, run_dir=root / "run"
        )
    return root / "run", synthetic.write_jsonl(splits["test"], root / "test.jsonl")


def test_explain_command_explains_a_bag_model_linearly(nb_run, tmp_path):
    import json

    from typer.testing import CliRunner

    from docattn.cli import app

    run, data = nb_run
    html, js = tmp_path / "r.html", tmp_path / "w.json"
    args = ["explain", str(run), "--data", str(data), "--n", "4", "--html", str(html), "--json", str(js)]
    res = CliRunner().invoke(app, [*args, "--target", "negative"])
    assert res.exit_code == 0, res.output
    items = json.loads(js.read_text())
    assert (
        len(items) == 4
        and {it["method"] for it in items} == {"linear"}
        and {it["target"] for it in items} == {"negative"}
    )
    for it in items:
        assert sum(it["token_contributions"]) + it["bias"] == pytest.approx(it["logit"])
    page = html.read_text()
    assert page.count('class="doc"') == 4 and "linear contributions to the logit of" in page
    assert 'class="w neg"' in page  # naive Bayes' coefficients are log-probabilities: every word weighs against
    res = CliRunner().invoke(app, [*args, "--target", "nope"])
    assert res.exit_code != 0 and "--target 'nope' is no class of 'nb'" in str(res.exception)


def test_a_method_the_model_lacks_is_one_clear_line(nb_run):
    from test_explain import subprocess_cli

    run, data = nb_run
    res = subprocess_cli("explain", str(run), "--data", str(data), "--method", "attention", "--html", "/dev/null")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-1500:]
    assert "model 'nb' has no attention explanation; its methods: linear (default linear)" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_faithfulness_ranks_by_linear_contributions(nb_run, tmp_path):
    import json

    from typer.testing import CliRunner

    from docattn.cli import app
    from docattn.explain.faithfulness import faithfulness

    splits = make_splits(3)
    clf = tiny_classifier("logreg", splits)
    out = faithfulness(clf, splits["test"], percents=(10, 20, 50))
    assert list(out["methods"]) == ["linear", "random"] and all(m["available"] for m in out["methods"].values())
    linear, rnd = out["methods"]["linear"], out["methods"]["random"]
    assert linear["aopc_comprehensiveness"] > rnd["aopc_comprehensiveness"]  # its top words are what it decides by
    assert linear["aopc_sufficiency"] < rnd["aopc_sufficiency"]
    asked = faithfulness(clf, splits["test"], methods=["attention", "linear"], percents=(50,))["methods"]
    assert asked["attention"] == {"available": False, "reason": "model 'logreg' has no attention explanation"}
    run, data = nb_run
    res = CliRunner().invoke(app, ["faithfulness", str(run), "--data", str(data), "--n", "6", "--json"])
    assert res.exit_code == 0, res.output
    assert {k: m["available"] for k, m in json.loads(res.stdout)["methods"].items()} == {"linear": True, "random": True}
