"""Multi-label documents in the line and folder readers: tuples of labels, from lists, separators, several
fastText prefixes or a file under several label folders; ``multi_label=True`` makes any corpus one."""

from __future__ import annotations

import pytest
from reader_files import build_tar, build_tree, write, write_jsonl

from docattn.data.readers import read_corpus, read_splits
from docattn.errors import ConfigError, DataError


def test_jsonl_label_lists_make_a_multi_label_corpus(tmp_path):
    path = write_jsonl(
        tmp_path / "d.jsonl",
        [
            {"text": "rates and jobs", "label": ["economy", " jobs ", "economy"]},
            {"text": "weather", "label": []},
            {"text": "cup final", "label": "sport"},
        ],
    )
    corpus = read_corpus(path)
    assert corpus.multi_label
    assert corpus.labels == [("economy", "jobs"), (), ("sport",)]  # stripped, each once; a bare label a 1-tuple


def test_jsonl_bare_labels_stay_single_label_unless_asked(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"text": "a", "label": "x"}, {"text": "b", "label": 2}])
    single = read_corpus(path)
    assert not single.multi_label and single.labels == ["x", 2]
    forced = read_corpus(path, multi_label=True)
    assert forced.multi_label and forced.labels == [("x",), (2,)]


@pytest.mark.parametrize(
    "label, message",
    [
        (["a", None], r"d\.jsonl:1: the label list in field 'label' holds null"),
        (["a", ""], r"d\.jsonl:1: the label list in field 'label' holds an empty string"),
        (["a", ["b"]], r"d\.jsonl:1: the label list in field 'label' holds list"),
        ({"a": 1}, r"d\.jsonl:1: label must be a string or a number, found dict"),
    ],
)
def test_jsonl_bad_label_lists_are_one_line_errors(tmp_path, label, message):
    path = write_jsonl(tmp_path / "d.jsonl", [{"text": "a", "label": label}])
    with pytest.raises(DataError, match=message):
        read_corpus(path)


def test_csv_label_sep_splits_the_label_cell(tmp_path):
    path = write(tmp_path / "d.csv", 'text,topics\nrates up,"economy, jobs,,economy"\nno topic,\ncup final,sport\n')
    corpus = read_corpus(path, label_column="topics", label_sep=",")
    assert corpus.multi_label
    assert corpus.labels == [("economy", "jobs"), (), ("sport",)]  # an empty cell: no labels
    with pytest.raises(DataError, match=r"d\.csv:3: missing or empty label"):
        read_corpus(path, label_column="topics")  # without label_sep: one label a cell, and none is an error


def test_tsv_label_sep_with_integer_labels(tmp_path):
    path = write(tmp_path / "d.tsv", "text\tlabel\nfirst\t3|10\nsecond\t2\n")
    corpus = read_corpus(path, label_sep="|")
    assert corpus.labels == [(3, 10), (2,)]  # all-integer labels become ints, in tuples as well


def test_csv_empty_label_cell_is_still_an_error_without_label_sep(tmp_path):
    path = write(tmp_path / "d.csv", "text,label\nfirst,a\nsecond,\n")
    with pytest.raises(DataError, match=r"d\.csv:3: missing or empty label"):
        read_corpus(path, multi_label=True)


def test_fasttext_several_labels_make_the_corpus_multi_label(tmp_path):
    path = write(tmp_path / "cooking.txt", "__label__baking __label__bread How to knead?\n__label__tea  Green tea\n")
    corpus = read_corpus(path)
    assert corpus.multi_label and corpus.labels == [("baking", "bread"), ("tea",)]
    assert corpus.texts == ["How to knead?", "Green tea"]
    single = read_corpus(write(tmp_path / "one.txt", "__label__a x\n__label__b y\n"))
    assert not single.multi_label and single.labels == ["a", "b"]
    assert read_corpus(tmp_path / "one.txt", multi_label=True).labels == [("a",), ("b",)]


