"""The embedded corpus: deterministic, balanced, within bounds, honest rationales, learnable only with word order."""

from __future__ import annotations

import json
import re
import time
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docattn.data.synthetic import (
    CLASS_CUES,
    DEFAULT_N_TEST,
    DEFAULT_N_TRAIN,
    NEGATORS,
    OPPOSITE,
    class_names,
    make_corpus,
    make_splits,
    write_jsonl,
)
from docattn.errors import ConfigError

CUE_CLASS = {cue: name for name, cues in CLASS_CUES.items() for cue in cues}
WORD_PATTERN = re.compile(r"\w+(?:'\w+)*|[^\w\s]")  # the word tokenizer of docattn.data.text


def sentence_meaning(tokens: list[str]) -> str | None:
    """The class a sentence says under the documented rule, read independently of the generator."""
    cues = [i for i, token in enumerate(tokens) if token in CUE_CLASS]
    if not cues:
        return None
    assert len(cues) == 1, f"more than one cue in {tokens}"
    i = cues[0]
    negated = i > 0 and tokens[i - 1] in NEGATORS
    return OPPOSITE[CUE_CLASS[tokens[i]]] if negated else CUE_CLASS[tokens[i]]


def check_document(sentences: list[str], label: str, rationale: dict, classes: list[str]) -> None:
    deciding = rationale["sentences"]
    assert deciding == sorted(set(deciding)) and 1 <= len(deciding) <= 2
    assert all(0 <= s < len(sentences) for s in deciding)
    tokenized = [s.split(" ") for s in sentences]
    for s, tokens in enumerate(tokenized):
        meaning = sentence_meaning(tokens)
        if s in deciding:
            assert meaning == label, f"deciding sentence {sentences[s]!r} means {meaning}, label {label}"
        else:
            assert meaning is None, f"distractor {sentences[s]!r} holds a cue"
    expected_words = []
    for s in deciding:
        tokens = tokenized[s]
        (cue_at,) = [t for t, token in enumerate(tokens) if token in CUE_CLASS]
        if cue_at > 0 and tokens[cue_at - 1] in NEGATORS:
            expected_words.append([s, cue_at - 1])
            assert CUE_CLASS[tokens[cue_at]] != label and OPPOSITE[CUE_CLASS[tokens[cue_at]]] in classes
        expected_words.append([s, cue_at])
    assert rationale["words"] == expected_words
    for s, t in rationale["words"]:
        assert tokenized[s][t] in CUE_CLASS or tokenized[s][t] in NEGATORS


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(2000, seed=0)


@pytest.fixture(scope="module")
def splits():
    return make_splits(4000, 1000, seed=0)


def test_same_seed_same_corpus():
    a, b = make_corpus(300, seed=7), make_corpus(300, seed=7)
    assert (a.texts, a.labels, a.sentences, a.rationales, a.ids) == (
        b.texts,
        b.labels,
        b.sentences,
        b.rationales,
        b.ids,
    )
    sa, sb = make_splits(200, 50, seed=7), make_splits(200, 50, seed=7)
    assert sa["train"].texts == sb["train"].texts and sa["test"].texts == sb["test"].texts


def test_different_seeds_differ():
    a, b = make_corpus(300, seed=0), make_corpus(300, seed=1)
    assert len(set(a.texts) & set(b.texts)) == 0
    assert a.labels != b.labels


@pytest.mark.parametrize("n_classes", [2, 3, 4, 5, 6])
def test_classes_balanced_and_named(n_classes):
    c = make_corpus(600, n_classes=n_classes, seed=1)
    assert c.classes == class_names(n_classes) == list(CLASS_CUES)[:n_classes]
    counts = Counter(c.labels)
    assert set(counts) == set(c.classes)
    assert max(counts.values()) - min(counts.values()) <= 1


def test_splits_balanced_disjoint_and_ids(splits):
    train, test = splits["train"], splits["test"]
    assert (len(train), len(test)) == (4000, 1000)
    assert set(Counter(train.labels).values()) == {1000} and set(Counter(test.labels).values()) == {250}
    assert not set(train.texts) & set(test.texts)
    assert not set(train.ids) & set(test.ids)
    assert train.ids[0] == "synthetic-000000" and test.ids[0] == "synthetic-004000"
    assert all(re.fullmatch(r"synthetic-\d{6}", i) for i in train.ids + test.ids)
    assert (DEFAULT_N_TRAIN, DEFAULT_N_TEST) == (4000, 1000)


@pytest.mark.parametrize("bounds", [(4, 12), (1, 1), (2, 3), (10, 20)])
def test_sentence_and_word_counts_within_bounds(bounds):
    lo, hi = bounds
    c = make_corpus(400, seed=2, min_sentences=lo, max_sentences=hi)
    lengths = [len(s) for s in c.sentences]
    assert lo <= min(lengths) and max(lengths) <= hi
    if hi - lo >= 2:
        assert {lo, hi} <= set(lengths)
    for doc in c.sentences:
        for sentence in doc:
            tokens = sentence.split(" ")
            words = [t for t in tokens if t.isalpha()]
            assert len(words) >= 5 and len(tokens) <= 20, sentence


def test_tokens_round_trip_and_texts(corpus):
    assert len(corpus) == 2000 and corpus.source.startswith("synthetic")
    for text, sentences in zip(corpus.texts, corpus.sentences):
        assert text == " ".join(sentences)
        for sentence in sentences:
            assert sentence == sentence.lower() and sentence.endswith(" .")
            assert WORD_PATTERN.findall(sentence) == sentence.split(" ")


