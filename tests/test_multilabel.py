"""Multi-label classification: label sets, splits, thresholds, metrics, losses and every model's outputs."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from docattn.data.corpus import Corpus, LabelMap, to_corpus
from docattn.data.splits import label_set_strata, stratified_split
from docattn.errors import DataError
from docattn.training.metrics import MIN_POSITIVES, multilabel_report, tune_thresholds

TOPICS = {
    "sport": "goal match team player score",
    "money": "bank price market stock trade",
    "tech": "computer software chip phone code",
}
FILLER = ["the", "a", "of", "and", "to", "in", "is", "was", "it", "for", "on", "with", "as"]


def topic_documents(n: int, seed: int = 0) -> tuple[list[str], list[list[str]]]:
    """Documents made of filler words plus the words of each of their topics (none, one or several)."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for _ in range(n):
        topics = [k for k in TOPICS if rng.random() < 0.4]
        words = list(rng.choice(FILLER, 30))
        for k in topics:
            words += list(rng.choice(TOPICS[k].split(), 6))
        rng.shuffle(words)
        texts.append(" ".join(words) + ". " + " ".join(rng.choice(FILLER, 10)) + ".")
        labels.append(topics)
    return texts, labels


# ---------------------------------------------------------------------------- labels


def test_lists_of_labels_make_a_multi_label_corpus_and_tuples_stay_single_labels():
    corpus = to_corpus(["a b", "c d", "e f"], [["x", "y"], [], {"z"}])
    assert corpus.multi_label and corpus.labels == [("x", "y"), (), ("z",)]
    assert not to_corpus(["a b", "c d"], [("x", "y"), ("x", "y")]).multi_label  # a tuple is one label
    with pytest.raises(DataError, match="document 1 has the label 'y' where others have lists"):
        to_corpus(["a", "b"], [["x"], "y"])


def test_label_map_encodes_sets_drops_unseen_labels_and_keeps_thresholds_through_json():
    labels = LabelMap.from_labels([("b", "a"), ("c",), ()], multi_label=True)
    assert labels.classes == ["a", "b", "c"] and labels.multi_label
    matrix, unseen = labels.encode_sets([("a", "c"), ("new",), ()])
    assert matrix.tolist() == [[1, 0, 1], [0, 0, 0], [0, 0, 0]] and unseen == 1
    labels.thresholds = np.array([0.3, 0.5, 0.7])
    again = LabelMap.from_json(json.loads(json.dumps(labels.to_json())))
    assert again.multi_label and again.classes == labels.classes
    np.testing.assert_allclose(again.thresholds, [0.3, 0.5, 0.7])
    assert again.decode_sets(again.decide(np.array([[0.35, 0.4, 0.8], [0.1, 0.9, 0.1]]))) == [["a", "c"], ["b"]]
    assert LabelMap.from_json(["x", "y"]).multi_label is False  # single-label runs keep their plain list


def test_where_every_training_document_has_a_label_no_prediction_is_empty():
    from docattn.training.trainer import every_document_labelled

    labels = LabelMap(["a", "b", "c"], multi_label=True, thresholds=[0.5, 0.2, 0.9], at_least_one=True)
    probs = np.array([[0.6, 0.1, 0.1], [0.3, 0.1, 0.8], [0.1, 0.15, 0.1]])
    # nothing over its threshold: the class nearest its own (0.8 / 0.9 over 0.3 / 0.5; 0.15 / 0.2 over 0.1 / 0.5)
    assert labels.decode_sets(labels.decide(probs)) == [["a"], ["c"], ["b"]]
    labels.at_least_one = False
    assert labels.decode_sets(labels.decide(probs)) == [["a"], [], []]
    saved = LabelMap.from_json(json.loads(json.dumps(LabelMap(["a"], True, [0.5], True).to_json())))
    assert saved.at_least_one and not LabelMap.from_json({"classes": ["a"], "multi_label": True}).at_least_one
    assert LabelMap(["a"], True, [0.5], True).decide(np.zeros((0, 1))).shape == (0, 1)

    class Split:
        def __init__(self, rows):
            self.labels = np.array(rows, dtype=np.int8)

        def __len__(self):
            return len(self.labels)

    assert every_document_labelled(Split([[1, 0], [0, 1]])) and not every_document_labelled(Split([[1, 0], [0, 0]]))


def test_validation_split_of_label_sets_keeps_each_rare_label_on_both_sides():
    labels = [("common",)] * 80 + [("common", "rare")] * 10 + [("rare",)] * 10 + [()] * 20
    strata = label_set_strata(labels)
    assert strata[0] == "common" and strata[80] == "rare" and strata[-1] == ""
    train, valid = stratified_split(strata, 0.1, seed=0)
    rare = {i for i, y in enumerate(labels) if "rare" in y}
    assert rare & set(train.tolist()) and rare & set(valid.tolist())
    matrix = np.array([[1, 0], [1, 1], [1, 0], [0, 0]])
    assert label_set_strata(matrix) == ["0", "1", "0", ""]  # class 1 is the rarer one