def test_multi_label_forces_tuples_on_any_format(tmp_path):
    csv_path = write(tmp_path / "d.csv", "text,label\ngood,1\nbad,0\n")
    corpus = read_corpus(csv_path, multi_label=True)
    assert corpus.multi_label and corpus.labels == [(1,), (0,)]
    folder = build_tree(tmp_path / "f", {"pos/1.txt": "good", "neg/2.txt": "bad"})
    assert read_corpus(folder, multi_label=True).labels == [("neg",), ("pos",)]


def test_ignore_labels_still_drops_multi_labels(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"text": "a", "label": ["x", "y"]}])
    assert read_corpus(path, ignore_labels=True).labels is None
    csv_path = write(tmp_path / "d.csv", 'text,label\na,"x,y"\n')
    assert read_corpus(csv_path, label_sep=",", ignore_labels=True).labels is None


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("d.jsonl", {"label_sep": ","}, r"option\(s\) label_sep do not apply to format 'jsonl'"),
        ("d.txt", {"label_sep": ","}, r"option\(s\) label_sep do not apply to format 'fasttext'"),
        ("d.csv", {"label_sep": ""}, r"label_sep must be a non-empty string"),
        ("d.csv", {"multi_label": "yes"}, r"multi_label must be True or False"),
    ],
)
def test_multi_label_options_are_checked(tmp_path, name, options, message):
    contents = {"d.jsonl": '{"text": "a", "label": "x"}\n', "d.txt": "__label__x a\n", "d.csv": "text,label\na,x\n"}
    path = write(tmp_path / name, contents[name])
    with pytest.raises(ConfigError, match=message) as raised:
        read_corpus(path, **options)
    assert "\n" not in str(raised.value)


# --------------------------------------------------------------------------- folder-per-label trees

_SAME_NAME_DIFFERENT_TEXT = {
    "news-train/comp.graphics/101": "a post about rendering",
    "news-train/sci.space/101": "another post, about orbits",
    "news-train/sci.space/102": "launch window",
    "news-test/comp.graphics/201": "shaders",
}


def test_same_file_name_with_different_texts_stays_two_documents(tmp_path):
    """20 Newsgroups numbers posts per group: one number under two groups is two posts."""
    folder = build_tree(tmp_path / "news", _SAME_NAME_DIFFERENT_TEXT)
    single = read_splits(folder)
    assert not single["train"].multi_label
    assert single["train"].labels == ["comp.graphics", "sci.space", "sci.space"]
    multi = read_splits(folder, multi_label=True)
    assert multi["train"].labels == [("comp.graphics",), ("sci.space",), ("sci.space",)]
    assert multi["train"].texts == single["train"].texts and "merged_documents" not in multi["train"].stats


@pytest.mark.parametrize("container", ["folder", "tar"])
def test_same_file_with_the_same_text_under_two_labels_is_one_multi_label_document(tmp_path, container):
    files = {
        "train/economy/7.txt": "rates rise and jobs grow",
        "train/jobs/7.txt": "rates rise and jobs grow",
        "train/jobs/8.txt": "hiring slows",
        "test/economy/9.txt": "inflation",
    }
    source = (
        build_tree(tmp_path / "reuters", files)
        if container == "folder"
        else build_tar(tmp_path / "reuters.tar.gz", files)
    )
    merged = read_splits(source, multi_label=True)
    train = merged["train"]
    assert train.multi_label and train.labels == [("economy", "jobs"), ("jobs",)]
    assert train.texts == ["rates rise and jobs grow", "hiring slows"]
    assert train.ids[0].endswith("train/economy/7.txt") and train.stats["merged_documents"] == 1
    assert merged["test"].labels == [("economy",)] and train.classes == ["economy", "jobs"]
    kept = read_splits(source)  # without multi_label: as before, one document per file
    assert kept["train"].labels == ["economy", "jobs", "jobs"] and not kept["train"].multi_label
