"""The multi-label output layer refit: the vectors it reads, when the recipe asks for it, what it records."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from test_multilabel import topic_documents

from docattn.errors import ConfigError


@pytest.fixture(scope="module")
def fitted():
    """A small HAN trained on topic documents (3 classes, label sets), without the refit, and its splits."""
    from docattn.classifier import DocumentClassifier
    from docattn.data.corpus import to_corpus
    from docattn.data.prepare import prepare

    torch.set_num_threads(1)
    texts, labels = topic_documents(400)
    clf = DocumentClassifier(
        "han", max_epochs=4, embedding_dim=16, hidden_size=16, progress=False, guardrail=False, refit_output=False
    )
    data = prepare(to_corpus(texts, labels), settings=clf.data_settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit_prepared(data)
    assert "refit_output" not in clf.results
    return clf, data


def _head(clf):
    return clf.model.classifier.weight.detach().clone(), clf.model.classifier.bias.detach().clone()


def test_document_vectors_are_what_the_output_layer_reads(fitted):
    from docattn.training.inference import document_vectors, predict_logits

    clf, data = fitted
    valid = data.splits["valid"]
    vectors = document_vectors(clf.model, valid, limits=clf.limits)
    weight, bias = _head(clf)
    assert vectors.shape == (len(valid), weight.shape[1])
    logits = predict_logits(clf.model, valid, limits=clf.limits)
    np.testing.assert_allclose(vectors @ weight.numpy().T + bias.numpy(), logits, atol=1e-5)


def test_reading_vectors_or_logits_leaves_the_model_in_its_mode(fitted):
    from docattn.training.inference import document_vectors, predict_logits

    clf, data = fitted
    model, valid = clf.model, data.splits["valid"]
    for read in (document_vectors, predict_logits):
        model.train()
        read(model, valid, limits=clf.limits)
        assert model.training, read.__name__
        model.eval()
        read(model, valid, limits=clf.limits)
        assert not model.training, read.__name__
    with torch.no_grad():  # a forward pass that raises: the mode is restored all the same
        model.train()
        hook = model.classifier.register_forward_hook(lambda *_: (_ for _ in ()).throw(RuntimeError("boom")))
        try:
            with pytest.raises(RuntimeError, match="boom"):
                predict_logits(model, valid, limits=clf.limits)
        finally:
            hook.remove()
        assert model.training
    model.eval()


def test_a_row_that_never_predicts_its_class_is_refit(fitted):
    from docattn.training.refit import refit_output_layer

    clf, data = fitted
    saved = _head(clf)
    try:
        with torch.no_grad():  # class 0 answered "no" for every document, whatever it reads
            clf.model.classifier.weight[0] = 0.0
            clf.model.classifier.bias[0] = -20.0
        record = refit_output_layer(clf, data.splits["train"], data.splits["valid"], None, seed=0)
        assert record["classes_refit"] == 3 and not record["sampled"]
        assert record["documents"] == len(data.splits["train"])
        before, after = record["valid"]["trained"], record["valid"]["refit"]
        assert after["macro_f1"] > before["macro_f1"] and after["micro_f1"] > before["micro_f1"]
        assert clf.model.classifier.weight[0].abs().sum() > 0 and clf.model.classifier.bias[0] > -20.0
    finally:
        with torch.no_grad():
            clf.model.classifier.weight.copy_(saved[0])
            clf.model.classifier.bias.copy_(saved[1])


def test_past_its_cap_the_refit_reads_a_seeded_sample(fitted, monkeypatch):
    from docattn.training import refit

    clf, data = fitted
    saved = _head(clf)
    monkeypatch.setattr(refit, "MAX_DOCUMENTS", 50)
    try:
        first = refit.refit_output_layer(clf, data.splits["train"], data.splits["valid"], None, seed=3)
        rows = clf.model.classifier.weight.detach().clone()
        with torch.no_grad():
            clf.model.classifier.weight.copy_(saved[0])
            clf.model.classifier.bias.copy_(saved[1])
        again = refit.refit_output_layer(clf, data.splits["train"], data.splits["valid"], None, seed=3)
        assert first["sampled"] and first["documents"] == 50 and first["valid"] == again["valid"]
        assert torch.equal(rows, clf.model.classifier.weight)
    finally:
        with torch.no_grad():
            clf.model.classifier.weight.copy_(saved[0])
            clf.model.classifier.bias.copy_(saved[1])


def test_a_capped_sample_is_stratified_seeded_and_keeps_every_class():
    from docattn.data.splits import capped_sample

    labels = np.zeros((1000, 3), dtype=np.int8)
    labels[:, 0] = 1
    labels[::10, 1] = 1  # 100 documents
    labels[[7, 512], 2] = 1  # 2 documents: a uniform 10% sample would miss both most of the time
    sample = capped_sample(labels, 100, seed=0)
    assert abs(len(sample) - 100) <= 2 and np.all(np.diff(sample) > 0)
    assert labels[sample, 2].sum() >= 1 and abs(int(labels[sample, 1].sum()) - 10) <= 1
    np.testing.assert_array_equal(sample, capped_sample(labels, 100, seed=0))
    np.testing.assert_array_equal(capped_sample(labels, 5000), np.arange(1000))


def test_the_recipe_refits_neural_multi_label_models_only():
    from docattn.training.config import TrainConfig
    from docattn.training.recipe import resolve

    matrix = np.array([[1, 0], [0, 1], [1, 1], [0, 1]])
    classes = ["a", "b"]
    assert resolve(TrainConfig(), 4, 100, matrix, classes)[0].refit_output is True
    assert resolve(TrainConfig(), 4, 100, matrix, classes, neural=False)[0].refit_output is False
    assert resolve(TrainConfig(recipe="paper"), 4, 100, matrix, classes)[0].refit_output is False
    assert resolve(TrainConfig(refit_output=False), 4, 100, matrix, classes)[0].refit_output is False
    # the refit's positives: balanced under auto even where the resolved (or resumed) config reads None
    from docattn.training.recipe import per_class_fit_weights

    resolved = resolve(TrainConfig(), 4, 100, matrix, classes)[0]
    assert resolved.class_weight is None
    np.testing.assert_allclose(per_class_fit_weights(resolved, matrix, classes), [1.0, 1 / 3])
    assert per_class_fit_weights(TrainConfig(recipe="paper", class_weight=None), matrix, classes) is None
    np.testing.assert_allclose(per_class_fit_weights(TrainConfig(class_weight={"b": 2}), matrix, classes), [1, 2])
    # a run saved before the option existed goes on without it when resumed
    assert TrainConfig.from_json({"recipe": "auto"}).refit_output is False
    single = np.array([0, 1, 1, 0])
    assert resolve(TrainConfig(), 4, 100, single, classes)[0].refit_output is False
    with pytest.raises(ConfigError, match="multi-label"):
        resolve(TrainConfig(refit_output=True), 4, 100, single, classes)


def test_every_neural_model_declares_its_output_layer():
    from docattn.models import create_model, list_models
    from docattn.models.contract import is_one_shot

    for name in list_models():
        model = create_model(name, vocab_size=40, num_classes=3)
        if is_one_shot(model):
            continue
        head = model.classifier
        assert isinstance(head, torch.nn.Linear) and head.out_features == 3, name


def test_the_training_summary_shows_validation_before_and_after_the_refit(fitted):
    from rich.console import Console

    from docattn.cli.report import print_training

    clf, data = fitted
    saved = clf.results
    scores = {"trained": {"micro_f1": 0.9, "macro_f1": 0.4}, "refit": {"micro_f1": 0.89, "macro_f1": 0.55}}
    refit = {"classes_refit": 3, "documents": 300, "sampled": False, "valid": scores, "seconds": 0.1}
    clf.results = {**saved, "refit_output": refit}
    try:
        console = Console(record=True, width=300)
        print_training(console, clf, data)
        text = console.export_text()
    finally:
        clf.results = saved
    assert "output layer refit per class on 300 training documents' vectors" in text
    assert "micro-F1 0.9000 -> 0.8900, macro-F1 0.4000 -> 0.5500" in text
