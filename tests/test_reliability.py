"""What docattn promises a user whose files are hostile or whose run goes wrong (docs/reliability.md):
nothing it loads can run code, and a refused file changes nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from docattn.data import synthetic

SRC = Path(__file__).resolve().parents[1] / "src" / "docattn"
DOCATTN = [sys.executable, "-m", "docattn"]
TINY = ["--set", "embeddings=random", "--set", "embedding_dim=16", "--set", "hidden_size=8", "--set", "context_dim=8",
        "--set", "min_count=2"]


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
    res = _run("train", "--model", "han", "--train", str(corpus / "train.jsonl"), "--out", str(run), "--epochs", "1",
               *TINY, env=env)
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
    args = ["tune", "--model", "kim-cnn", "--train", str(corpus / "train.jsonl"), "--out", str(out), "--lr", "0.001",
            "--epochs", "2", "--set", "embeddings=random", "--set", "embedding_dim=16", "--set", "min_count=2"]
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
    from docattn.training.engine import check_resumable, read_checkpoint

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
    "pickle": re.compile(r"^\s*(import|from)\s+(c?pickle|dill|joblib|cloudpickle)\b|\b(c?pickle|dill|joblib)\.loads?\(", re.M),
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
    bad = {"torch.load without weights_only=True": 'torch.load(p, map_location="cpu", weights_only=False)',
           "pickle": "import pickle", "allow_pickle=True": "np.load(p, allow_pickle=True)",
           "eval(": "eval(text)", "exec(": "exec(code)"}
    for what, text in bad.items():
        assert _FORBIDDEN[what].search(text), what
    for safe in ('torch.load(p, map_location="cpu", weights_only=True, mmap=True)', "model.eval()", "np.load(p)"):
        assert not any(p.search(safe) for p in _FORBIDDEN.values()), safe