# ---------------------------------------------------------------------------- metrics and thresholds


def test_multilabel_report_matches_scikit_learn():
    from sklearn.metrics import f1_score, hamming_loss, precision_score, recall_score

    rng = np.random.default_rng(1)
    gold, pred = rng.random((300, 6)) < 0.2, rng.random((300, 6)) < 0.25
    report = multilabel_report(gold, pred, list("abcdef"))
    assert report["micro_f1"] == pytest.approx(f1_score(gold, pred, average="micro"))
    assert report["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro"))
    assert report["micro_precision"] == pytest.approx(precision_score(gold, pred, average="micro"))
    assert report["micro_recall"] == pytest.approx(recall_score(gold, pred, average="micro"))
    assert report["hamming_loss"] == pytest.approx(hamming_loss(gold, pred))
    assert report["accuracy"] == pytest.approx((gold == pred).all(1).mean())
    assert [r["support"] for r in report["per_class"]] == gold.sum(0).tolist()


def test_thresholds_are_tuned_per_class_where_validation_has_enough_documents():
    rng = np.random.default_rng(0)
    gold = np.zeros((400, 3), dtype=bool)
    gold[:100, 0] = True  # class 0: positives score about 0.3, negatives under 0.2: its best cut is low
    gold[: MIN_POSITIVES - 1, 2] = True  # class 2: too few to tune
    probs = rng.random((400, 3)) * 0.2
    probs[:100, 0] = 0.25 + rng.random(100) * 0.1
    gold[200:300, 1] = True  # class 1: positives about 0.9
    probs[200:300, 1] = 0.85 + rng.random(100) * 0.1
    thresholds, global_t = tune_thresholds(gold, probs)
    assert 0.2 <= thresholds[0] <= 0.25  # under 0.5: every cut in [0.2, 0.25] separates class 0
    assert thresholds[2] == global_t
    decided = probs >= thresholds
    assert multilabel_report(gold[:, :2], decided[:, :2], ["a", "b"])["micro_f1"] == 1.0


# ---------------------------------------------------------------------------- training pieces


def test_recipe_picks_micro_f1_and_positive_weights_for_label_matrices():
    from docattn.training.config import TrainConfig
    from docattn.training.recipe import class_weights, resolve

    matrix = np.array([[1, 0, 1], [1, 0, 1], [1, 1, 1], [0, 0, 1]])  # "c" is in every document
    cfg, weights = resolve(TrainConfig(), 4, 100, matrix, ["a", "b", "c"])
    assert cfg.monitor == "val_micro_f1" and weights is None  # auto: the tuned thresholds handle imbalance
    assert cfg.class_weight is None
    balanced = class_weights(TrainConfig(class_weight="balanced"), matrix, ["a", "b", "c"])
    np.testing.assert_allclose(balanced, [1 / 3, 3.0, 1.0])  # negatives over positives; none of either: 1
    roots = class_weights(TrainConfig(class_weight="sqrt_balanced"), matrix, ["a", "b", "c"])
    np.testing.assert_allclose(roots, np.sqrt(balanced))
    # a penalised logistic regression per class (logreg, logreg-l1) gets the balanced weights under auto
    cfg, weights = resolve(TrainConfig(), 4, 100, matrix, ["a", "b", "c"], penalised_per_class=True)
    assert cfg.class_weight == "balanced"
    np.testing.assert_allclose(weights, balanced)
    assert class_weights(TrainConfig(recipe="paper"), matrix, ["a", "b", "c"], penalised_per_class=True) is None
    assert class_weights(TrainConfig(class_weight=None), matrix, ["a", "b", "c"], penalised_per_class=True) is None


def test_binary_cross_entropy_with_positive_weights_reaches_the_loss():
    from docattn.training.config import TrainConfig
    from docattn.training.engine import ClassifierModule

    class Fixed(torch.nn.Module):
        num_classes = 2

        def forward(self, batch):
            from docattn.models.output import ModelOutput

            return ModelOutput(logits=torch.zeros(len(batch.labels), 2), attentions=None)

    class Batch:
        labels = torch.tensor([[1.0, 0.0], [1.0, 1.0]])

        def __len__(self):
            return 2

    plain = ClassifierModule(Fixed(), TrainConfig(), multi_label=True)
    weighted = ClassifierModule(Fixed(), TrainConfig(), class_weights=[3.0, 1.0], multi_label=True)
    for module in (plain, weighted):
        module.log = lambda *a, **k: None
    loss = plain.training_step(Batch(), 0)
    assert float(loss) == pytest.approx(np.log(2))  # every logit 0: log 2 per class and document
    # class 0's two positives weigh 3: (3 * 2 + 1 * 2) log 2 / 4 terms
    assert float(weighted.training_step(Batch(), 0)) == pytest.approx(2 * np.log(2))


