"""The docattn command on data: `data stats` of real benchmarks and a quoted TSV, what training's readers skipped."""

from __future__ import annotations

import json
import os

from cli_runs import TINY, run_cli
from typer.testing import CliRunner

from docattn.cli import app
from docattn.data import synthetic


def test_data_stats_imdb(shared_data):
    res = CliRunner().invoke(app, ["data", "stats", str(shared_data / "imdb" / "aclImdb.tar.gz"), "--json"])
    assert res.exit_code == 0, res.output
    stats = json.loads(res.stdout)
    for split in ("train", "test"):
        assert stats[split]["documents"] == 25000
        assert stats[split]["class_counts"] == {"neg": 12500, "pos": 12500}


def test_data_stats_20news(shared_data):
    res = CliRunner().invoke(app, ["data", "stats", str(shared_data / "20news" / "20news-bydate.tar.gz"), "--json"])
    stats = json.loads(res.stdout)
    assert stats["train"]["documents"] == 11314 and stats["test"]["documents"] == 7532
    assert stats["train"]["classes"] == 20


def test_train_says_what_the_readers_skipped_or_decoded(tmp_path):
    sp = synthetic.make_splits(n_train=120, n_test=10, seed=4)
    root = tmp_path / "data" / "train"
    for i, (text, label) in enumerate(zip(sp["train"].texts, sp["train"].labels)):
        (root / str(label)).mkdir(parents=True, exist_ok=True)
        (root / str(label) / f"{i}.txt").write_text(text, encoding="utf-8")
    (root / str(sp["train"].labels[0]) / "latin.txt").write_bytes("un caf\xe9 tr\xe8s bon".encode("latin-1"))
    (root / str(sp["train"].labels[0]) / "empty.txt").write_text("  \n")
    env = {**os.environ, "DOCATTN_CACHE": str(tmp_path / "cache")}
    res = run_cli(
        "train", "--train", str(tmp_path / "data"), "--out", str(tmp_path / "run"), "--epochs", "1", *TINY, env=env
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "skipped empty documents: 1" in res.stderr and "not UTF-8, read as Latin-1" in res.stderr


def test_data_stats_says_when_a_quoted_tsv_field_holds_a_line_break_and_a_tab(tmp_path):
    path = tmp_path / "d.tsv"
    path.write_text('text\tlabel\n"Brilliant film\tpos\nawful ending"\tneg\nfine\tpos\n')
    res = CliRunner().invoke(app, ["data", "stats", str(path)])
    assert res.exit_code == 0, res.output
    assert "quoted text holds a line break and a tab: 1 (first:" in res.output and 'double it ("")' in res.output
