"""The learning-rate search from Python (``DocumentClassifier.tune``), and predictions for no documents."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from tiny_runs import TINY_HAN as TINY

from docattn.classifier import DocumentClassifier
from docattn.data import synthetic
from docattn.errors import ConfigError


@pytest.fixture(scope="module")
def corpus():
    return synthetic.make_splits(n_train=160, n_test=20, seed=7)["train"]


def test_tune_from_python_records_each_rate_and_picks_the_best(corpus, tmp_path):
    clf = DocumentClassifier("han", **TINY)
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = clf.tune(corpus.sentences, corpus.labels, rates=[0.01, 0.002], out=tmp_path / "tune", log=seen.append)
    assert [t["lr"] for t in result.trials] == [0.01, 0.002]
    assert all("val_acc" in t for t in result.trials) and result.best_lr in (0.01, 0.002)
    assert result.best["val_acc"] == max(t["val_acc"] for t in result.trials)
    assert any(line.startswith("lr 0.01: validation accuracy") for line in seen)
    recorded = json.loads((tmp_path / "tune" / "tune.json").read_text())
    assert recorded["complete"] is True and recorded["best"]["lr"] == result.best_lr and recorded["model"] == "han"
    best = DocumentClassifier.load(result.best["run"])  # each trial is a run folder
    assert best.train_config.lr == result.best_lr
    assert clf.model is None  # the classifier tuned from is left unfitted


def test_tune_from_python_without_a_folder_and_its_refusals(corpus):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = DocumentClassifier("han", **TINY).tune(
            corpus.sentences, corpus.labels, rates=[0.005], log=lambda _: None
        )
    assert [t["lr"] for t in result.trials] == [0.005] and result.best["run"] is None
    with pytest.raises(ConfigError, match="more than once"):
        DocumentClassifier("han", **TINY).tune(corpus.sentences, corpus.labels, rates=[0.1, 1e-1])
    with pytest.raises(ConfigError, match="above 0"):
        DocumentClassifier("han", **TINY).tune(corpus.sentences, corpus.labels, rates=[-1.0])
    with pytest.raises(ConfigError, match="no learning rate to tune"):
        DocumentClassifier("nb").tune(corpus.texts, corpus.labels)


def test_no_documents_give_empty_predictions(corpus):
    clf = DocumentClassifier("nb", min_count=2).fit(corpus.texts, corpus.labels)
    assert clf.predict([]) == []
    assert clf.predict_proba([]).shape == (0, len(clf.classes_))
    assert clf.predict_proba(np.array([], dtype=object)).shape == (0, len(clf.classes_))
    assert clf.predict([""])[0] in clf.classes_  # an empty text is classified, from no words
