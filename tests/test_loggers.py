"""Experiment logging (``--logger``, ``logger=``): TensorBoard event files holding the curves, the learning rate
and the test table; Lightning's CSV logger from the Python API; nothing written outside the run folder; a
logger whose package is missing refused in one line before any work."""

from __future__ import annotations

import csv
import importlib.util
import json
import os

import pytest
from cli_runs import TINY, run_cli
from tiny_runs import TINY_HAN as TINY_API

from docattn.data import synthetic
from docattn.errors import ConfigError
from docattn.training.config import TrainConfig


def _write(path, corpus) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for text, label in zip(corpus.texts, corpus.labels):
            f.write(json.dumps({"text": text, "label": label}) + "\n")


_FIND_SPEC = importlib.util.find_spec


def _not_installed(name: str, *args):
    """find_spec as where neither MLflow nor W&B is installed."""
    return None if name in ("mlflow", "wandb") else _FIND_SPEC(name, *args)


def test_logger_names_are_checked_and_a_missing_package_is_named(monkeypatch):
    assert TrainConfig(logger="TensorBoard").logger == "tensorboard"
    assert TrainConfig(logger="none").logger is None and TrainConfig().logger is None
    with pytest.raises(ConfigError, match="did you mean 'tensorboard'"):
        TrainConfig(logger="tensorbord")
    monkeypatch.setattr(importlib.util, "find_spec", _not_installed)
    for name in ("mlflow", "wandb"):
        with pytest.raises(ConfigError) as err:
            TrainConfig(logger=name)
        assert str(err.value) == f"logger={name!r} needs the {name} package, which is not installed: pip install {name}"
    # a run that logged to MLflow still loads where MLflow is not installed (to predict, evaluate, explain)
    assert TrainConfig.from_json({"recipe": "auto", "logger": "mlflow"}).logger == "mlflow"
    from docattn.classifier import DocumentClassifier

    with pytest.raises(ConfigError, match="pip install wandb"):  # the Python API refuses it as it is built
        DocumentClassifier("han", logger="wandb")


def test_without_a_logger_or_a_run_folder_lightning_gets_none(tmp_path):
    from docattn.training.loggers import build_loggers

    assert build_loggers(TrainConfig(), tmp_path) is False
    assert build_loggers(TrainConfig(logger="csv"), None) is False
    assert not (tmp_path / "logs").exists()


@pytest.mark.skipif(
    all(importlib.util.find_spec(n) for n in ("mlflow", "wandb")), reason="mlflow and wandb are both installed"
)
def test_a_logger_that_is_not_installed_is_refused_before_any_work(tmp_path):
    name = next(n for n in ("wandb", "mlflow") if importlib.util.find_spec(n) is None)
    (tmp_path / "train.jsonl").write_text(json.dumps({"text": "a b c", "label": "x"}) + "\n")
    res = run_cli("train", "--train", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "run"), "--logger", name)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"error: logger={name!r} needs the {name} package, which is not installed: pip install {name}"
    ]
    assert not (tmp_path / "run").exists()


def test_tensorboard_logs_the_curves_the_learning_rate_and_the_test_table_inside_the_run(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from docattn.training.callbacks import MetricsLog
    from docattn.training.run_folder import docattn_files, others

    splits = synthetic.make_splits(n_train=240, n_test=60, seed=5)
    _write(tmp_path / "train.jsonl", splits["train"])
    _write(tmp_path / "test.jsonl", splits["test"])
    env = {**os.environ, "DOCATTN_CACHE": str(tmp_path / "cache")}
    args = ["--train", "train.jsonl", "--test", "test.jsonl", "--out", "run", "--epochs", "1", *TINY]
    res = run_cli("train", *args, "--logger", "tensorboard", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    run = tmp_path / "run"
    events = EventAccumulator(str(run / "logs" / "tensorboard"))
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    assert {"val_acc", "val_loss", "lr", "train_loss", "train_docs_per_s", "test_accuracy"} <= scalars, scalars
    assert "test/text_summary" in events.Tags()["tensors"]  # the test table, the baseline's row beside the model's
    # metrics.csv is as it always was, and the logger's learning rates are its rows'
    with open(run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == MetricsLog.COLUMNS
    assert [round(e.value, 5) for e in events.Scalars("lr")] == [round(float(r["lr"]), 5) for r in rows]
    assert [e.step for e in events.Scalars("lr")] == [int(r["step"]) for r in rows]
    assert json.loads((run / "config.json").read_text())["results"]["test"]["accuracy"] == pytest.approx(
        events.Scalars("test_accuracy")[0].value
    )
    # nothing outside the run folder (no ./lightning_logs), and the event files are the run's own:
    # --overwrite removes them with it
    assert {p.name for p in tmp_path.iterdir()} == {"train.jsonl", "test.jsonl", "cache", "run"}
    assert not [n for n in others(run) if n.startswith("logs/")]
    assert any(n.startswith("logs/tensorboard/events.out.tfevents") for n in docattn_files(run))


def test_the_csv_logger_from_the_python_api_and_no_logs_without_a_run_folder(tmp_path, monkeypatch):
    from docattn.classifier import DocumentClassifier

    monkeypatch.chdir(tmp_path)  # where Lightning would put lightning_logs/ by default
    splits = synthetic.make_splits(n_train=240, n_test=60, seed=5)
    texts, labels = splits["train"].sentences, splits["train"].labels
    DocumentClassifier("han", logger="csv", **TINY_API).fit(texts, labels, run_dir=tmp_path / "run")
    logs = tmp_path / "run" / "logs" / "csv"
    with open(logs / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {"val_acc", "lr", "train_loss", "train_docs_per_s"} <= set(rows[0])
    assert any(r["val_acc"] for r in rows) and any(r["lr"] for r in rows)
    assert "batch_size" in (logs / "hparams.yaml").read_text()  # the training options, as hyper-parameters
    DocumentClassifier("han", logger="csv", **TINY_API).fit(texts, labels)  # no run folder: nothing is logged
    assert {p.name for p in tmp_path.iterdir()} == {"run"}
