"""What docattn promises a user whose files are hostile or whose run goes wrong (docs/reliability.md):
nothing it loads can run code, and a refused file changes nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from docattn.data import synthetic

SRC = Path(__file__).resolve().parents[1] / "src" / "docattn"
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
]


class _Payload:
    """Unpickling this object creates ``path``: the proof that loading a file ran its code."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (os.makedirs, (self.path,))


def _malicious_checkpoint(path: Path, marker: Path) -> None:
    """A zip checkpoint like the ones ResumePoint writes, with a pickled payload beside a real epoch."""
    torch.save({"epoch": 0, "global_step": 1, "state_dict": {}, "payload": _Payload(marker)}, path)


def _run(*args, env=None):
    return subprocess.run([*DOCATTN, *args], capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reliability")
    synthetic.write_jsonl(synthetic.make_splits(n_train=160, n_test=10, seed=3)["train"], tmp / "train.jsonl")
    return tmp


def test_the_payload_really_runs_when_unpickled(tmp_path):
    """The test's own premise: without weights_only, loading this file creates the marker."""
    marker = tmp_path / "pwned"
    _malicious_checkpoint(tmp_path / "last.ckpt", marker)
    torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert marker.exists()


def test_train_resume_refuses_a_checkpoint_holding_code(corpus, tmp_path):
    env = {**os.environ, "DOCATTN_CACHE": str(tmp_path / "cache")}
    run = tmp_path / "run"
    res = _run(
        "train",
        "--model",
        "han",
        "--train",
        str(corpus / "train.jsonl"),
        "--out",
        str(run),
        "--epochs",
        "1",
        *TINY,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    marker = tmp_path / "pwned"
    _malicious_checkpoint(run / "checkpoints" / "last.ckpt", marker)
    before = {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    res = _run("train", "--train", str(corpus / "train.jsonl"), "--out", str(run), "--epochs", "3", "--resume", env=env)
    assert res.returncode == 2, res.stderr
    assert not marker.exists()
    assert "last.ckpt: cannot resume, refused" in res.stderr and "Traceback" not in res.stderr
    assert {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # nothing changed


def test_tune_resume_refuses_a_checkpoint_holding_code(corpus, tmp_path):
    env = {**os.environ, "DOCATTN_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "tune"
    args = [
        "tune",
        "--model",
        "kim-cnn",
        "--train",
        str(corpus / "train.jsonl"),
        "--out",
        str(out),
        "--lr",
        "0.001",
        "--epochs",
        "2",
        "--set",
        "embeddings=random",
        "--set",
        "embedding_dim=16",
        "--set",
        "min_count=2",
    ]
    res = _run(*args, env=env)
    assert res.returncode == 0, res.stderr
    tuned = json.loads((out / "tune.json").read_text())
    (out / "tune.json").write_text(json.dumps({**tuned, "complete": False, "trials": []}))  # as if cut in its trial
    marker = tmp_path / "pwned"
    _malicious_checkpoint(out / "lr=0.001" / "checkpoints" / "last.ckpt", marker)
    res = _run(*args, "--resume", env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert not marker.exists()
    assert "last.ckpt: cannot resume, refused" in res.stderr and "Traceback" not in res.stderr
    assert (out / "lr=0.001" / "checkpoints" / "last.ckpt").exists()  # refused, not deleted


def test_the_engine_refuses_code_before_lightning_opens_the_file(tmp_path):
    from docattn.errors import CheckpointError
    from docattn.training.run import check_resumable, read_checkpoint

    marker = tmp_path / "pwned"
    _malicious_checkpoint(tmp_path / "last.ckpt", marker)
    for call in (lambda: read_checkpoint(tmp_path / "last.ckpt"), lambda: check_resumable(tmp_path / "last.ckpt", 5)):
        with pytest.raises(CheckpointError, match="cannot resume, refused"):
            call()
    assert not marker.exists()
    (tmp_path / "last.ckpt").write_bytes(b"not a zip file at all")
    with pytest.raises(CheckpointError, match="cannot resume, refused"):
        read_checkpoint(tmp_path / "last.ckpt")


# what may never appear in the package: each can run code from a file (eval/exec from a string)
_FORBIDDEN = {
    "torch.load without weights_only=True": re.compile(r"torch\.load\((?![^)]*weights_only=True)[^)]*\)", re.S),
    "pickle": re.compile(
        r"^\s*(import|from)\s+(c?pickle|dill|joblib|cloudpickle)\b|\b(c?pickle|dill|joblib)\.loads?\(", re.M
    ),
    "allow_pickle=True": re.compile(r"allow_pickle\s*=\s*True"),
    "eval(": re.compile(r"(?<![\w.`])eval\("),
    "exec(": re.compile(r"(?<![\w.`])exec\("),
}


def test_the_source_never_unpickles_nor_evaluates_strings():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for what, pattern in _FORBIDDEN.items():
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(SRC.parent)}:{line}: {what}")
    assert found == []


def test_the_scan_finds_what_it_looks_for():
    """Each pattern matches the forms it is meant to refuse, and not their safe look-alikes."""
    bad = {
        "torch.load without weights_only=True": 'torch.load(p, map_location="cpu", weights_only=False)',
        "pickle": "import pickle",
        "allow_pickle=True": "np.load(p, allow_pickle=True)",
        "eval(": "eval(text)",
        "exec(": "exec(code)",
    }
    for what, text in bad.items():
        assert _FORBIDDEN[what].search(text), what
    for safe in ('torch.load(p, map_location="cpu", weights_only=True, mmap=True)', "model.eval()", "np.load(p)"):
        assert not any(p.search(safe) for p in _FORBIDDEN.values()), safe


# ------------------------------------------------------------------------------ --out: nothing of yours is lost
def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def a_run(corpus, tmp_path_factory):
    """A finished tiny HAN run (the main job's report files beside it, as `docattn` leaves them)."""
    tmp = tmp_path_factory.mktemp("run")
    env = {**os.environ, "DOCATTN_CACHE": str(tmp / "cache")}
    res = _run(
        "train",
        "--model",
        "han",
        "--train",
        str(corpus / "train.jsonl"),
        "--out",
        str(tmp / "run"),
        "--epochs",
        "1",
        *TINY,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    return tmp / "run", env


def test_train_onto_an_existing_run_is_refused_and_changes_nothing(corpus, a_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(a_run[0], run)
    before = _snapshot(run)
    res = _run("train", "--train", str(corpus / "train.jsonl"), "--out", str(run), "--epochs", "1", *TINY, env=a_run[1])
    assert res.returncode == 2 and "is not empty: it holds a docattn run" in res.stderr and "--overwrite" in res.stderr
    assert "Traceback" not in res.stderr and _snapshot(run) == before


def test_overwrite_replaces_only_what_docattn_wrote(corpus, a_run, tmp_path):
    import shutil

    from docattn.training.run_folder import claim

    run = tmp_path / "run"
    shutil.copytree(a_run[0], run)
    (run / "report.html").write_text("<html>an old report of the old model</html>")
    claim(run, ["report.html"])  # as the main job or explain --html into a run folder record it
    (run / "notes.txt").write_text("mine")
    (run / "mine").mkdir()
    (run / "mine" / "data.csv").write_text("a,b")
    res = _run(
        "train",
        "--model",
        "nb",
        "--train",
        str(corpus / "train.jsonl"),
        "--out",
        str(run),
        "--overwrite",
        "--min-count",
        "2",
        env=a_run[1],
    )
    assert res.returncode == 0, res.stderr
    assert not (run / "report.html").exists() and not (run / "checkpoints").exists()  # the old model's files are gone
    assert (run / "notes.txt").read_text() == "mine" and (run / "mine" / "data.csv").read_text() == "a,b"
    assert json.loads((run / "config.json").read_text())["model"] == "nb"


def test_a_folder_with_the_users_own_config_is_never_overwritten(corpus, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "config.json").write_text('{"my": "settings"}')
    (out / "metrics.csv").write_text("my,numbers\n")
    before = _snapshot(out)
    for extra in ([], ["--overwrite"]):
        res = _run("train", "--model", "nb", "--train", str(corpus / "train.jsonl"), "--out", str(out), *extra)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert _snapshot(out) == before
    assert "config.json, metrics.csv are not docattn's" in res.stderr


def test_resume_with_no_checkpoint_is_an_error_not_a_new_start(corpus, a_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(a_run[0], run)
    shutil.rmtree(run / "checkpoints")
    before = _snapshot(run)
    res = _run(
        "train", "--train", str(corpus / "train.jsonl"), "--out", str(run), "--epochs", "2", "--resume", env=a_run[1]
    )
    assert res.returncode == 2 and "no checkpoint to continue from" in res.stderr and _snapshot(run) == before


def test_a_second_training_into_a_folder_in_use_is_refused_and_a_stale_lock_is_taken_over(corpus, tmp_path):
    from docattn.training.run_folder import LOCK

    out = tmp_path / "busy"
    out.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / LOCK).write_text(str(sleeper.pid))
        res = _run(
            "train", "--model", "nb", "--train", str(corpus / "train.jsonl"), "--out", str(out), "--min-count", "2"
        )
        assert res.returncode == 2 and f"process {sleeper.pid} is training into it" in res.stderr, res.stderr
    finally:
        sleeper.kill()
        sleeper.wait()
    # its process is gone now: the lock is stale, and a new training takes it over (and leaves none behind)
    res = _run("train", "--model", "nb", "--train", str(corpus / "train.jsonl"), "--out", str(out), "--min-count", "2")
    assert res.returncode == 0, res.stderr
    assert not (out / LOCK).exists() and (out / "config.json").exists()


def test_an_unwritable_out_is_named_before_any_data_is_read(corpus, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from docattn.cli import app
    from docattn.data import prepare as prepare_module
    from docattn.training import run_folder

    real_open = os.open

    def read_only(path, flags, *args):
        if str(path).startswith(str(tmp_path / "ro")) and flags & os.O_CREAT:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    def never(*a, **k):
        raise AssertionError("the data was read before the --out check")

    monkeypatch.setattr(run_folder.os, "open", read_only)
    monkeypatch.setattr(prepare_module, "prepare_paths", never)
    res = CliRunner().invoke(
        app, ["train", "--model", "nb", "--train", str(corpus / "train.jsonl"), "--out", str(tmp_path / "ro")]
    )
    assert res.exit_code != 0 and "cannot write there (Permission denied)" in str(res.exception)


def test_validation_takes_the_fraction_asked_even_with_many_tiny_classes():
    from docattn.data.splits import stratified_split

    labels = np.repeat(np.arange(10_000), 2)  # 10,000 classes of 2 documents: each class's rounded share is 1 (50%)
    train, valid = stratified_split(labels, 0.1, seed=0)
    assert len(valid) == 2_000 and len(set(train) | set(valid)) == 20_000
    big = np.array([0] * 12_500 + [1] * 12_500)
    assert len(stratified_split(big, 0.1)[1]) == 2_500  # where shares round to the fraction, nothing changes


def test_an_unknown_option_suggests_only_near_misspellings():
    res = _run("train", "--bogus")
    assert (
        res.returncode == 2
        and "No such option: --bogus" in res.stderr
        and "--out" not in res.stderr.split("--bogus", 1)[1]
    )
    res = _run("train", "--epoch", "3")
    assert res.returncode == 2 and "--epochs" in res.stderr


def test_a_device_as_training_data_and_a_deeply_nested_config_are_one_line_errors(tmp_path):
    res = _run("train", "--train", "/dev/null", "--out", str(tmp_path / "run"))
    assert res.returncode == 2 and "/dev/null: not a regular file or folder (a character device)" in res.stderr
    run = tmp_path / "nested"
    run.mkdir()
    (run / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    res = _run("evaluate", str(run), "--data", "/dev/null")
    assert res.returncode == 2 and "nested too deeply" in res.stderr and "Traceback" not in res.stderr


# --------------------------------------------------------------------------------- a full disk, a read-only target
def test_a_full_disk_while_writing_weights_is_one_line_and_leaves_the_old_file(tmp_path, monkeypatch):
    import errno
    import pathlib

    from docattn.classifier import DocumentClassifier
    from docattn.errors import WriteError

    sp = synthetic.make_splits(n_train=80, n_test=10, seed=1)
    clf = DocumentClassifier(
        "han",
        max_epochs=1,
        embeddings="random",
        embedding_dim=8,
        hidden_size=4,
        context_dim=4,
        min_count=2,
        progress=False,
        guardrail=False,
    ).fit(sp["train"].texts, sp["train"].labels)
    run = clf.save(tmp_path / "run")
    before = (run / "model.safetensors").read_bytes()
    real = pathlib.Path.write_bytes

    def full(self, data):
        real(self, data[: len(data) // 2])  # half of it reached the disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_bytes", full)
    with pytest.raises(WriteError, match=r"model.safetensors: No space left on device; nothing was replaced"):
        clf.save(run)
    monkeypatch.undo()
    assert (run / "model.safetensors").read_bytes() == before
    assert not [p.name for p in run.iterdir() if ".tmp" in p.name]


def test_a_full_disk_while_writing_the_checkpoint_stops_training_with_one_line(tmp_path, monkeypatch):
    import lightning as L

    from docattn.classifier import DocumentClassifier
    from docattn.errors import WriteError

    sp = synthetic.make_splits(n_train=80, n_test=10, seed=1)
    opts = dict(
        embeddings="random", embedding_dim=8, hidden_size=4, context_dim=4, min_count=2, progress=False, guardrail=False
    )
    real = L.Trainer.save_checkpoint

    def full(self, path, *a, **k):
        if self.current_epoch >= 1:
            Path(path).write_bytes(b"partial")
            raise RuntimeError(
                "[enforce fail at inline_container.cc:672] . "
                "PytorchStreamWriter failed writing file data/3: file write failed"
            )
        return real(self, path, *a, **k)

    monkeypatch.setattr(L.Trainer, "save_checkpoint", full)
    with pytest.raises(WriteError, match=r"last.ckpt: .*file write failed; the previous checkpoint is kept"):
        DocumentClassifier("han", max_epochs=3, **opts).fit(
            sp["train"].texts, sp["train"].labels, run_dir=tmp_path / "run"
        )
    ckpt = tmp_path / "run" / "checkpoints"
    assert [p.name for p in ckpt.iterdir()] == ["last.ckpt"]  # epoch 1's, whole; no temporary left


def test_an_unwritable_html_target_is_one_line(tmp_path, monkeypatch):
    import errno
    import pathlib

    from docattn.errors import WriteError
    from docattn.explain.html import write_atomic

    def read_only(self, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(pathlib.Path, "write_text", read_only)
    with pytest.raises(WriteError, match=r"report.html: Read-only file system; nothing was replaced"):
        write_atomic(tmp_path / "report.html", "<html></html>")
    assert list(tmp_path.iterdir()) == []


def test_a_cache_build_killed_midway_leaves_no_folder_behind(tmp_path):
    from docattn.data.encoding import cached

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    abandoned = tmp_path / f".abc.{dead.pid}.0123456789abcdef"  # as a kill -9 mid-build leaves it
    abandoned.mkdir()
    (abandoned / "tokens.npy").write_bytes(b"half")
    live = tmp_path / f".abc.{os.getpid()}.fedcba9876543210"  # another build still running
    live.mkdir()
    folder = cached("xyz", lambda tmp: (tmp / "x").write_text("1"), tmp_path)
    assert (folder / "x").read_text() == "1" and not abandoned.exists() and live.exists()


def test_a_cache_entry_with_ids_past_the_vocabulary_or_broken_offsets_is_rebuilt(tmp_path):
    from docattn.data.prepare import prepare_paths

    path = tmp_path / "train.jsonl"
    synthetic.write_jsonl(synthetic.make_splits(n_train=60, n_test=5, seed=2)["train"], path)
    first = prepare_paths(path, cache_dir=tmp_path / "cache")
    folder = Path(first.info["cache"]) / "train"
    expected = np.array(first.splits["train"].tokens)
    for name, damage in (("tokens", lambda a: a + 10_000), ("sentence_offsets", lambda a: a[::-1].copy())):
        good = np.load(folder / f"{name}.npy")
        np.save(folder / f"{name}.npy", damage(good))
        again = prepare_paths(path, cache_dir=tmp_path / "cache")  # rebuilt, not an IndexError mid-training
        assert np.array_equal(np.array(again.splits["train"].tokens), expected)
