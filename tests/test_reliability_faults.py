"""The rest of issue 33 (docs/reliability.md): a training or an encoding killed with -9 and run again ends where
an uninterrupted one does; the readers and ``predict`` raise nothing but docattn's errors on arbitrary bytes and
text; and a 1,000,000-word document is predicted in bounded memory. Hostile archives: test_reliability_archives.py."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import resource
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import fifo_writer, without_the_fast_tar_reader, write_tar
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.numpy import load_file

from docattn.data import synthetic
from docattn.data.readers import read_corpus, read_splits, read_texts
from docattn.errors import DataError, DocattnError

DOCATTN = [sys.executable, "-m", "docattn"]
TINY = [
    "--set",
    "embeddings=random",
    "--set",
    "embedding_dim=16",
    "--set",
    "hidden_size=8",
    "--set",
    "context_dim=8",
    "--set",
    "min_count=2",
    "--set",
    "word2vec_workers=1",
]
TIMING = {"train_docs_per_s", "elapsed_s", "inference_docs_per_s"}  # the only figures two identical runs may differ in
MIB = 1 << 20


def _env(tmp: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCATTN_MAX_")}  # the default limits
    return {**env, "DOCATTN_CACHE": str(tmp / "cache"), "OMP_NUM_THREADS": "1", **extra}


# --------------------------------------------------------------------------- 1. kill -9 during training, then --resume


@pytest.fixture(scope="module")
def resumed(tmp_path_factory) -> dict:
    """One tiny HAN trained three times: straight through; killed with SIGKILL as soon as its first epoch's
    checkpoint appears; and that one continued with --resume. 900 training documents in batches of 17 make
    53 steps an epoch, validated after steps 17, 34 and 51: an epoch long enough to kill in, and two steps
    trained after an epoch's last validation, whose loss the next validation row reports."""
    from docattn.training.run import read_checkpoint

    tmp = tmp_path_factory.mktemp("resume")
    splits = synthetic.make_splits(n_train=1000, n_test=40, seed=3)
    synthetic.write_jsonl(splits["train"], tmp / "train.jsonl")
    synthetic.write_jsonl(splits["test"], tmp / "test.jsonl")
    env = _env(tmp)

    def train(out: str, *extra: str) -> list[str]:
        return [
            *DOCATTN,
            "train",
            "--model",
            "han",
            "--train",
            str(tmp / "train.jsonl"),
            "--test",
            str(tmp / "test.jsonl"),
            "--out",
            str(tmp / out),
            "--epochs",
            "3",
            *TINY,
            "--set",
            "batch_size=17",
            *extra,
        ]

    done = subprocess.run(train("straight"), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    checkpoint = tmp / "killed" / "checkpoints" / "last.ckpt"
    killed = subprocess.Popen(train("killed"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not checkpoint.exists() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert killed.returncode == -signal.SIGKILL, "the training ended before it could be killed"
    state = read_checkpoint(checkpoint)
    assert state["epoch"] + 1 < 3, "killed after its last epoch: nothing left to resume"
    done = subprocess.run(train("killed", "--resume"), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"straight": tmp / "straight", "resumed": tmp / "killed", "step": state["global_step"]}


def _metrics(run: Path) -> list[dict]:
    with open(run / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def _results(run: Path) -> dict:
    return json.loads((run / "config.json").read_text(encoding="utf-8"))["results"]


def test_a_training_killed_after_its_first_epoch_resumes_to_the_same_results(resumed):
    """Every validation row (as written, to 6 decimals), the best validation, the test scores and the saved
    weights are those of the run never killed; only timings differ. The training loss of the first row after
    the checkpoint is the next test's."""
    straight, again = _metrics(resumed["straight"]), _metrics(resumed["resumed"])
    assert [r["step"] for r in again] == [r["step"] for r in straight]
    after = [i for i, r in enumerate(straight) if int(r["step"]) > resumed["step"]]
    assert len(after) >= 3  # the kill left validations to redo
    for i, (a, b) in enumerate(zip(straight, again)):
        skip = TIMING | ({"train_loss"} if i == after[0] else set())
        assert {k: v for k, v in b.items() if k not in skip} == {k: v for k, v in a.items() if k not in skip}, i
    a, b = _results(resumed["straight"]), _results(resumed["resumed"])
    assert b["best"] == a["best"]
    assert {k: v for k, v in b["test"].items() if k not in TIMING} == {
        k: v for k, v in a["test"].items() if k not in TIMING
    }
    assert b["test"]["documents"] == 40
    assert (resumed["resumed"] / "vocab.json").read_bytes() == (resumed["straight"] / "vocab.json").read_bytes()
    # compared by content: safetensors writes its metadata in a different key order from one process to the next
    for name, load in (("model.safetensors", load_file), ("documents.npz", np.load)):
        a, b = dict(load(resumed["straight"] / name)), dict(load(resumed["resumed"] / name))
        assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a), name


def test_the_first_row_after_a_resume_reports_the_same_training_loss(resumed):
    straight, again = _metrics(resumed["straight"]), _metrics(resumed["resumed"])
    first = next(i for i, r in enumerate(straight) if int(r["step"]) > resumed["step"])
    assert again[first]["train_loss"] == straight[first]["train_loss"]


# --------------------------------------------------------------------------- 2. kill -9 during encoding, then a rerun

_PREPARE = (
    "import sys; from docattn.data.prepare import prepare_paths; prepare_paths(sys.argv[1], cache_dir=sys.argv[2])"
)


def _labelled_csv(path: Path, documents: int) -> Path:
    rng = np.random.default_rng(0)
    words = np.array([f"w{i}" for i in range(3000)])
    with open(path, "w", encoding="utf-8") as f:
        f.write("text,label\n")
        for i, ids in enumerate(rng.integers(0, len(words), size=(documents, 60))):
            f.write(" ".join(words[ids[:30]]) + ". " + " ".join(words[ids[30:]]) + f".,c{i % 4}\n")
    return path


def test_an_encoding_killed_midway_is_built_again_to_the_same_arrays(tmp_path):
    """A real build killed with -9 while it encodes leaves its ``.KEY.PID.RANDOM`` folder; the next build removes
    it and writes the entry an uninterrupted build writes."""
    from docattn.data.encoding import ARRAYS
    from docattn.data.prepare import prepare_paths

    data = _labelled_csv(tmp_path / "reviews.csv", documents=8000)  # about 2 s to encode
    cache = tmp_path / "cache"
    child = subprocess.Popen([sys.executable, "-c", _PREPARE, str(data), str(cache)], env=_env(tmp_path))
    deadline = time.monotonic() + 120
    while not list(cache.glob(f".*.{child.pid}.*")) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.3)  # into the reading and encoding
    assert child.poll() is None, "the build ended before it could be killed: give it more documents"
    child.kill()
    child.wait()
    abandoned = list(cache.glob(f".*.{child.pid}.*"))
    # beside it only the build's lock file, which the killed process held and the next build removes
    assert len(abandoned) == 1 and [p for p in cache.iterdir() if p not in abandoned and p.suffix != ".lock"] == []

    rebuilt = prepare_paths(data, cache_dir=cache)
    assert not abandoned[0].exists() and [p.name for p in cache.iterdir()] == [Path(rebuilt.info["cache"]).name]
    fresh = prepare_paths(data, cache_dir=tmp_path / "uninterrupted")
    assert Path(fresh.info["cache"]).name == Path(rebuilt.info["cache"]).name  # the same key
    assert rebuilt.vocab.tokens == fresh.vocab.tokens and rebuilt.labels.classes == fresh.labels.classes
    assert sorted(rebuilt.splits) == sorted(fresh.splits) == ["train", "valid"]
    for split, encoded in fresh.splits.items():
        for name in ARRAYS:
            assert np.array_equal(getattr(rebuilt.splits[split], name), getattr(encoded, name)), (split, name)


# --------------------------------------------------------------------------- 3. arbitrary bytes and text

# pieces of every format's syntax, so that examples reach past the first line's checks
_SYNTAX = [
    b",",
    b"\t",
    b"\t\t",
    b'"',
    b"\n",
    b"\r\n",
    b"\r",
    b"\x00",
    b"__label__",
    b"__label__a ",
    b"{",
    b"}",
    b'"text": ',
    b'"label": ',
    b"[",
    b"]",
    b" <sssss> ",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\xfe\xff",
    b"\x00\x00\xfe\xff",
    b"1",
    b"-1",
    b"NaN",
    b"1e999",
    b"null",
    b" ",
    b"word",
    b"text",
    b"label",
    b"\\",
    b"\\n",
    b"\xe9",
    b"\xc3\xa9",
    b"\x1e",
    b"\xe2\x80\xa8",
]
_BYTES = st.one_of(st.binary(max_size=400), st.lists(st.sampled_from(_SYNTAX), max_size=60).map(b"".join))
_FILES = ["d.csv", "d.tsv", "d.jsonl", "d.txt", "d.ft", "d.ss", "zhang/train.csv", "d.tar", "d.tar.gz", "d.zip"]
_READS = {"read_splits": read_splits, "read_corpus": read_corpus, "read_texts": read_texts}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("arbitrary")


def _read_or_refuse(read, path: Path) -> None:
    """``read(path)`` raises a docattn error, or returns what a training can write: UTF-8 JSON."""
    try:
        found = read(path)
    except DocattnError:
        return
    for corpus in found.values() if isinstance(found, dict) else [found]:
        record = {
            "texts": corpus.texts,
            "labels": corpus.labels,
            "ids": corpus.ids,
            "classes": corpus.classes,
            "stats": corpus.stats,
            "sentences": corpus.sentences,
        }
        json.dumps(record, ensure_ascii=False, default=str).encode("utf-8")


@settings(max_examples=60, deadline=None)
@given(
    data=_BYTES,
    classes=st.one_of(st.none(), _BYTES),
    name=st.sampled_from(_FILES),
    read=st.sampled_from(sorted(_READS)),
)
def test_the_readers_raise_only_docattn_errors_on_arbitrary_bytes(scratch, data, classes, name, read):
    path = scratch / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    beside = path.parent / "classes.txt"  # a Zhang CSV's class names
    if name.startswith("zhang/") and classes is not None:
        beside.write_bytes(classes)
    try:
        _read_or_refuse(_READS[read], path)
    finally:
        beside.unlink(missing_ok=True)


_PARTS = [
    "train",
    "test",
    "pos",
    "neg",
    "unsup",
    "..",
    ".",
    "",
    "x.txt",
    "train.csv",
    "classes.txt",
    "d.train.ss",
    "__MACOSX",
    ".hidden",
    "é",
    "中文",
    "pos\udcff",
    "caf\udce9",
]  # \udcXX: a byte that is not UTF-8
_MEMBER = st.tuples(
    st.lists(st.sampled_from(_PARTS), min_size=1, max_size=4).map("/".join),
    st.sampled_from(
        [tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE]
    ),
    st.one_of(st.binary(max_size=60), st.sampled_from([b"text,label\nfine,a\n", b"u\t\tp\t\t5\t\tok\n"])),
    st.lists(st.sampled_from(_PARTS), min_size=1, max_size=4).map("/".join),
)


def _archive(path: Path, members: list[tuple], kind: str) -> bool:
    """Write ``members`` as a tar (GNU, pax) or zip; False when that format cannot hold them."""
    try:
        if kind == "zip":
            with zipfile.ZipFile(path, "w") as archive:
                for name, type_, content, target in members:
                    info = zipfile.ZipInfo(name + "/" if type_ == tarfile.DIRTYPE else name)
                    if type_ == tarfile.SYMTYPE:
                        info.external_attr, content = 0o120777 << 16, target.encode("utf-8")
                    archive.writestr(info, b"" if type_ == tarfile.DIRTYPE else content)
            return True
        with tarfile.open(path, "w", format=tarfile.PAX_FORMAT if kind == "pax" else tarfile.GNU_FORMAT) as archive:
            for name, type_, content, target in members:
                info = tarfile.TarInfo(name)
                info.type = type_
                if type_ == tarfile.REGTYPE:
                    info.size = len(content)
                    archive.addfile(info, io.BytesIO(content))
                else:
                    info.linkname = target
                    archive.addfile(info)
        return True
    except (ValueError, UnicodeError, tarfile.TarError):
        return False


@settings(max_examples=60, deadline=None)
@given(
    members=st.lists(_MEMBER, max_size=8),
    kind=st.sampled_from(["gnu", "pax", "zip"]),
    read=st.sampled_from(sorted(_READS)),
    fast=st.booleans(),
)
def test_archives_of_arbitrary_members_raise_only_docattn_errors(scratch, members, kind, read, fast):
    """Names with '..', hidden parts, bytes that are not UTF-8; links anywhere; devices; both tar readers."""
    import warnings

    path = scratch / f"members.{'zip' if kind == 'zip' else 'tar'}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of duplicate names
        if not _archive(path, members, kind):
            return
    with pytest.MonkeyPatch.context() as monkeypatch:
        if not fast:
            without_the_fast_tar_reader(monkeypatch)
        _read_or_refuse(_READS[read], path)


def test_a_zip_name_flagged_utf8_that_is_not_is_one_line(tmp_path):
    """zipfile decodes such a name strictly: a UnicodeDecodeError and a traceback, before any member was read."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pos/\u00e9.txt", "fine")  # not ASCII: flagged UTF-8
        archive.writestr("neg/1.txt", "bad")
    path = tmp_path / "names.zip"
    path.write_bytes(buffer.getvalue().replace("\u00e9".encode(), b"\xff\xfe"))
    with pytest.raises(DataError, match=r"names\.zip: corrupt or unreadable archive .*can't decode byte 0xff"):
        read_splits(path)


def test_names_that_are_not_utf8_read_as_latin1_and_a_training_can_save_them(tmp_path):
    """A label folder named b"pos\\xff" (on disk or in a tar) was the class 'pos\\udcff', and writing labels.json
    failed with a UnicodeEncodeError; now its byte reads as Latin-1, as a document's does."""
    from docattn.data.prepare import prepare_paths

    files = {
        f"{label}/{i}.txt": f"{word} film number {i}"
        for label, word in (("pos\udcff", "good"), ("neg", "bad"))
        for i in range(10)
    }
    folder = tmp_path / "d"
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    assert os.fsencode(next(folder.glob("pos*"))).endswith(b"pos\xff")
    for source in (folder, write_tar(tmp_path / "d.tar", files, "w")):
        corpus = read_corpus(source)
        assert corpus.classes == ["neg", "pos\u00ff"] and "pos\u00ff/3.txt" in corpus.ids
        prepared = prepare_paths(source, cache_dir=tmp_path / "cache")  # writes labels.json
        assert prepared.labels.classes == ["neg", "pos\u00ff"]


def test_a_cut_document_in_a_file_named_in_latin1_is_named_in_the_stats(tmp_path, monkeypatch):
    """stats["first_cut_document"] went into the cache's info.json: a name that is not UTF-8 failed there."""
    monkeypatch.setenv("DOCATTN_MAX_DOCUMENT_CHARS", "5")
    path = tmp_path / os.fsdecode(b"caf\xe9.txt")
    path.write_text("a long line\nshort\n", encoding="utf-8")
    corpus = read_corpus(path)
    assert corpus.texts == ["a lon", "short"] and corpus.stats["first_cut_document"] == f"{tmp_path}/caf\u00e9.txt:1"
    json.dumps(corpus.stats, ensure_ascii=False).encode("utf-8")


def test_a_named_pipe_or_a_device_in_a_data_folder_is_refused_unopened(tmp_path):
    """A FIFO in a label folder (or as a Zhang train.csv) was opened and waited for a writer forever; a link to a
    device gave its bytes as a document. A writer opens the FIFO after a while, so a regression fails, not hangs."""
    folder = tmp_path / "d"
    for label in ("pos", "neg"):
        (folder / label).mkdir(parents=True)
        (folder / label / "1.txt").write_text(f"a {label} film")
    os.mkfifo(folder / "pos" / "2.txt")
    (tmp_path / "z").mkdir()
    (tmp_path / "z" / "classes.txt").write_text("negative\npositive\n")
    os.mkfifo(tmp_path / "z" / "train.csv")
    with fifo_writer(folder / "pos" / "2.txt", tmp_path / "z" / "train.csv", every=2):
        with pytest.raises(
            DataError, match=r"pos/2\.txt: not a regular file \(a named pipe\); take it out of the data folder"
        ):
            read_corpus(folder)
        with pytest.raises(DataError, match=r"z/train\.csv: not a regular file \(a named pipe\)"):
            read_splits(tmp_path / "z")
    os.unlink(folder / "pos" / "2.txt")
    (folder / "neg" / "2.txt").symlink_to("/dev/zero")
    with pytest.raises(DataError, match=r"neg/2\.txt: not a regular file \(a character device\)"):
        read_corpus(folder)


@pytest.fixture(scope="module")
def naive_bayes():
    from docattn.classifier import DocumentClassifier

    train = synthetic.make_splits(n_train=80, n_test=10, seed=1)["train"]
    return DocumentClassifier("nb", min_count=1).fit(train.texts, train.labels)


# what blingfire, NFKC and the word pattern treat specially: sentence ends, separators, Han, marks, controls
_TRICKY = st.text(
    st.sampled_from(list("\x00 .!?\n\r\t\x1e\u2028\u3002\ufeff\u200b\u202e\u0301\uff21中a'<>-")), max_size=60
)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.one_of(st.text(max_size=200), _TRICKY), min_size=1, max_size=4))
def test_predict_raises_only_docattn_errors_on_arbitrary_text(naive_bayes, texts):
    try:
        predicted = naive_bayes.predict(texts)
    except DocattnError:
        return
    assert len(predicted) == len(texts) and set(predicted) <= set(naive_bayes.classes_)


