"""Explanations of multi-label models: the predicted label sets and their probabilities as ``predict`` gives them,
one attention shown once, and each predicted label's signed attributions beside it, in the JSON and the report."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from test_multilabel import topic_documents


@pytest.fixture(scope="module")
def fitted():
    from docattn.classifier import DocumentClassifier

    texts, labels = topic_documents(400, seed=1)
    torch.set_num_threads(1)
    options = dict(max_epochs=10, batch_size=16, embedding_dim=16, hidden_size=16, progress=False, guardrail=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        han = DocumentClassifier("han", **options).fit(texts[:340], labels[:340])
        logreg = DocumentClassifier("logreg").fit(texts[:340], labels[:340])
    return {"han": han, "logreg": logreg}, texts[340:], labels[340:]


@pytest.mark.parametrize("model, method", [("han", "attention"), ("han", "gradient_x_input"), ("logreg", "linear")])
def test_each_predicted_label_is_explained_beside_the_documents_one_attention(fitted, model, method):
    classifiers, texts, labels = fitted
    clf = classifiers[model]
    items = clf.explain(texts, method=method)
    assert [it["prediction"] for it in items] == clf.predict(texts)  # label sets over the tuned thresholds
    probs = clf.predict_proba(texts)  # one sigmoid per class, not a softmax over classes
    np.testing.assert_allclose([[it["probabilities"][c] for c in clf.classes_] for it in items], probs, atol=1e-5)
    assert any(len(it["prediction"]) > 1 for it in items)
    signed = "gradient_x_input" if method == "attention" else method
    for it in items:
        entries = it["label_attributions"]
        assert [e["label"] for e in entries] == sorted(it["prediction"], key=clf.classes_.index)
        for e in entries:
            assert e["method"] == signed and e["probability"] == pytest.approx(it["probabilities"][e["label"]])
            if model == "han":
                assert len(e["sentences"]) == len(it["sentences"])
                contributions = [c for s in e["sentences"] for c in s["word_contributions"]]
            else:
                contributions = e["token_contributions"]
            assert np.isfinite(contributions).all() and np.abs(contributions).sum() > 0
    # a label is explained by the words of its own topic: its top word belongs to it more often than not
    from test_multilabel import TOPICS

    hits = total = 0
    for it in items:
        tokens = (
            [t for s in it["sentences"] for t in s["tokens"]] if it.get("layout") == "hierarchical" else it["tokens"]
        )
        for e in it["label_attributions"]:
            values = [c for s in e["sentences"] for c in s["word_contributions"]] if "sentences" in e else None
            values = values if values is not None else e["token_contributions"]
            top = tokens[int(np.argmax(values))]
            hits, total = hits + (top in TOPICS[e["label"]].split()), total + 1
    assert total and hits / total > 0.5, (hits, total)


def test_the_report_shows_each_label_block_and_judges_label_sets(fitted, tmp_path):
    from docattn.explain.html import is_correct, write_html

    classifiers, texts, labels = fitted
    items = classifiers["han"].explain(texts[:10])
    for it, gold in zip(items, labels[:10]):
        it["label"] = tuple(gold)
    page = write_html(items, tmp_path / "report.html").read_text()
    assert page.count('<div class="label">') == sum(len(it["label_attributions"]) for it in items)
    assert "gradient &times; input toward" in page
    assert is_correct(("a", "b"), ["b", "a"]) and not is_correct(("a",), ["a", "b"]) and is_correct((), [])
    for it in items:
        verdict = "correct" if set(it["label"]) == set(it["prediction"]) else "wrong"
        assert verdict in page
