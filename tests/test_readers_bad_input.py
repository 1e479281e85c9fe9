"""Readers on bad input: one-line errors for bad files and options, empty documents counted, arbitrary text
round-tripped, a run directory refused."""

from __future__ import annotations

import csv
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reader_files import build_tar, build_tree, write

from docattn.data.readers import read_corpus, read_splits
from docattn.errors import ConfigError, DataError


@pytest.mark.parametrize(
    "content, options, message",
    [
        ("title,label\nx,1\n", {}, r"d\.csv:1: no column 'text' in the header \(columns: title, label\)"),
        ("text,label\nx,1\n", {"label_column": "stars"}, r"d\.csv:1: no column 'stars'.*columns: text, label"),
        ("a,b\nx,1\n", {}, r"d\.csv:1: no header row with a 'text' column"),
        ("text,label\ngood,1\nbad\n", {}, r"d\.csv:3: expected at least 2 fields, found 1"),
        ("text,label\ngood,1\nbad, \n", {}, r"d\.csv:3: missing or empty label"),
        ('text,label\ngood,1\n"unterminated,1\n', {}, r"d\.csv:3: malformed CSV record"),
        ("x,1\n", {"text_columns": [3], "label_column": 1, "header": False}, r"d\.csv:1: expected at least 4 fields"),
    ],
)
def test_bad_csv(tmp_path, content, options, message):
    with pytest.raises(DataError, match=message):
        read_corpus(write(tmp_path / "d.csv", content), **options)


@pytest.mark.parametrize(
    "content, options, message",
    [
        ('{"text": "a", "label": 1}\n{"text": "b", "label": 2,\n', {}, r"d\.jsonl:2: malformed JSON"),
        ('{"text": "a", "label": 1}\n[1, 2]\n', {}, r"d\.jsonl:2: expected a JSON object per line, found list"),
        ('{"body": "a", "label": 1}\n', {}, r"d\.jsonl:1: no field 'text' \(fields: body, label\)"),
        ('{"text": "a"}\n', {"label_field": "y"}, r"d\.jsonl:1: no field 'y'"),
        ('{"text": "a", "label": 1}\n{"text": "b"}\n', {}, r"d\.jsonl:2: missing or empty label"),
        ('{"text": "a", "label": " "}\n', {}, r"d\.jsonl:1: missing or empty label"),
        ('{"text": "a", "label": null}\n', {}, r"d\.jsonl:1: missing or empty label"),
        ('{"text": 3, "label": 1}\n', {}, r"d\.jsonl:1: field 'text' must be a string"),
        ('{"text": "a", "label": {"a": 1}}\n', {}, r"d\.jsonl:1: label must be a string or a number"),
        ('{"text": "a", "label": 1, "sentences": "a"}\n', {}, r"d\.jsonl:1: field 'sentences' must be a list"),
    ],
)
def test_bad_jsonl(tmp_path, content, options, message):
    with pytest.raises(DataError, match=message):
        read_corpus(write(tmp_path / "d.jsonl", content), **options)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("d.txt", "__label__a fine\nno label here\n", r"d\.txt:2: expected the line to start with __label__"),
        ("d.ft", "__label__ text\n", r"d\.ft:1: missing or empty label"),
        ("d.ss", "u\t\tp\t\t5\t\tgood\nu\t\tp\t\tbad\n", r"d\.ss:2: expected 4 fields separated by two tabs"),
        ("d.ss", "u\t\tp\t\tfive\t\tgood\n", r"d\.ss:1: expected an integer rating"),
        ("d.ss", "u\t\tp\t\t \t\tgood\n", r"d\.ss:1: missing or empty label"),
    ],
)
def test_bad_line_formats(tmp_path, name, content, message):
    with pytest.raises(DataError, match=message):
        read_corpus(write(tmp_path / name, content))


def test_bad_zhang(tmp_path):
    write(tmp_path / "z" / "classes.txt", "A\nB\n")
    with pytest.raises(DataError, match=r"train\.csv:2: class 3 is outside 1-2"):
        read_corpus(write(tmp_path / "z" / "train.csv", '"1","t","x"\n"3","t","y"\n'))
    with pytest.raises(DataError, match=r"train\.csv:1: expected a 1-based class number"):
        read_corpus(write(tmp_path / "z" / "train.csv", '"World","t","x"\n'))
    with pytest.raises(DataError, match=r"train\.csv:1: expected a class and at least one text field"):
        read_corpus(write(tmp_path / "z" / "train.csv", '"1"\n'))


def test_empty_documents_are_skipped_and_counted_or_an_error(tmp_path):
    path = write(tmp_path / "d.csv", "text,label\ngood,1\n  ,0\n,0\nbad,0\n")
    corpus = read_corpus(path)
    assert corpus.texts == ["good", "bad"] and corpus.stats["skipped_empty"] == 2
    with pytest.raises(DataError, match=r"d\.csv:3: empty document"):
        read_corpus(path, on_empty="error")
    folder = build_tree(tmp_path / "f", {"pos/1.txt": "ok", "neg/2.txt": "\n"})
    with pytest.raises(DataError, match=r"neg/2\.txt: empty document"):
        read_corpus(folder, on_empty="error")


