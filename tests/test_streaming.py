"""Streaming reads: chunks join to the corpus read whole; predict, evaluate and explain read in chunks and give
what the in-memory path gave; predict answers a pipe before it is closed; bad input mid-stream is one line."""

from __future__ import annotations

import gc
import json
import selectors
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from cli_runs import DOCATTN, run_cli
from reader_files import build_tree, write, write_jsonl
from tiny_runs import train_tiny_run
from typer.testing import CliRunner

from docattn.cli import app
from docattn.data import synthetic
from docattn.data.readers import read_corpus
from docattn.data.readers.stream import integer_labels, iter_chunks, pick
from docattn.errors import DataError

CHUNK_SIZES = (1, 7, 1000)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return train_tiny_run("han", tmp_path_factory.mktemp("streaming") / "run")


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> Path:
    """120 labelled documents, with an empty one every 40 (skipped, and said so)."""
    test = synthetic.make_splits(n_train=10, n_test=120, seed=9)["test"]
    records = []
    for i, (text, label) in enumerate(zip(test.texts, test.labels)):
        records.append({"text": text, "label": label})
        if i % 40 == 0:
            records.append({"text": " ", "label": label})
    return write_jsonl(tmp_path_factory.mktemp("documents") / "docs.jsonl", records)


def _joined(chunks, chunk_size: int) -> tuple[list, list, list]:
    texts, labels, ids = [], [], []
    for chunk in chunks:
        assert 0 < len(chunk) <= chunk_size
        texts += chunk.texts
        ids += chunk.ids
        labels += chunk.labels if chunk.labels is not None else [None] * len(chunk)
    return texts, labels, ids


@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_chunks_join_to_the_corpus_read_whole(tmp_path, chunk_size):
    files = {
        "a.jsonl": "".join(json.dumps({"text": f"doc {i} " * (i % 4), "label": i % 3}) + "\n" for i in range(40)),
        "a.csv": "text,label\n" + "".join(f"doc {i},{i % 11}\n" for i in range(30)),
        "a.ft": "".join(f"__label__{i % 2} doc {i}\n" for i in range(20)) + "__label__a __label__b x\n",
    }
    build_tree(
        tmp_path / "tree",
        {f"{s}/{y}/{i}.txt": f"{s} {y} {i}" for s in ("train", "test") for y in "ab" for i in range(9)},
    )
    for name, text in files.items():
        write(tmp_path / name, text)
    for path, split in [*((tmp_path / name, None) for name in files), (tmp_path / "tree", ("test", "all"))]:
        whole = read_corpus(path, split="test" if split else None)
        chunks = iter_chunks(path, chunk_size, split)
        texts, labels, ids = _joined(chunks, chunk_size)
        if chunks.integer_labels:  # "7" in a CSV is 7 once every label is seen to be an integer
            labels = integer_labels(labels)
        if chunks.multi_label:
            labels = [y if isinstance(y, tuple) else (y,) for y in labels]
        assert (texts, labels, ids) == (whole.texts, whole.labels, whole.ids), path
        assert chunks.stats == whole.stats and chunks.classes == whole.classes and chunks.documents == len(whole)


def test_stopping_early_stops_the_reader(tmp_path):
    path = write(tmp_path / "many.txt", "".join(f"document {i}\n" for i in range(5000)))
    with iter_chunks(path, 1) as chunks:
        first = next(chunks)
    chunks._thread.join(timeout=5)  # close() waits a second; a loaded machine may take longer
    assert first.ids == ["1"] and not chunks._thread.is_alive()
    dropped = iter_chunks(path, 1)
    next(dropped)
    thread = dropped._thread
    del dropped  # never closed: collecting it stops the reader, which holds no reference to it
    gc.collect()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_bad_input_mid_stream_is_raised_where_it_is_reached(tmp_path):
    path = write(tmp_path / "bad.jsonl", "".join(json.dumps({"text": f"d{i}"}) + "\n" for i in range(20)) + "{oops\n")
    read = 0
    with pytest.raises(DataError, match=r"bad\.jsonl:21: malformed JSON"):
        for chunk in iter_chunks(path, 5):
            read += len(chunk)
    assert read == 20


def _in_memory_lines(run: Path, path: Path) -> str:
    """What ``docattn predict`` wrote before it streamed: the whole corpus read, predicted, then written."""
    from docattn.classifier import DocumentClassifier
    from docattn.cli.evaluate import prediction_lines

    clf = DocumentClassifier.load(run)
    corpus = read_corpus(path, ignore_labels=True)
    return prediction_lines(clf, corpus.ids, clf.predict_proba(corpus))


@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_streamed_predictions_match_the_in_memory_ones(run, documents, chunk_size):
    res = CliRunner().invoke(app, ["predict", str(run), str(documents), "--chunk-size", str(chunk_size)])
    assert res.exit_code == 0, res.output
    assert "note: 3 empty document(s) skipped" in res.stderr
    expected = _in_memory_lines(run, documents)
    if chunk_size >= 120:  # one chunk: the same batches, the same bytes
        assert res.stdout == expected
        return
    # other batches pad to other lengths: a float's last bits, and so a 6th decimal, may differ
    streamed = [json.loads(line) for line in res.stdout.splitlines()]
    whole = [json.loads(line) for line in expected.splitlines()]
    assert [(s["id"], s["prediction"]) for s in streamed] == [(w["id"], w["prediction"]) for w in whole]
    for s, w in zip(streamed, whole):
        assert np.allclose(list(s["probabilities"].values()), list(w["probabilities"].values()), atol=2e-6, rtol=0)


