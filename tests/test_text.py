"""Sentence splitting, tokenization and the vocabulary."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docattn.data.encoding import encode_ids
from docattn.data.text import (
    PAD,
    SEP,
    SEP_TOKEN,
    UNK,
    TextConfig,
    Vocabulary,
    documents_to_strings,
    split_sentences,
)
from docattn.errors import CheckpointError, ConfigError


def test_sentence_split_handles_abbreviations():
    sents = split_sentences("Dr. Smith arrived at 3 p.m. in the U.S. capital. It was not good! Really?")
    assert sents[0].startswith("Dr. Smith") and len(sents) == 3


def test_a_blank_line_ends_a_sentence_and_a_single_line_break_does_not():
    text = "From: a@b.org\nSubject: hello\n\nThe post wraps\nat the margin. Second one.\n \t\n\nSignature here"
    assert split_sentences(text) == [
        "From: a@b.org Subject: hello",
        "The post wraps at the margin.",
        "Second one.",
        "Signature here",
    ]
    assert split_sentences(text, paragraphs=False)[0].endswith(
        "hello  The post wraps at the margin."
    )  # blingfire alone
    cfg = TextConfig()
    joined = documents_to_strings([text], None, cfg)[0]
    assert joined.count("\x1e") == 3
    legacy = documents_to_strings([text], None, TextConfig(paragraphs=False))[0]
    assert legacy.count("\x1e") == 2


def test_lowercased_text_is_split_like_cased_text():
    """blingfire ends a sentence only before a capital; a corpus without capitals is split all the same."""
    text = 'the film is superb . the film\nis awful . "really?" (i liked it.) ß is no capital. i met dr. smith.'
    assert split_sentences(text) == [
        "the film is superb .",
        "the film is awful .",
        '"really?"',
        "(i liked it.)",
        "ß is no capital.",
        "i met dr. smith.",
    ]
    assert (
        split_sentences(text, caseless=False)[0] == 'the film is superb . the film is awful . "really?"'
    )  # blingfire alone
    cased = "It was approx. five minutes. The cat vs. the dog."  # capitals present: blingfire alone decides
    assert split_sentences(cased) == split_sentences(cased, caseless=False)
    assert TextConfig.from_json({"lowercase": True, "paragraphs": True}).caseless_sentences is False  # saved before


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("ab z.!?\n,'\"(é漢ß😀\x85") + ["Mr. ", "U.S. ", ". A"]), min_size=1).map("".join))
def test_sentence_offsets_are_blingfires_own(text):
    """The vectorised byte-to-character mapping gives what blingfire's per-byte Python loop gives."""
    import blingfire

    from docattn.data.text import _sentence_offsets

    assert _sentence_offsets(text) == [tuple(o) for o in blingfire.text_to_sentences_and_offsets(text)[1]]


def test_text_settings_saved_before_paragraphs_existed_keep_their_splitting():
    old = {"lowercase": True, "hcan_clean": False, "split_sentences": True, "unicode_normalize": True}
    assert TextConfig.from_json(old).paragraphs is False
    assert TextConfig.from_json(TextConfig().to_json()) == TextConfig()


def test_html_line_breaks_are_line_breaks_not_words():
    """IMDB breaks its paragraphs with <br /><br />: read as text, the tag was four words inside a sentence
    that ran on into the next paragraph."""
    cfg = TextConfig()
    review = "A fine cast.<br /><br />the plot drags<BR>and then<br/>ends. Sad!"
    strings = documents_to_strings([review], None, cfg)
    assert strings == [f"A fine cast. {SEP_TOKEN} the plot drags and then ends. {SEP_TOKEN} Sad!"]
    assert documents_to_strings([review], [["A<br />B", "C"]], cfg) == [f"A B {SEP_TOKEN} C"]
    assert documents_to_strings([review], None, TextConfig(split_sentences=False)) == [
        "A fine cast.  the plot drags and then ends. Sad!"
    ]
    as_text = documents_to_strings([review], None, TextConfig(html_breaks=False))[0]
    assert "<br /><br />the plot" in as_text and as_text.count(SEP_TOKEN) == 1
    assert documents_to_strings(["a <b>bold</b> claim: 1<2"], None, cfg) == ["a <b>bold</b> claim: 1<2"]
    saved_before = {k: v for k, v in TextConfig().to_json().items() if k != "html_breaks"}
    assert TextConfig.from_json(saved_before).html_breaks is False  # runs and caches keep their reading


def test_presplit_sentences_are_respected():
    cfg = TextConfig()
    s = documents_to_strings(["ignored"], [["One. Two.", "Three"]], cfg)[0]
    vocab = Vocabulary.build([s], cfg, min_count=1)
    tokens, sent_off, doc_off = encode_ids(vocab.encode_strings([s]))
    assert list(doc_off) == [0, 2]  # "One. Two." stays one sentence because it was given as one


def test_vocabulary_min_count_and_special_ids(tmp_path):
    cfg = TextConfig()
    docs = documents_to_strings(["Good good GOOD bad. rare"], None, cfg)
    vocab = Vocabulary.build(docs, cfg, min_count=2)
    assert vocab.tokens[:3] == ["<pad>", "<unk>", "\x1e"] and (PAD, UNK, SEP) == (0, 1, 2)
    assert "good" in vocab.index and "rare" not in vocab.index and "bad" not in vocab.index
    ids = vocab.encode_strings(documents_to_strings(["good rare"], None, cfg))[0]
    assert ids == [vocab.index["good"], UNK]
    vocab.save(tmp_path / "v.json")
    again = Vocabulary.load(tmp_path / "v.json")
    assert again.tokens == vocab.tokens and again.text_config == cfg
    assert json.loads((tmp_path / "v.json").read_text())["min_count"] == 2