def test_predict_on_a_ten_million_character_word_is_a_docattn_error(naive_bayes):
    with contextlib.suppress(DocattnError):
        naive_bayes.predict(["a" * 10_000_000])


def test_predict_on_a_lone_surrogate_is_a_docattn_error(naive_bayes):
    with contextlib.suppress(DocattnError):
        naive_bayes.predict(["fine \ud800 text"])


# --------------------------------------------------------------------------- 4. a 1,000,000-word document

ADDRESS_SPACE = 4 << 30  # a safety net for the shared machine; the test's bound is on resident memory


def _predict_peak(run: Path, document: Path, tmp: Path, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    """``docattn predict run document`` in a child capped at ADDRESS_SPACE: its output and its peak RSS in MiB."""
    out, err = tmp / "predicted.jsonl", tmp / "stderr.txt"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        child = subprocess.Popen(
            [*DOCATTN, "predict", str(run), str(document)],
            stdout=stdout,
            stderr=stderr,
            env=_env(tmp, **env),
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE)),
        )
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the largest of all children so far
        child.returncode = os.waitstatus_to_exitcode(status)
    done = subprocess.CompletedProcess(child.args, child.returncode, out.read_text(), err.read_text())
    return done, usage.ru_maxrss / 1024


def _words(run: Path, longest: int = 100) -> list[str]:
    """Words the run knows, of up to ``longest`` letters."""
    return [t for t in json.loads((run / "vocab.json").read_text())["tokens"] if t.isalpha() and len(t) <= longest][
        :200
    ]