def test_rationales_point_at_deciding_tokens(corpus):
    for sentences, label, rationale in zip(corpus.sentences, corpus.labels, corpus.rationales):
        check_document(sentences, label, rationale, corpus.classes)


def test_negation_and_two_deciding_sentences_are_common(corpus):
    n_deciding = sum(len(r["sentences"]) for r in corpus.rationales)
    n_negated = sum(len(r["words"]) - len(r["sentences"]) for r in corpus.rationales)
    n_two = sum(len(r["sentences"]) == 2 for r in corpus.rationales)
    assert corpus.stats == {"two_deciding_documents": n_two, "negated_deciding_sentences": n_negated}
    assert 0.33 < n_negated / n_deciding < 0.47  # every class is paired when n_classes=4
    assert 0.19 < n_two / len(corpus) < 0.31
    positions = Counter(s for r in corpus.rationales for s in r["sentences"])
    assert len(positions) >= 10  # deciding sentences are spread over the document


def test_unpaired_class_is_never_negated():
    c = make_corpus(600, n_classes=3, seed=4)
    for sentences, label, rationale in zip(c.sentences, c.labels, c.rationales):
        check_document(sentences, label, rationale, c.classes)
        if label == "exciting":  # its opposite, "boring", is not among the 3 classes
            assert len(rationale["words"]) == len(rationale["sentences"])


def test_distractors_reuse_negators_and_vocabulary(corpus):
    distractor_tokens, deciding_tokens = Counter(), Counter()
    for sentences, rationale in zip(corpus.sentences, corpus.rationales):
        for s, sentence in enumerate(sentences):
            (deciding_tokens if s in rationale["sentences"] else distractor_tokens).update(sentence.split(" "))
    assert distractor_tokens["not"] > deciding_tokens["not"]  # "not" alone is no evidence
    assert not set(distractor_tokens) & set(CUE_CLASS)
    vocabulary = set(distractor_tokens) | set(deciding_tokens)
    assert len(vocabulary) >= 300
    # deciding sentences use the distractors' words besides their cues
    assert set(deciding_tokens) - set(CUE_CLASS) <= set(distractor_tokens)


@settings(max_examples=25, deadline=None)
@given(
    n_classes=st.integers(2, 6),
    seed=st.integers(0, 2**32 - 1),
    lo=st.integers(1, 8),
    extra=st.integers(0, 6),
)
def test_any_arguments_keep_the_rule(n_classes, seed, lo, extra):
    c = make_corpus(30, n_classes=n_classes, seed=seed, min_sentences=lo, max_sentences=lo + extra)
    assert len(c) == len(set(c.texts)) == 30
    for sentences, label, rationale in zip(c.sentences, c.labels, c.rationales):
        assert lo <= len(sentences) <= lo + extra
        check_document(sentences, label, rationale, c.classes)


def test_write_jsonl_round_trips(tmp_path):
    c = make_corpus(50, seed=3)
    path = write_jsonl(c, tmp_path / "sub" / "train.jsonl")
    assert not (tmp_path / "sub" / "train.jsonl.tmp").exists()
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 50
    for record, i, text, label, sentences, rationale in zip(
        records, c.ids, c.texts, c.labels, c.sentences, c.rationales
    ):
        assert record == {"id": i, "text": text, "label": label, "sentences": sentences, "rationale": rationale}
    from docattn.data.readers import read_corpus

    back = read_corpus(path)  # the reader gives the same documents, ids included
    assert back.ids == c.ids and back.texts == c.texts and back.labels == c.labels


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_classes": 1},
        {"n_classes": 7},
        {"min_sentences": 0},
        {"min_sentences": 5, "max_sentences": 4},
        {"n_docs": -1},
    ],
)
def test_bad_arguments_are_config_errors(kwargs):
    with pytest.raises(ConfigError):
        make_corpus(**kwargs)


def test_make_splits_rejects_unknown_options():
    with pytest.raises(ConfigError, match="unknown options"):
        make_splits(10, 10, n_sentences=3)


def test_ten_thousand_documents_in_under_two_seconds():
    start = time.process_time()  # CPU time: other jobs on the machine do not count
    c = make_corpus(10_000, seed=5)
    elapsed = time.process_time() - start
    assert len(c) == 10_000
    assert elapsed < 2.0, f"generating 10,000 documents took {elapsed:.2f} s"


def test_word_pairs_are_needed_to_learn_the_labels(splits):
    """Bag of bigrams learns the rule; bag of words cannot, because "not good" contains "good"."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    train, test = splits["train"], splits["test"]
    accuracy = {}
    for name, ngram_range in (("unigram", (1, 1)), ("unigram+bigram", (1, 2))):
        vectorizer = CountVectorizer(ngram_range=ngram_range, token_pattern=r"[a-z]+")
        x_train, x_test = vectorizer.fit_transform(train.texts), vectorizer.transform(test.texts)
        model = LogisticRegression(solver="newton-cg", max_iter=200).fit(x_train, train.labels)
        accuracy[name] = model.score(x_test, test.labels)
    print(f"logistic regression test accuracy: {accuracy}")
    assert accuracy["unigram+bigram"] >= 0.95, accuracy
    assert accuracy["unigram"] <= accuracy["unigram+bigram"] - 0.2, accuracy
