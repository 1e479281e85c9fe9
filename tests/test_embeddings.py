"""Pre-trained vector files: every format users download, gzipped or not, and bad files named."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from docattn.data.embeddings import load_vectors
from docattn.data.text import SPECIAL_TOKENS, TextConfig, Vocabulary
from docattn.errors import DataError

VOCAB = Vocabulary(SPECIAL_TOKENS + ["good", "bad", "film", "the"], TextConfig())
ROWS = {"good": [0.5, -1.0, 2.0], "bad": [1.5, 0.0, -0.25], ".": [9.0, 9.0, 9.0], "film": [0.125, 3.0, 1.0]}


def _lines(rows: dict[str, list[float]], trailing: str = "") -> str:
    return "".join(f"{w} " + " ".join(str(x) for x in v) + trailing + "\n" for w, v in rows.items())


def _check(matrix, coverage):
    assert matrix.shape == (len(VOCAB), 3) and matrix.dtype == np.float32
    for word in ("good", "bad", "film"):
        np.testing.assert_allclose(matrix[VOCAB.index[word]], ROWS[word])
    assert coverage.words_found == 3 and coverage.vocab_size == 4
    np.testing.assert_array_equal(matrix[0], 0.0)
    assert np.abs(matrix[VOCAB.index["the"]]).max() < 1  # no vector in the file: a small random start


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize("kind", ["glove", "word2vec-text", "fasttext-vec"])
def test_text_formats(tmp_path, kind, gz):
    body = {
        "glove": _lines(ROWS),
        "word2vec-text": f"{len(ROWS)} 3\n" + _lines(ROWS),
        "fasttext-vec": f"{len(ROWS)} 3\n" + _lines(ROWS, trailing=" "),
    }[kind]  # fastText ends lines with a space
    path = tmp_path / ("vectors.vec" if kind == "fasttext-vec" else "vectors.txt")
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(body.encode()))
    else:
        path.write_text(body)
    _check(*load_vectors(path, VOCAB))


@pytest.mark.parametrize("name", ["vectors.bin", "vectors.bin.gz"])
def test_word2vec_binary(tmp_path, name):
    from gensim.models import KeyedVectors

    kv = KeyedVectors(3)
    kv.add_vectors(list(ROWS), np.array(list(ROWS.values()), dtype=np.float32))
    kv.save_word2vec_format(str(tmp_path / name), binary=True)
    _check(*load_vectors(tmp_path / name, VOCAB))


def test_glove_840b_keys_with_spaces_are_skipped(tmp_path):
    """GloVe-840B has keys such as '. . .': the last dim fields are the vector, the rest the key."""
    path = tmp_path / "glove.840B.txt"
    path.write_text(_lines(ROWS) + ". . . 7 7 7\ngood bad 8 8 8\n")
    _check(*load_vectors(path, VOCAB))


def test_first_occurrence_wins(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text(_lines(ROWS) + "good 4 4 4\n")
    matrix, _ = load_vectors(path, VOCAB)
    np.testing.assert_allclose(matrix[VOCAB.index["good"]], ROWS["good"])


def test_token_share_counts_running_text(tmp_path):
    from docattn.data.encoding import EncodedCorpus

    path = tmp_path / "glove.txt"
    path.write_text(_lines(ROWS))
    ids = np.array([VOCAB.index[w] for w in ["good", "the", "the", "film"]], dtype=np.int32)
    corpus = EncodedCorpus(ids, np.array([0, 4]), np.array([0, 1]), np.array([0]))
    _, coverage = load_vectors(path, VOCAB, corpus)
    assert coverage.token_share == pytest.approx(0.5)


@pytest.mark.parametrize(
    "body, message",
    [
        ("", "empty vector file"),
        ("text,label\nhello,1\n", r":1: not a GloVe/word2vec vector file"),
        ("good 1 2 3\nbad 1 2\n", r":2: 2 values, expected 3"),
        ("good 1 2 3\nfilm 1 x 3\n", r":2: the values of 'film' are not all numbers"),
        ("5 0\n", r":1: the header gives 0 dimensions"),
        ("good 1 2 3\nfilm nan 1 2\n", r":2: the vector of 'film' holds NaN or infinite values"),
        ("2 3\ngood 1 2 3 4 5 6\nbad 1 2 3 4 5 6\n", r":2: 6 values, expected 3 \(as the header says\)"),
    ],
    ids=["empty", "csv", "short-line", "not-numbers", "zero-dim", "nan", "header-dim"],
)
def test_bad_files_are_named(tmp_path, body, message):
    path = tmp_path / "vectors.txt"
    path.write_text(body)
    with pytest.raises(DataError, match=message):
        load_vectors(path, VOCAB)


def test_missing_folder_and_bad_binary(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_vectors(tmp_path / "nope.txt", VOCAB)
    with pytest.raises(DataError, match="is a folder"):
        load_vectors(tmp_path, VOCAB)
    (tmp_path / "model.bin").write_bytes(b"\x00\x01garbage")
    with pytest.raises(DataError, match="not a word2vec binary vector file"):
        load_vectors(tmp_path / "model.bin", VOCAB)


@pytest.mark.parametrize("header", [False, True], ids=["glove", "word2vec-text"])
def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path, header):
    path = tmp_path / "vectors.txt"
    path.write_text(("\ufeff" + f"{len(ROWS)} 3\n" if header else "\ufeff") + _lines(ROWS), encoding="utf-8")
    _check(*load_vectors(path, VOCAB))


def test_a_file_without_any_vocabulary_word_is_refused(tmp_path):
    """Every word would start random, silently: surely the wrong file (cased vectors, lowercased text)."""
    from docattn.classifier import DocumentClassifier
    from docattn.data import synthetic
    from docattn.data.prepare import DataSettings, prepare

    sp = synthetic.make_splits(n_train=60, n_test=20, seed=1)
    data = prepare(sp["train"], None, None, DataSettings(min_count=2))
    path = tmp_path / "cased.txt"
    path.write_text("Good 1 2 3 4\nBad 1 2 3 4\n")
    with pytest.raises(
        DataError,
        match=r"cased\.txt: none of the vocabulary's .* words has a vector there \(the vocabulary is lowercased",
    ):
        DocumentClassifier(
            "han", max_epochs=1, embeddings=str(path), embedding_dim=4, hidden_size=4, context_dim=4, progress=False
        ).fit_prepared(data)


def test_packaged_vectors_cover_every_word_and_place_related_words_together():
    from docattn.data.embeddings import packaged_vectors
    from docattn.data.text import SPECIAL_TOKENS, TextConfig, Vocabulary

    words = ["good", "great", "terrible", "bad", "football", "election"]
    vocab = Vocabulary.build([" ".join(words)] * 3, TextConfig(), min_count=1)
    matrix, coverage = packaged_vectors("wordllama", vocab, spread=0.3)
    assert matrix.shape == (len(vocab), 256) and coverage.words_found == len(vocab) - len(SPECIAL_TOKENS)
    assert abs(matrix[len(SPECIAL_TOKENS) :].std() - 0.3) < 1e-3 and not matrix[0].any()  # PAD stays zero
    unit = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    sim = lambda a, b: float(unit[vocab.index[a]] @ unit[vocab.index[b]])  # noqa: E731
    assert sim("good", "great") > sim("good", "football") and sim("bad", "terrible") > sim("bad", "election")