@pytest.mark.parametrize("limit", [None, "10000000"], ids=["cut-at-the-reader-limit", "whole"])
def test_a_million_word_document_is_predicted_under_2_gb(resumed, tmp_path, limit):
    """One line of 1,000,000 words in sentences of about ten, through a tiny HAN run; the readers keep its first
    1,000,000 characters unless DOCATTN_MAX_DOCUMENT_CHARS lets all 6.4 MB through."""
    words = _words(resumed["straight"])
    sentences = [
        " ".join(words[(i * 7 + j) % len(words)] for j in range(10)).capitalize() + "." for i in range(100_000)
    ]
    document = tmp_path / "long.txt"
    document.write_text(" ".join(sentences) + "\n", encoding="utf-8")
    assert document.stat().st_size > 6_000_000
    done, peak = _predict_peak(
        resumed["straight"], document, tmp_path, **({"DOCATTN_MAX_DOCUMENT_CHARS": limit} if limit else {})
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = done.stdout.splitlines()
    assert json.loads(line)["prediction"] in json.loads(line)["probabilities"]
    assert ("1 document(s) cut at the length limit" in done.stderr) == (limit is None)
    print(f"peak RSS {peak:.0f} MiB for {document.stat().st_size / MIB:.1f} MiB of text ({limit or 'cut'})")
    assert peak < 2048, peak


def test_a_document_of_many_short_sentences_and_one_long_one_is_predicted_under_2_gb(resumed, tmp_path):
    words = _words(resumed["straight"], longest=5)
    short = " ".join(f"{words[i % len(words)].capitalize()}." for i in range(60_000))
    long = " ".join(words[i % len(words)] for i in range(120_000)).capitalize() + "."
    document = tmp_path / "skewed.txt"
    document.write_text(f"{short} {long}\n", encoding="utf-8")
    assert document.stat().st_size < 1_000_000  # not cut: the readers' limit does not bound this
    done, peak = _predict_peak(resumed["straight"], document, tmp_path)
    assert done.returncode == 0 and peak < 2048, done.stderr[-500:]
