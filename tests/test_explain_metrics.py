"""Explanation metrics on hand-made arrays: Gini, diagonality, entropy, rationale scores, word removal."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from docattn.data.encoding import EncodedCorpus
from docattn.data.text import UNK
from docattn.explain.faithfulness import top_fraction
from docattn.explain.metrics import diagonality, entropy, gini, zero_share
from docattn.explain.rationale import (
    average_precision,
    model_rationales,
    precision_recall_at,
    rationale_metrics,
    rationale_scores,
)
from docattn.explain.tokens import compact, fit_to_limits


def test_gini_known_values():
    w = np.array([[0.25, 0.25, 0.25, 0.25], [0, 0, 0, 1.0], [0, 0, 0.5, 0.5], [0.7, 0.3, 0.9, 0.9]])
    m = np.array([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 0]], dtype=bool)
    # uniform 0; one-hot over n: (n - 1) / n; two equal of four: 0.5; masked [0.7, 0.3]: 2 * 1.3 / 2 - 3 / 2 = 0.2
    np.testing.assert_allclose(gini(w, m), [0.0, 0.75, 0.5, 0.2], atol=1e-12)
    # torch input, extra leading axes, padding ignored whatever it holds
    t = torch.tensor(w, dtype=torch.float32).view(2, 2, 4)
    np.testing.assert_allclose(gini(t, torch.tensor(m).view(2, 2, 4)).ravel(), [0.0, 0.75, 0.5, 0.2], atol=1e-6)
    assert np.isnan(gini(np.zeros((1, 3)), np.zeros((1, 3), dtype=bool))[0])


def test_diagonality_known_values():
    eye = np.eye(4)
    np.testing.assert_allclose(diagonality(eye), np.ones(5))
    uniform = np.full((4, 4), 0.25)
    # |i - j| <= 1 holds on 10 of the 16 cells, <= 2 on 14, <= 3 on all
    np.testing.assert_allclose(diagonality(uniform, bandwidths=(1, 2, 3)), [10 / 16, 14 / 16, 1.0])
    anti = np.fliplr(np.eye(4))  # distances 3, 1, 1, 3
    np.testing.assert_allclose(diagonality(anti, bandwidths=(1, 2, 3)), [0.5, 0.5, 1.0])
    # a padded 5th word carries garbage that the mask must drop; batch of two matrices
    padded = np.full((2, 5, 5), 9.0)
    padded[0, :4, :4] = uniform
    padded[1, :4, :4] = anti
    mask = np.array([[1, 1, 1, 1, 0]] * 2, dtype=bool)
    np.testing.assert_allclose(
        diagonality(padded, mask, bandwidths=(1, 2, 3)), [[10 / 16, 14 / 16, 1.0], [0.5, 0.5, 1.0]]
    )


def test_entropy_and_zero_share():
    w = np.array([[0.25] * 4, [1.0, 0, 0, 0], [0.5, 0.5, 0.3, 0.3]])
    m = np.array([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 0]], dtype=bool)
    np.testing.assert_allclose(entropy(w, m), [math.log(4), 0.0, math.log(2)], atol=1e-12)
    np.testing.assert_allclose(entropy(w, m, normalized=True), [1.0, 0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(zero_share(w, m), [0.0, 0.75, 0.0])


def test_rationale_metrics_hand_made():
    assert average_precision(np.array([0.9, 0.1, 0.5]), np.array([True, False, True])) == 1.0
    p, r = precision_recall_at(np.array([0.1, 0.9, 0.5, 0.3]), np.array([True, True, False, False]), [1, 2, 10])
    np.testing.assert_allclose(p, [1.0, 0.5, 0.5])
    np.testing.assert_allclose(r, [0.5, 0.5, 1.0])
    item = {
        "layout": "hierarchical",
        "sentences": [
            {"tokens": ["a", "b"], "weight": 0.2, "word_weights": [0.5, 0.5]},
            {"tokens": ["not", "good", "x"], "weight": 0.8, "word_weights": [0.3, 0.6, 0.1]},
        ],
    }
    rat = {"sentences": [1], "words": [[1, 0], [1, 1]]}
    out = rationale_metrics([item], [rat], ks=(1, 2))
    assert out["top_sentence_accuracy"] == 1.0 and out["word_auprc"] == 1.0
    assert out["word_precision_at_k"] == {"1": 1.0, "2": 1.0} and out["word_recall_at_k"] == {"1": 0.5, "2": 1.0}
    assert set(rationale_scores([item], [rat])) >= {"documents", "top_sentence_accuracy", "word_auprc"}
    flat = {"layout": "flat", "tokens": ["a", "b", "not", "good", "x"], "token_weights": [0.1, 0.1, 0.2, 0.5, 0.1]}
    assert rationale_metrics([flat], [rat], sentence_lengths=[[2, 3]])["word_auprc"] == 1.0


def test_rationale_positions_follow_the_models_text_processing():
    """HCAN's cleaning drops "," so later words move up; a dropped deciding word is left out."""
    from docattn.data.corpus import Corpus
    from docattn.data.text import TextConfig, Vocabulary, documents_to_strings
    from docattn.explain.tokens import surface_sentences

    sentences = [["a dull start .", "the plot , sadly , is not good ."]]
    corpus = Corpus(
        texts=[" ".join(sentences[0])],
        labels=["neg"],
        sentences=sentences,
        rationales=[{"sentences": [1], "words": [[1, 6], [1, 7], [1, 2]]}],
    )  # not, good, ","
    plain = Vocabulary.build(["x"], TextConfig(), min_count=1)
    assert model_rationales(plain, corpus)[0]["words"] == [[1, 6], [1, 7], [1, 2]]
    clean = Vocabulary.build(["x"], TextConfig(hcan_clean=True), min_count=1)
    assert model_rationales(clean, corpus)[0]["words"] == [[1, 4], [1, 5]]
    tokens = surface_sentences(clean, documents_to_strings(corpus.texts, corpus.sentences, clean.text_config)[0])
    assert [tokens[1][j] for _, j in model_rationales(clean, corpus)[0]["words"]] == ["not", "good"]