@pytest.mark.parametrize(
    "name, content",
    [
        ("e.csv", "text,label\n ,1\n"),
        ("e.jsonl", "\n\n"),
        ("e.txt", ""),
        ("e.ss", "\n"),
    ],
)
def test_no_documents(tmp_path, name, content):
    with pytest.raises(DataError, match=r"no documents in .*e\.(csv|jsonl|txt|ss)"):
        read_corpus(write(tmp_path / name, content))


def test_no_documents_in_folder(tmp_path):
    with pytest.raises(DataError, match=r"no documents in .*flat .*label folders"):
        read_corpus(build_tree(tmp_path / "flat", {"a.txt": "x", "train/b.txt": "y"}))


def test_missing_path_and_unknown_format(tmp_path):
    with pytest.raises(DataError, match=r"nope\.csv: no such file"):
        read_corpus(tmp_path / "nope.csv")
    with pytest.raises(DataError, match=r"data\.bin: cannot tell the format.*csv, tsv, jsonl"):
        read_corpus(write(tmp_path / "data.bin", "hello\n"))
    with pytest.raises(DataError, match=r"format 'folder' reads a directory"):
        read_corpus(write(tmp_path / "x.csv", "text\na\n"), format="folder")


def test_corrupt_archives(tmp_path):
    garbage = write(tmp_path / "garbage.tar.gz", b"\x1f\x8b" + b"not really gzip" * 10)
    with pytest.raises(DataError, match=r"garbage\.tar\.gz: corrupt or unreadable archive"):
        read_splits(garbage)
    whole = build_tar(tmp_path / "whole.tar.gz", {f"pos/{i}.txt": f"document {i} " * 200 for i in range(50)})
    truncated = write(tmp_path / "cut.tar.gz", whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(DataError, match=r"cut\.tar\.gz: corrupt or unreadable archive at member 'pos/"):
        read_splits(truncated)
    with pytest.raises(DataError, match=r"bad\.zip: corrupt or unreadable archive"):
        read_splits(write(tmp_path / "bad.zip", b"PK\x03\x04 broken"))
    with pytest.raises(DataError, match=r"plain\.tar: corrupt or unreadable archive"):
        read_splits(write(tmp_path / "plain.tar", b"x" * 2048))


def test_bad_options_are_config_errors(tmp_path):
    path = write(tmp_path / "d.csv", "text,label\na,1\n")
    with pytest.raises(ConfigError, match="text_field"):
        read_corpus(path, text_field="body")
    with pytest.raises(ConfigError, match="on_empty"):
        read_corpus(path, on_empty="ignore")
    with pytest.raises(ConfigError, match="unknown format"):
        read_corpus(path, format="xml")


def test_control_characters_and_bom_never_reach_the_text(tmp_path):
    path = write(tmp_path / "d.csv", '\ufefftext,label\n"a\x00b\x1ec",1\n')
    assert read_corpus(path).texts == ["a b c"]
    escaped = write(tmp_path / "d.jsonl", '{"text": "a\\u0000b\\u001ec", "label": 1}\n')
    assert read_corpus(escaped).texts == ["a b c"]


# --------------------------------------------------------------------------- property: arbitrary text round-trips


def expected_text(text: str) -> str | None:
    cleaned = text.replace("\x00", " ").replace("\x1e", " ")
    return None if not cleaned or cleaned.isspace() else cleaned


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(), min_size=1, max_size=5), ensure_ascii=st.booleans())
def test_arbitrary_text_round_trips_through_jsonl(texts, ensure_ascii):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "d.jsonl"
        rows = [{"text": t, "label": i} for i, t in enumerate(texts)] + [{"text": "anchor", "label": -1}]
        write(path, "".join(json.dumps(r, ensure_ascii=ensure_ascii) + "\n" for r in rows))
        corpus = read_corpus(path)
    kept = [(expected_text(t), i) for i, t in enumerate(texts) if expected_text(t) is not None]
    assert list(zip(corpus.texts, corpus.labels)) == [*kept, ("anchor", -1)]
    assert corpus.stats["skipped_empty"] == len(texts) - len(kept)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(), min_size=1, max_size=5))
def test_arbitrary_text_round_trips_through_csv(texts):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "d.csv"
        with open(path, "w", encoding="utf-8", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow(["label", "text"])
            writer.writerows([[f"c{i}", t] for i, t in enumerate(texts)] + [["anchor", "anchor"]])
        corpus = read_corpus(path)
    kept = [(expected_text(t), f"c{i}") for i, t in enumerate(texts) if expected_text(t) is not None]
    assert list(zip(corpus.texts, corpus.labels)) == [*kept, ("anchor", "anchor")]


def test_a_run_directory_is_not_read_as_data(tmp_path):
    """A trained model's folder (config.json + vocab.json) would otherwise read as one document per file."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    for name in ("config.json", "vocab.json"):
        (run / name).write_text("{}")
    (run / "checkpoints" / "last.ckpt").write_bytes(b"\x80\x02binary")
    with pytest.raises(DataError, match="is a docattn run directory"):
        read_splits(run)
