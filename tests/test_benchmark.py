"""``docattn benchmark``: results.json rows, the Markdown table and the curve plot."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from docattn.cli import app
from docattn.data import synthetic


def test_benchmark_two_models_two_seeds(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCATTN_CACHE", str(tmp_path / "cache"))
    sp = synthetic.make_splits(n_train=300, n_test=100, seed=7)
    folder = tmp_path / "data"
    folder.mkdir()
    for split in ("train", "test"):
        with open(folder / f"{split}.jsonl", "w") as f:
            for t, y in zip(sp[split].texts, sp[split].labels):
                f.write(json.dumps({"text": t, "label": y}) + "\n")
    res = CliRunner().invoke(app, [
        "benchmark", "--data", str(folder / "train.jsonl"), "--models", "han,han-max", "--seeds", "2", "--first-seed", "3",
        "--runs", str(tmp_path / "runs"),
        "--out", str(tmp_path / "bench"), "--max-epochs", "1",
        "--set", "embedding_dim=16", "--set", "hidden_size=8", "--set", "context_dim=8",
        "--set", "embeddings=random", "--set", "min_count=2", "--test", str(folder / "test.jsonl"),
    ])
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "bench" / "results.json").read_text())
    assert [r["model"] for r in rows] == ["han", "han-max"]
    for r in rows:
        assert 0 <= r["test_accuracy"]["mean"] <= 1 and r["test_accuracy"]["std"] >= 0
        assert r["seeds"] == [3, 4] and r["parameters"] > 0 and r["train_docs_per_s"]["mean"] > 0
        assert r["inference_docs_per_s"]["mean"] > 0 and "macro_f1" not in r
        assert r["peak_memory_mb"] > 50 and r["peak_memory_kind"] == "process_rss_peak"  # torch alone is more
        epochs = [h["epoch"] for h in r["trials"][0]["history"]]
        assert epochs and set(epochs) == {0}  # the curve has its validation points
    kept = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert kept == ["han-max-seed3", "han-max-seed4", "han-seed3", "han-seed4"]
    from docattn.classifier import DocumentClassifier

    clf = DocumentClassifier.load(tmp_path / "runs" / "han-seed4")
    assert len(clf.predict(sp["test"].texts[:3])) == 3
    md = (tmp_path / "bench" / "results.md").read_text()
    assert "| han |" in md and "| han-max |" in md
    assert (tmp_path / "bench" / "curves.png").read_bytes()[:4] == b"\x89PNG"
    about = json.loads((tmp_path / "bench" / "run.json").read_text())  # enough to rerun and compare
    assert about["models"] == ["han", "han-max"] and about["seeds"] == [3, 4]
    assert about["finished_models"] == ["han", "han-max"] and about["wall_seconds"] > 0
    assert about["machine"]["cpu_count"] >= 1 and about["machine"]["torch_threads"] >= 1
    assert about["command"].split()[0] == "docattn" and about["options"]["embedding_dim"] == 16  # argv: the runner's here