def test_removal_on_encoded_corpus():
    # doc 0: sentences [5 6 7] [8]; doc 1: [9 10]
    enc = EncodedCorpus(
        tokens=np.array([5, 6, 7, 8, 9, 10], dtype=np.int32),
        sentence_offsets=np.array([0, 3, 4, 6]),
        document_offsets=np.array([0, 2, 3]),
        labels=np.array([0, 1]),
    )
    scores = np.array([0.1, 0.9, 0.2, 0.5, 0.3, 0.4])
    top = top_fraction(enc, scores, 50)  # ceil(2 of 4) and ceil(1 of 2)
    np.testing.assert_array_equal(top, [False, True, False, True, False, True])
    np.testing.assert_array_equal(
        top_fraction(enc, scores, 1), [False, True, False, False, False, True]
    )  # at least one
    kept = compact(enc, ~top)  # sentence [8] empties and goes
    np.testing.assert_array_equal(kept.tokens, [5, 7, 9])
    np.testing.assert_array_equal(kept.sentence_offsets, [0, 2, 3])
    np.testing.assert_array_equal(kept.document_offsets, [0, 1, 2])
    gone = compact(enc, np.array([True, False, False, False, False, False]))  # doc 1 empties: one <unk>
    np.testing.assert_array_equal(gone.tokens, [5, UNK])
    np.testing.assert_array_equal(gone.document_offsets, [0, 1, 2])
    cut = fit_to_limits(enc, "hierarchical", {"max_sentences": 1, "max_words": 2})
    np.testing.assert_array_equal(cut.tokens, [5, 6, 9, 10])
    np.testing.assert_array_equal(fit_to_limits(enc, "flat", {"max_tokens": 3}).tokens, [5, 6, 7, 9, 10])


def test_diagonality_has_the_uniform_reference_of_the_same_lengths():
    """Diagonality grows as documents shorten; the summary says what uniform attention over the same words gives."""
    from docattn.explain.metrics import AttentionSummary as _Summary

    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=bool)
    real = mask[:, :, None] & mask[:, None, :]
    uniform = real / mask.sum(1)[:, None, None]
    eye = np.eye(6)[None].repeat(2, 0) * real
    expected = {1: (10 / 16 + 16 / 36) / 2, 2: (14 / 16 + 24 / 36) / 2}  # (n + 2 sum_k<=b (n - k)) / n^2
    for weights, diagonal in ((uniform, None), (eye, 1.0)):
        s = _Summary(matrix=True, bandwidths=(1, 2))
        s.add(weights, mask)
        out = s.result()
        for b, value in expected.items():
            assert out["diagonality_uniform"][str(b)] == pytest.approx(value)
            assert out["diagonality"][str(b)] == pytest.approx(value if diagonal is None else diagonal)


def test_column_gini_tells_every_word_attending_to_one_word_from_a_diagonal_band():
    """SANet's topic matrices are columns (all queries look at the same words), its sentiment ones bands."""
    from docattn.explain.metrics import AttentionSummary as _Summary

    T = 8
    column = np.zeros((1, T, T))
    column[..., 3] = 1.0  # every query attends to word 3
    band = np.eye(T)[None]
    uniform = np.full((1, T, T), 1 / T)
    mask = np.ones((1, T), dtype=bool)
    result = {}
    for name, weights in (("column", column), ("band", band), ("uniform", uniform)):
        s = _Summary(matrix=True, bandwidths=(1,))
        s.add(weights, mask)
        result[name] = s.result()
    assert result["column"]["gini_columns"] == pytest.approx((T - 1) / T)  # all the mass received by one word
    assert result["band"]["gini_columns"] == pytest.approx(0.0) and result["uniform"]["gini_columns"] == pytest.approx(
        0.0
    )
    assert result["band"]["gini"] == pytest.approx(result["column"]["gini"])  # row sparsity cannot tell them apart