def test_han_characters_are_tokens_of_their_own():
    """Chinese and Japanese have no spaces: a clause must not become one token, seen once."""
    cfg = TextConfig(split_sentences=False)
    vocab = Vocabulary.build(documents_to_strings(["x"], None, cfg), cfg, min_count=1)
    assert vocab.tokenize("这部电影很好看，我喜欢！") == [
        "这",
        "部",
        "电",
        "影",
        "很",
        "好",
        "看",
        ",",
        "我",
        "喜",
        "欢",
        "!",
    ]  # NFKC: full-width marks
    assert vocab.tokenize("これは映画です。") == ["これは", "映", "画", "です", "。"]
    assert vocab.tokenize("Don't stop: 한국어 문장, naïve café مرحبا") == [
        "don't",
        "stop",
        ":",
        "한국어",
        "문장",
        ",",
        "naïve",
        "café",
        "مرحبا",
    ]
    saved_before = Vocabulary.from_json(
        {
            **vocab.to_json(),
            "text_config": {k: v for k, v in vocab.to_json()["text_config"].items() if k != "han_characters"},
        }
    )
    assert saved_before.tokenize("这部电影很好看") == [
        "这部电影很好看"
    ]  # as it was trained: its vocabulary holds clauses


def test_max_vocab_size():
    cfg = TextConfig()
    docs = documents_to_strings(["a a a b b c c d"] * 5, None, cfg)
    assert len(Vocabulary.build(docs, cfg, min_count=1, max_size=2)) == 3 + 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_vocabulary_from_counts_is_the_trainers(seed):
    """Chunked preparation counts words itself (``from_counts``): the same order as the Rust trainer's (most
    frequent first, ties by word), the same min_count, and SEP, which the trainer counts as a word, taking a
    place among max_size."""
    from collections import Counter

    cfg = TextConfig()
    rng = np.random.default_rng(seed)
    words = ["b", "a", "ab", "Zed", "été", "x9", "don't", "!", "?"]
    docs = [
        ". ".join(" ".join(rng.choice(words, rng.integers(1, 6))) for _ in range(rng.integers(1, 4))) + "."
        for _ in range(40)
    ]
    strings = documents_to_strings(docs, None, cfg)
    surface = Vocabulary.build(["x"], cfg, min_count=1)  # any vocabulary of these settings tokenizes alike
    counted = Counter(t for s in strings for t in surface.tokenize(s))
    assert counted[SEP_TOKEN] > 0
    names, counts = list(counted), list(counted.values())
    for min_count in (1, 3, 30):
        for max_size in (None, 1, 2, 4, 100):
            built = Vocabulary.build(strings, cfg, min_count, max_size)
            assert Vocabulary.from_counts(names, counts, cfg, min_count, max_size).tokens == built.tokens


def test_hcan_cleaning_keeps_alphanumerics_and_sentence_marks():
    cfg = TextConfig(hcan_clean=True)
    docs = documents_to_strings(['Great -- "movie", 10/10!!! (really?)'], None, cfg)
    vocab = Vocabulary.build(docs, cfg, min_count=1)
    assert set(vocab.tokens[3:]) <= {"great", "movie", "10", "!", "really", "?"}
    assert "," not in vocab.index and '"' not in vocab.index


@pytest.mark.parametrize(
    "tokens,message",
    [
        (["<pad>", "<unk>", "\x1e", "good", "bad", "good"], "'good' more than once"),
        (["<pad>", "<unk>", "\x1e", 7], "not a list of strings"),
        (["good", "bad"], "does not start with"),
    ],
)
def test_a_malformed_vocabulary_file_is_one_error_naming_it(tmp_path, tokens, message):
    cfg = TextConfig()
    Vocabulary.build(documents_to_strings(["good bad"], None, cfg), cfg, min_count=1).save(tmp_path / "v.json")
    data = json.loads((tmp_path / "v.json").read_text())
    (tmp_path / "v.json").write_text(json.dumps({**data, "tokens": tokens}))
    with pytest.raises(CheckpointError, match=f"v\\.json: .*{message}"):
        Vocabulary.load(tmp_path / "v.json")


def test_bad_vocab_inputs(tmp_path):
    with pytest.raises(ConfigError):
        Vocabulary.build(["x"], TextConfig(), min_count=0)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        Vocabulary.load(tmp_path / "bad.json")
    with pytest.raises(CheckpointError, match="not found"):
        Vocabulary.load(tmp_path / "missing.json")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=4))
def test_any_unicode_encodes_without_error(texts):
    """Arbitrary Unicode (controls, surrogate-free astral chars, RTL, combining marks) never breaks encoding."""
    cfg = TextConfig()
    strings = documents_to_strings(texts, None, cfg)
    vocab = Vocabulary.build(strings, cfg, min_count=1)
    tokens, sent_off, doc_off = encode_ids(vocab.encode_strings(strings))
    assert len(doc_off) == len(texts) + 1
    assert (doc_off[1:] > doc_off[:-1]).all()  # every document has >= 1 sentence
    assert (sent_off[1:] > sent_off[:-1]).all()  # every sentence has >= 1 word
    assert (tokens != SEP).all() and (tokens >= 1).all()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.text(), max_size=4), min_size=1, max_size=3), st.booleans())
def test_any_unicode_presplit_and_hcan(sentences, hcan):
    cfg = TextConfig(hcan_clean=hcan)
    strings = documents_to_strings(["" for _ in sentences], sentences, cfg)
    vocab = Vocabulary.build(strings, cfg, min_count=1)
    tokens, sent_off, doc_off = encode_ids(vocab.encode_strings(strings))
    assert len(doc_off) == len(sentences) + 1