def _line_within(stream, seconds: float) -> str:
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if selector.select(timeout=max(0.0, deadline - time.monotonic())):
            return stream.readline()
    return ""


def test_predict_answers_a_pipe_that_is_still_open(run):
    proc = subprocess.Popen(
        [*DOCATTN, "predict", str(run), "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        proc.stdin.write(b"a great phone . i love it\n")
        proc.stdin.flush()
        first = _line_within(proc.stdout, 60)  # the model loads in seconds; a full chunk never comes
        proc.stdin.write(b"the screen was bad . sad\n")
        proc.stdin.flush()
        second = _line_within(proc.stdout, 60)
    finally:
        proc.stdin.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert json.loads(first)["id"] == "1" and json.loads(second)["id"] == "2"


def test_bad_input_mid_stream_is_one_line_after_the_lines_before_it(run, tmp_path):
    good = "".join(json.dumps({"text": f"a great phone {i}"}) + "\n" for i in range(30))
    path = write(tmp_path / "late.jsonl", good + '{"text": oops}\n')
    res = run_cli("predict", str(run), str(path), "--chunk-size", "7")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        f"error: {path}:31: malformed JSON (Expecting value at column 10); expected one JSON object per line"
    ]
    assert len(res.stdout.splitlines()) == 28  # every full chunk before the bad line was written


def test_streamed_evaluation_matches_the_in_memory_one(run, documents):
    from docattn.classifier import DocumentClassifier
    from docattn.training.trainer import evaluate_encoded

    clf = DocumentClassifier.load(run)
    whole = evaluate_encoded(clf, clf.encode(read_corpus(documents)))
    kept = []  # the guardrail baseline's scores and the documents seen in training, at each chunk size
    for chunk_size in CHUNK_SIZES:
        res = CliRunner().invoke(
            app, ["evaluate", str(run), "--data", str(documents), "--json", "--chunk-size", str(chunk_size)]
        )
        assert res.exit_code == 0, res.output
        streamed = json.loads(res.stdout)
        for key in ("documents", "accuracy", "macro_f1", "confusion_matrix", "per_class"):
            assert streamed[key] == whole[key], key
        kept.append((streamed["baseline"], streamed["seen_in_training"]))
    assert kept[0][0]["documents"] == 120 and kept[0][1] is not None and kept.count(kept[0]) == len(kept)


def test_explain_draws_the_documents_the_whole_corpus_did(run, documents, tmp_path):
    whole = read_corpus(documents)
    for seed in (0, 7):
        drawn = np.sort(np.random.default_rng(seed).choice(len(whole), 5, replace=False))
        for chunk_size in CHUNK_SIZES:
            assert pick(documents, 5, seed, chunk_size).ids == [whole.ids[i] for i in drawn]
    assert pick(documents, 5, None, 7).ids == whole.ids[:5]
    out = tmp_path / "weights.json"
    args = ["explain", str(run), "--data", str(documents), "--n", "5", "--seed", "7", "--json", str(out)]
    res = CliRunner().invoke(app, [*args, "--html", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    drawn = np.sort(np.random.default_rng(7).choice(len(whole), 5, replace=False))
    assert [item["id"] for item in json.loads(out.read_text())] == [whole.ids[i] for i in drawn]


def test_a_multi_label_run_streams_to_the_scores_and_lines_read_whole(tmp_path):
    """Chunks of documents with one label read bare, beside chunks with several: the model's label sets either way."""
    import warnings

    from docattn.classifier import DocumentClassifier
    from docattn.cli.evaluate import prediction_lines
    from docattn.training.trainer import evaluate_encoded

    rng = np.random.default_rng(0)
    topics = {"sport": "goal match team", "money": "bank price stock", "tech": "chip phone code"}
    labels = [[k for k in topics if rng.random() < 0.4] for _ in range(400)]
    filler = ["the", "a", "of", "and", "to", "in", "is", "was", "it", "for"]
    texts = [" ".join([*rng.choice(filler, 20), *(w for k in ys for w in topics[k].split())]) + "." for ys in labels]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DocumentClassifier("logreg").fit(texts[:300], labels[:300], run_dir=tmp_path / "run")
    clf = DocumentClassifier.load(tmp_path / "run")
    lines = "".join(
        " ".join(f"__label__{y}" for y in ys) + f" {text}\n" for text, ys in zip(texts[300:], labels[300:]) if ys
    )
    path = write(tmp_path / "topics.ft", lines)
    whole = read_corpus(path)
    assert whole.multi_label and any(len(y) == 1 for y in whole.labels)
    expected = evaluate_encoded(clf, clf.encode(whole))
    for chunk_size in CHUNK_SIZES:
        args = ["evaluate", str(tmp_path / "run"), "--data", str(path), "--json", "--chunk-size", str(chunk_size)]
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        streamed = json.loads(res.stdout)
        for key in ("documents", "micro_f1", "macro_f1", "accuracy", "hamming_loss", "per_class"):
            assert streamed[key] == expected[key], (chunk_size, key)
        res = CliRunner().invoke(app, ["predict", str(tmp_path / "run"), str(path), "--chunk-size", str(chunk_size)])
        predicted = [json.loads(line) for line in res.stdout.splitlines()]
        in_memory = [
            json.loads(line) for line in prediction_lines(clf, whole.ids, clf.predict_proba(whole)).splitlines()
        ]
        assert [(p["id"], p["prediction"]) for p in predicted] == [(p["id"], p["prediction"]) for p in in_memory]