def test_baselines_fit_one_sigmoid_per_class_and_nb_gives_its_two_class_posterior():
    from sklearn.naive_bayes import MultinomialNB

    from docattn.data.encoding import encode_corpus
    from docattn.data.text import TextConfig, Vocabulary
    from docattn.models import create_model

    texts, labels = topic_documents(200)
    corpus = to_corpus(texts, labels)
    vocab = Vocabulary.build(texts, TextConfig(), min_count=1)
    label_map = LabelMap.from_labels(corpus.labels, multi_label=True)
    enc = encode_corpus(corpus, vocab, label_map)
    assert enc.multi_label and enc.labels.shape == (200, 3)
    for name in ("logreg", "nb"):
        model = create_model(name, vocab_size=len(vocab), num_classes=3, min_df=1)
        probs = model.fit_encoded(enc, vocab).predict_proba_encoded(enc)
        assert probs.shape == (200, 3) and model.link == "sigmoid"
        assert ((probs >= 0.5) == enc.labels.astype(bool)).mean() > 0.95
    features = model._features(enc)  # the nb model: each class's posterior from its own two-class fit
    reference = MultinomialNB(alpha=0.1).fit(features, enc.labels[:, 1]).predict_proba(features)[:, 1]
    np.testing.assert_allclose(probs[:, 1], reference, atol=1e-9)


# ---------------------------------------------------------------------------- the classifier


@pytest.mark.parametrize("model", ["logreg", "han"])
def test_classifier_fits_predicts_scores_and_saves_label_sets(tmp_path, model):
    from docattn.classifier import DocumentClassifier

    texts, labels = topic_documents(600)
    options = {"max_epochs": 15, "embedding_dim": 16, "hidden_size": 16, "progress": False} if model == "han" else {}
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = DocumentClassifier(model, **options).fit(texts[:500], labels[:500], run_dir=tmp_path / "run")
    assert clf.labels.multi_label and clf.labels.thresholds is not None
    assert clf.results["valid"]["multi_label"] and "micro_f1" in clf.results["valid"]
    predicted = clf.predict(texts[500:])
    assert all(isinstance(p, list) for p in predicted)
    assert clf.predict_proba(texts[500:]).shape == (100, 3)
    score = clf.score(texts[500:], labels[500:])
    assert score > (0.5 if model == "han" else 0.9)
    loaded = DocumentClassifier.load(tmp_path / "run")
    np.testing.assert_allclose(loaded.labels.thresholds, clf.labels.thresholds)
    assert loaded.predict(texts[500:]) == predicted
    assert clf.train_config.class_weight == ("balanced" if model == "logreg" else None)
    assert clf.train_config.refit_output is (model == "han")  # the neural model's output layer, under auto
    if model == "han":  # the refit is recorded, kept or not; the loaded run predicted as the fitted one above
        assert set(clf.results["refit_output"]["valid"]) == {"trained", "refit"}
    if model == "han":  # the guardrail compares micro-F1 at each one's tuned thresholds
        verdict = clf.results["guardrail"]
        assert "micro_f1" in verdict["model"] and "micro_f1" in verdict["baseline"]


def test_single_label_corpus_for_a_single_label_model_refuses_label_sets():
    from docattn.data.encoding import encode_corpus
    from docattn.data.text import TextConfig, Vocabulary

    vocab = Vocabulary.build(["a b c"], TextConfig(), min_count=1)
    corpus = Corpus(texts=["a b"], labels=[("x", "y")], multi_label=True)
    with pytest.raises(DataError, match="sets of labels for a single-label model"):
        encode_corpus(corpus, vocab, LabelMap(["x", "y"]))


def test_a_class_the_model_cannot_tell_apart_is_not_predicted_for_every_document():
    """Its own best F1 would be "every document"; micro-F1 over all classes says no."""
    rng = np.random.default_rng(3)
    gold = np.zeros((500, 2), dtype=bool)
    gold[:250, 0] = True
    probs = np.where(gold, 0.8, 0.2) + rng.normal(0, 0.05, (500, 2))
    gold[rng.choice(500, 25, replace=False), 1] = True  # class 1: 5% of documents, probabilities unrelated
    probs[:, 1] = rng.random(500) * 0.3
    thresholds, _ = tune_thresholds(gold, probs)
    assert (probs[:, 1] >= thresholds[1]).mean() < 0.05
