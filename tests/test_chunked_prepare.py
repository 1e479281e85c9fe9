"""Chunked preparation gives the arrays, vocabulary and splits of one-shot preparation, whatever the chunk
size and the number of worker processes."""

from __future__ import annotations

import csv
import dataclasses
import os

import numpy as np
import pytest

from docattn.data import synthetic
from docattn.data.corpus import Corpus, LabelMap
from docattn.data.encoding import encode_corpus
from docattn.data.prepare import DataSettings, prepare
from docattn.data.splits import held_out_split, label_set_strata, stratified_split
from docattn.data.text import Vocabulary, documents_to_strings
from docattn.errors import ConfigError

ARRAYS = ("tokens", "sentence_offsets", "document_offsets", "labels")


def _write_csv(path, texts, labels) -> None:
    """A text,label CSV of the documents: what the file-reading tests prepare."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label"), *zip(texts, labels)])


def one_shot(train: Corpus, valid=None, test=None, settings=None):
    """The reference: ``prepare`` as it was before chunks (whole corpora through each step at once)."""
    settings = settings or DataSettings()

    def strata(c):
        return label_set_strata(c.labels) if c.multi_label else c.labels

    if settings.test_fraction is not None or settings.cv_folds is not None:
        s = settings
        tr, te = held_out_split(strata(train), s.test_fraction, s.cv_folds, s.cv_fold, s.split_seed)
        train, test = train.subset(tr), train.subset(te)
    if valid is None:
        tr, va = stratified_split(strata(train), settings.valid_fraction, settings.split_seed)
        train, valid = train.subset(tr), train.subset(va)
    label_map = LabelMap.from_labels(train.labels, train.classes, train.multi_label)
    strings = documents_to_strings(train.texts, train.sentences, settings.text)
    vocab = Vocabulary.build(strings, settings.text, settings.min_count, settings.max_vocab)
    dropped: dict = {}
    splits = {"train": encode_corpus(train, vocab, label_map), "valid": encode_corpus(valid, vocab, label_map, dropped)}
    if test is not None:
        splits["test"] = encode_corpus(test, vocab, label_map, dropped)
    return vocab, label_map, splits, dropped


def _corpus(n: int = 90) -> Corpus:
    """Synthetic reviews, with an empty document, a one-word one and pre-split sentences among them."""
    base = synthetic.make_splits(n_train=n, n_test=10, seed=3)["train"]
    texts, labels = list(base.texts), list(base.labels)
    texts[4], texts[11] = "", "Fine."
    sentences = [None] * len(texts)
    sentences[7] = ["A pre-split sentence.", "And another one!"]
    return Corpus(texts=texts, labels=labels, sentences=sentences, source="toy")


def _same(a, b) -> None:
    vocab, labels, splits, dropped = a
    assert vocab.tokens == b.vocab.tokens
    assert labels.classes == b.labels.classes
    assert list(splits) == list(b.splits)
    for name, enc in splits.items():
        for array in ARRAYS:
            x, y = getattr(enc, array), getattr(b.splits[name], array)
            assert x.dtype == y.dtype and x.shape == y.shape, (name, array)
            assert x.tobytes() == y.tobytes(), (name, array)
    assert {k: v for k, v in b.info.items() if k in dropped} == dropped


@pytest.mark.parametrize("chunk, workers", [(1, 0), (7, 0), (1000, 0), (7, 2), (1000, 2)])
def test_chunks_and_workers_give_the_one_shot_arrays(chunk, workers):
    corpus = _corpus()
    settings = DataSettings(min_count=2, prepare_chunk=chunk, prepare_workers=workers)
    _same(one_shot(corpus, settings=settings), prepare(corpus, settings=settings))


@pytest.mark.parametrize("chunk, workers", [(1, 0), (7, 0), (1000, 0), (7, 1), (1000, 2)])
def test_test_fraction_max_vocab_and_given_splits(chunk, workers):
    corpus = _corpus()
    run = {"prepare_chunk": chunk, "prepare_workers": workers}
    held = DataSettings(min_count=1, max_vocab=40, test_fraction=0.2, split_seed=4, **run)
    _same(one_shot(corpus, settings=held), prepare(corpus, settings=held))
    folds = DataSettings(cv_folds=3, cv_fold=2, **run)
    _same(one_shot(corpus, settings=folds), prepare(corpus, settings=folds))
    valid, test = corpus.subset(range(60, 75)), corpus.subset(range(75, 90))
    test = dataclasses.replace(test, labels=None)  # an unlabelled test split encodes as -1
    train, given = corpus.subset(range(60)), DataSettings(**run)
    _same(one_shot(train, valid, test, given), prepare(train, valid, test, given))


@pytest.mark.parametrize("chunk", [1, 7])
def test_multi_label_and_mixed_label_types(chunk):
    corpus = _corpus(60)
    rng = np.random.default_rng(0)
    sets = [tuple(sorted({str(y), *rng.choice(["x", "y", "z"], rng.integers(0, 2)).tolist()})) for y in corpus.labels]
    multi = dataclasses.replace(corpus, labels=sets, multi_label=True)
    settings = DataSettings(min_count=1, prepare_chunk=chunk, test_fraction=0.25)
    _same(one_shot(multi, settings=settings), prepare(multi, settings=settings))
    # 1 and 1.0 are one class to the label map but two strata, as their texts differ
    mixed = dataclasses.replace(corpus, labels=[1 if i % 3 else 1.0 for i in range(len(corpus))])
    mixed = dataclasses.replace(mixed, labels=[y if i % 5 else 2 for i, y in enumerate(mixed.labels)])
    settings = DataSettings(min_count=1, prepare_chunk=chunk)
    _same(one_shot(mixed, settings=settings), prepare(mixed, settings=settings))


def test_split_membership_is_unchanged():
    corpus = _corpus()
    corpus.ids = [f"doc{i}" for i in range(len(corpus))]
    settings = DataSettings(test_fraction=0.3, prepare_chunk=7)
    reference = one_shot(corpus, settings=settings)[2]
    chunked = prepare(corpus, settings=settings).splits
    for name in ("train", "valid", "test"):
        assert len(chunked[name]) == len(reference[name])
        assert np.array_equal(chunked[name].labels, reference[name].labels)


def test_cache_files_are_what_np_save_writes(tmp_path, monkeypatch):
    from docattn.data import chunked
    from docattn.data.prepare import prepare_paths

    monkeypatch.setattr(chunked, "_REMAP", 7)  # the ids rewritten in many slices, one of them short

    corpus = _corpus()
    _write_csv(tmp_path / "train.csv", corpus.texts, corpus.labels)
    settings = DataSettings(min_count=2, prepare_chunk=7)
    data = prepare_paths(tmp_path / "train.csv", settings=settings, cache_dir=tmp_path / "cache")
    whole = prepare_paths(tmp_path / "train.csv", settings=DataSettings(min_count=2), use_cache=False)
    folder = tmp_path / "cache" / data.info["cache"].rsplit("/", 1)[-1]
    for name, enc in whole.splits.items():
        for array in ARRAYS:
            np.save(tmp_path / "expected.npy", getattr(enc, array))
            assert (folder / name / f"{array}.npy").read_bytes() == (tmp_path / "expected.npy").read_bytes()


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_streamed_files_give_the_arrays_of_a_whole_read(tmp_path, chunk):
    """A CSV is read a chunk at a time (readers/stream.py); its integer labels become ints, as a whole read
    makes them, only once every label has been seen."""
    from docattn.data.chunked import FileChunks, input_chunks
    from docattn.data.prepare import prepare_paths
    from docattn.data.readers import read_corpus

    corpus = _corpus()
    _write_csv(tmp_path / "train.csv", corpus.texts, [["2", "10", "7"][i % 3] for i in range(len(corpus))])
    settings = DataSettings(min_count=2, prepare_chunk=chunk)
    inputs, _ = input_chunks(tmp_path / "train.csv", None, None, {}, chunk)
    assert isinstance(inputs["train"], FileChunks)
    streamed = prepare_paths(tmp_path / "train.csv", settings=settings, use_cache=False)
    assert streamed.labels.classes == [2, 7, 10]
    whole = read_corpus(tmp_path / "train.csv")
    assert streamed.info["skipped"] == {"train": whole.stats} and whole.stats["skipped_empty"] == 1
    _same(one_shot(whole, settings=settings), streamed)


def test_data_prepare_prints_and_writes_its_stats(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from docattn.cli import app

    monkeypatch.setenv("DOCATTN_CACHE", str(tmp_path / "cache"))
    corpus = _corpus()
    _write_csv(tmp_path / "train.csv", corpus.texts[1:], corpus.labels[1:])
    args = ["data", "prepare", str(tmp_path / "train.csv"), "--out-stats", str(tmp_path / "stats.json")]
    res = CliRunner().invoke(
        app, [*args, "--set", "min_count=2", "--set", "prepare_chunk=9", "--set", "prepare_workers=2"]
    )
    assert res.exit_code == 0, res.output
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert sum(stats["documents"].values()) == len(corpus) - 2 and stats["prepare_chunk"] == 9  # one was empty
    assert stats["prepare_workers"] == 2 and "worker processes:" in res.output
    assert f"train: {stats['documents']['train']:,} documents" in res.output and stats["cache"] in res.output
    assert not stats["reused"] and stats["peak_rss_mb"] > 0 and stats["vocabulary"] > 3
    again = CliRunner().invoke(app, [*args, "--set", "min_count=2"])  # the chunk size is not in the cache key
    assert again.exit_code == 0 and json.loads((tmp_path / "stats.json").read_text())["reused"]
    (tmp_path / "mine.json").write_text('{"my": "notes"}')
    refused = CliRunner().invoke(app, [*args[:-1], str(tmp_path / "mine.json")])
    assert "is not a stats file docattn wrote" in str(refused.exception)  # the command line prints it as one line
    assert (tmp_path / "mine.json").read_text() == '{"my": "notes"}'
    typo = CliRunner().invoke(app, [*args, "--set", "min_cont=2"])
    assert "did you mean 'min_count'" in str(typo.exception)


def test_word2vec_reads_the_memory_mapped_cache_lazily_with_the_same_vectors(tmp_path):
    from docattn.data.embeddings import _IdSentences, train_word2vec
    from docattn.data.prepare import prepare_paths
    from docattn.data.readers import read_corpus

    corpus = _corpus()
    _write_csv(tmp_path / "train.csv", corpus.texts, corpus.labels)
    settings = DataSettings(min_count=1, prepare_chunk=7)
    cached = prepare_paths(tmp_path / "train.csv", settings=settings, cache_dir=tmp_path / "cache")
    assert isinstance(cached.splits["train"].tokens, np.memmap)
    vocab, _, splits, _ = one_shot(read_corpus(tmp_path / "train.csv"), settings=settings)
    sentences = _IdSentences([cached.splits["train"]], len(vocab))
    assert not isinstance(sentences, list) and iter(sentences) is not iter(sentences)  # a fresh pass each time
    lazily = train_word2vec(cached.splits["train"], cached.vocab, dim=8, epochs=2, workers=1)
    whole = train_word2vec(splits["train"], vocab, dim=8, epochs=2, workers=1)
    assert lazily.tobytes() == whole.tobytes()


def test_peak_memory_follows_the_chunk_not_the_corpus(tmp_path):
    """Ten times the documents cost far less than ten times the memory: what grows is the label codes and the
    tokenizer's word counts, not the text, its tokens or their ids (each child process measures its own peak)."""
    import subprocess
    import sys

    words = [f"w{i}" for i in range(3000)]
    rng = np.random.default_rng(0)
    child = (
        "import resource, sys; from docattn.data.prepare import DataSettings, prepare_paths; "
        "prepare_paths(sys.argv[1], settings=DataSettings(prepare_chunk=500), cache_dir=sys.argv[2]); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    peaks = {}
    for n in (1_000, 10_000):
        with open(tmp_path / f"{n}.tsv", "w", encoding="utf-8") as f:
            f.write("text\tlabel\n")
            for i in range(n):
                f.write(" ".join(rng.choice(words, 120)) + f" . end {i} .\t{i % 3}\n")
        out = subprocess.run(
            [sys.executable, "-c", child, str(tmp_path / f"{n}.tsv"), str(tmp_path / f"cache{n}")],
            capture_output=True,
            text=True,
            check=True,
        )
        peaks[n] = int(out.stdout.split()[-1]) / 1024  # MB
    # measured: 65 -> 67 MB; the one-shot code, which held every document's ids as Python lists, 82 -> 250 MB
    assert peaks[10_000] - peaks[1_000] < 40, peaks


def test_a_streamed_file_whose_label_sets_start_late(tmp_path):
    """Chunks read before the first list of labels hold single labels; the whole read is multi-label."""
    import json

    from docattn.data.prepare import prepare_paths
    from docattn.data.readers import read_corpus

    corpus = _corpus()
    with open(tmp_path / "train.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(corpus.texts):
            label = corpus.labels[i] if i < 40 else [corpus.labels[i], f"x{i % 3}"]
            f.write(json.dumps({"text": text, "label": label}) + "\n")
    settings = DataSettings(min_count=1, prepare_chunk=7)
    streamed = prepare_paths(tmp_path / "train.jsonl", settings=settings, use_cache=False)
    assert streamed.labels.multi_label
    _same(one_shot(read_corpus(tmp_path / "train.jsonl"), settings=settings), streamed)


def test_workers_split_each_chunk_and_run_their_tokenizer_on_one_thread(monkeypatch):
    from docattn.data.chunked import ChunkPool, _one_tokenizer_thread

    with ChunkPool(0, 1000) as here, ChunkPool(2, 1000) as two, ChunkPool(3, 1000) as three:
        assert (here.piece, two.piece, three.piece) == (1000, 500, 334)  # one chunk keeps every worker busy
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    with ChunkPool(1, 10) as pool:  # what a started worker sees
        assert pool.executor.submit(os.getenv, "TOKENIZERS_PARALLELISM").result() == "false"
    assert "TOKENIZERS_PARALLELISM" not in os.environ  # this process keeps its tokenizer's threads
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")  # the user's own choice stands
    _one_tokenizer_thread()
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_a_runs_recorded_preparation_settings_do_not_come_back():
    recorded = DataSettings(min_count=3, prepare_chunk=50, prepare_workers=4).to_json()
    loaded = DataSettings.from_json(recorded)
    assert loaded.min_count == 3 and (loaded.prepare_chunk, loaded.prepare_workers) == (10_000, 0)
    with pytest.raises(ConfigError, match="prepare_workers must be a whole number >= 0"):
        DataSettings(prepare_workers=-1)
    with pytest.raises(ConfigError, match="prepare_chunk must be a whole number >= 1"):
        DataSettings(prepare_chunk=0)


def test_a_long_preparation_in_one_process_names_the_idle_cores(monkeypatch):
    from docattn import threads
    from docattn.cli.report import WORKER_HINT_SECONDS, print_worker_hint

    class Lines(list):
        def print(self, line):
            self.append(line)

    def said(info, workers=0, cores=8):
        monkeypatch.setattr(threads, "usable_cores", lambda: cores)
        lines = Lines()
        print_worker_hint(lines, info, workers)
        return lines

    long = {"seconds": WORKER_HINT_SECONDS + 5}
    assert said(long) == [
        f"note: preparing took {WORKER_HINT_SECONDS + 5:.0f} s in one process; --set prepare_workers=8 prepares "
        "with one process per core (the same arrays)"
    ]
    assert not said(long, workers=2)  # the user asked for workers
    assert not said(long, cores=2)  # the tokenizer already keeps about 1.6 of 2 cores busy
    assert not said({**long, "reused": True})  # nothing was prepared
    assert not said({"seconds": WORKER_HINT_SECONDS - 1})  # starting processes would not pay
