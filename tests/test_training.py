"""The training engine: resume, a failed fit undone, metrics rows, validation and progress, divergence."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from conftest import killed_in_epoch

from docattn.classifier import DocumentClassifier
from docattn.data import synthetic
from docattn.data.prepare import DataSettings, prepare
from docattn.errors import ConfigError, Interrupted

TINY = dict(embedding_dim=16, hidden_size=8, context_dim=8, progress=False, min_count=2)


def test_resume_continues_where_it_stopped(data, tmp_path):
    run = tmp_path / "run"
    DocumentClassifier("han", max_epochs=1, embeddings="random", val_per_epoch=1, **TINY).fit_prepared(
        data, run_dir=run
    )
    assert (run / "checkpoints" / "last.ckpt").exists()
    clf = DocumentClassifier("han", max_epochs=3, embeddings="random", val_per_epoch=1, **TINY).fit_prepared(
        data, run_dir=run, resume=True
    )
    rows = list(csv.DictReader((run / "metrics.csv").read_text().splitlines()))
    assert [int(r["epoch"]) for r in rows] == [0, 1, 2]  # epoch 0 was not trained again
    assert clf.results["best"]["epoch"] in (0, 1, 2)


def test_resume_asking_fewer_epochs_than_trained_is_refused_before_anything_is_written(data, tmp_path):
    run = tmp_path / "run"
    DocumentClassifier("han", max_epochs=2, embeddings="random", val_per_epoch=1, **TINY).fit_prepared(
        data, run_dir=run
    )
    before = {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    for epochs in (1, 2):  # fewer, or as many: either way nothing is left to train
        with pytest.raises(
            ConfigError,
            match=rf"has already trained 2 epoch\(s\), nothing is left to resume; give "
            rf"--epochs 3 or more .*now: {epochs}",
        ):
            DocumentClassifier("han", max_epochs=epochs, embeddings="random", val_per_epoch=1, **TINY).fit_prepared(
                data, run_dir=run, resume=True
            )
        assert {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_a_failed_fit_leaves_the_classifier_as_it_was(data, monkeypatch):
    """Refitting a fitted classifier on other classes, interrupted: it still predicts with its old model."""
    from docattn.training import engine

    clf = DocumentClassifier("han", max_epochs=1, embeddings="random", **TINY).fit_prepared(data)
    model, classes, texts = clf.model, clf.classes_, ["a short text", "another one"]
    expected = clf.predict_proba(texts)
    other = synthetic.make_splits(n_train=60, n_test=10, seed=1, n_classes=3)

    def interrupt(self, trainer, pl_module):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine.MetricsLog, "on_train_epoch_start", interrupt)
    text, vocab, results = clf.data_settings.text, clf.vocab, clf.results
    with pytest.raises(Interrupted, match="training stopped by SIGINT"):
        clf.fit(other["train"].texts, [f"new-{y}" for y in other["train"].labels])
    assert clf.model is model and clf.classes_ == classes and clf.vocab is vocab and clf.results is results
    assert clf.data_settings.text is text
    np.testing.assert_array_equal(clf.predict_proba(texts), expected)


def test_a_new_run_interrupted_before_its_first_validation_does_not_keep_the_old_runs_weights(
    data, tmp_path, monkeypatch
):
    """Training again into a run folder rewrites config.json and vocab.json at once; the earlier run's
    weights must not stay beside them, where they would load as the new run's model."""
    from docattn.errors import CheckpointError
    from docattn.training import engine
    from docattn.training.run import load_run

    run = tmp_path / "run"
    DocumentClassifier("han", max_epochs=1, embeddings="random", **TINY).fit_prepared(data, run_dir=run)
    assert load_run(run).model_name == "han"

    def interrupt(self, trainer, pl_module):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine.MetricsLog, "on_train_epoch_start", interrupt)
    with pytest.raises(Interrupted, match="nothing to resume"):
        DocumentClassifier("han", max_epochs=1, embeddings="random", seed=3, **TINY).fit_prepared(data, run_dir=run)
    with pytest.raises(CheckpointError, match=r"model.safetensors missing \(a run stopped before its first validation"):
        load_run(run)


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_seed_out_of_numpys_range_is_a_config_error(seed):
    with pytest.raises(ConfigError, match=r"seed must be from 0 to 4294967295"):
        DocumentClassifier("han", seed=seed)


def test_macro_f1_averages_true_and_predicted_classes_as_scikit_learn():
    from sklearn.metrics import f1_score

    from docattn.training.metrics import classification_report

    gold = [0, 0, 1, 1, 0, 1]
    pred = [0, 2, 1, 3, 0, 1]  # classes 2 and 3 predicted, never true; class 4 neither
    report = classification_report(gold, pred, ["a", "b", "c", "d", "e"])
    assert report["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro"))


def test_resume_after_a_crash_mid_training(data, tmp_path, monkeypatch):
    """A run killed in its third epoch resumes from the checkpoint of its second, logging each epoch once."""
    run = tmp_path / "run"
    with killed_in_epoch(monkeypatch, 2):
        DocumentClassifier("han", max_epochs=4, embeddings="random", val_per_epoch=2, **TINY).fit_prepared(
            data, run_dir=run
        )
    assert (run / "checkpoints" / "last.ckpt").exists() and (run / "model.safetensors").exists()
    clf = DocumentClassifier("han", max_epochs=4, embeddings="random", val_per_epoch=2, **TINY).fit_prepared(
        data, run_dir=run, resume=True
    )
    rows = list(csv.DictReader((run / "metrics.csv").read_text().splitlines()))
    # 5 batches an epoch, validated after 2 and 4; the last step of the run gets one more
    assert [int(r["epoch"]) for r in rows] == [0, 0, 1, 1, 2, 2, 3, 3, 3]
    assert [int(r["step"]) for r in rows] == sorted(int(r["step"]) for r in rows)
    assert [h["epoch"] for h in clf.results["history"]] == [0, 0, 1, 1, 2, 2, 3, 3, 3]
    assert clf.results["best"]["val_acc"] == pytest.approx(
        max(float(r["val_acc"]) for r in rows), abs=1e-6
    )  # CSV: 6 digits


def test_metrics_rows_hold_the_loss_and_rate_since_the_previous_validation(data, tmp_path):
    """Each row's train_loss is the mean over the documents trained on since the row before, and lr the
    rate those steps used (an epoch-end scheduler step used to show the next epoch's, 0 on the last row)."""
    run = tmp_path / "run"
    DocumentClassifier(
        "han", max_epochs=3, embeddings="random", val_per_epoch=2, schedule="cosine", optimizer="adam", lr=0.01, **TINY
    ).fit_prepared(data, run_dir=run)
    rows = list(csv.DictReader((run / "metrics.csv").read_text().splitlines()))
    losses = [float(r["train_loss"]) for r in rows]
    rates = [float(r["lr"]) for r in rows]
    assert len(rows) == 7 and all(np.isfinite(losses)) and len(set(losses)) == len(losses)
    assert all(r > 0 for r in rates) and rates == sorted(rates, reverse=True)
    assert int(rows[-1]["step"]) == 15  # 5 batches an epoch, validated after 2 and 4: the final weights too


def test_a_new_run_in_an_old_folder_starts_afresh(data, tmp_path):
    run = tmp_path / "run"
    counts = []
    for _ in range(2):
        DocumentClassifier("han", max_epochs=1, embeddings="random", **TINY).fit_prepared(data, run_dir=run)
        counts.append(len(list(csv.DictReader((run / "metrics.csv").read_text().splitlines()))))
    assert counts[0] >= 1 and counts[1] == counts[0]  # the second run's rows only


def test_resume_from_a_damaged_checkpoint_is_a_clear_error(data, tmp_path):
    from docattn.errors import CheckpointError

    run = tmp_path / "run"
    DocumentClassifier("han", max_epochs=1, embeddings="random", **TINY).fit_prepared(data, run_dir=run)
    last = run / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])
    before = {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    with pytest.raises(CheckpointError, match="cannot resume"):
        DocumentClassifier("han", max_epochs=2, embeddings="random", **TINY).fit_prepared(
            data, run_dir=run, resume=True
        )
    assert {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # history and scores kept


def test_resume_on_other_data_is_refused_and_leaves_the_run_usable(data, tmp_path):
    """Other data gives another vocabulary or classes: refused before the run's files are rewritten."""
    from docattn.errors import CheckpointError

    run = tmp_path / "run"
    first = DocumentClassifier("han", max_epochs=1, embeddings="random", **TINY).fit_prepared(data, run_dir=run)
    files = {name: (run / name).read_bytes() for name in ("config.json", "vocab.json", "model.safetensors")}
    sp = synthetic.make_splits(n_train=300, n_test=50, n_classes=3, seed=9)
    other = prepare(sp["train"], None, None, DataSettings(min_count=2))
    with pytest.raises(CheckpointError, match=r"not the data .* was trained on; nothing was changed"):
        DocumentClassifier("han", max_epochs=2, embeddings="random", **TINY).fit_prepared(
            other, run_dir=run, resume=True
        )
    assert {name: (run / name).read_bytes() for name in files} == files
    again = DocumentClassifier.load(run)
    assert again.classes_ == first.classes_


def test_validation_several_times_per_epoch(data):
    """val_per_epoch=3: three validations per epoch, so the best checkpoint is chosen at a third of an epoch."""
    clf = DocumentClassifier(
        "han", max_epochs=2, batch_size=32, embeddings="random", val_per_epoch=3, **TINY
    ).fit_prepared(data)
    history = clf.results["history"]
    assert [row["epoch"] for row in history] == [0, 0, 0, 1, 1, 1]
    assert len({row["step"] for row in history}) == 6
    few = DocumentClassifier(
        "han", max_epochs=1, batch_size=64, embeddings="random", val_per_epoch=3, **TINY
    ).fit_prepared(data)
    # 5 batches an epoch: every 2nd (never more often than asked), and the run's last step for its final weights
    assert [row["step"] for row in few.results["history"]] == [2, 4, 5]
    with pytest.raises(ConfigError, match="val_per_epoch"):
        DocumentClassifier("han", val_per_epoch=0)


def test_progress_lines_without_a_terminal(data, capsys):
    """Where no live bar can be seen (a log file), each validation still reports itself as a line."""
    opts = {**TINY, "progress": True}
    DocumentClassifier("han", max_epochs=2, embeddings="random", val_per_epoch=1, **opts).fit_prepared(data)
    lines = [line.strip() for line in capsys.readouterr().err.splitlines() if "val_acc" in line]  # no terminal
    assert len(lines) == 3 and lines[0].startswith("epoch 1 ") and "docs/s" in lines[0]
    assert lines[2].startswith("the mean of the 2 best validations' weights: val_acc")  # average_best, last
    opts["progress"] = False
    DocumentClassifier("han", max_epochs=1, embeddings="random", **opts).fit_prepared(data)
    assert "val_acc" not in capsys.readouterr().err  # progress off: silent


def test_mixed_precision_with_clipping_trains():
    """bf16-mixed plus gradient clipping: the optimizer is not fused (Lightning refuses to clip one that
    unscales itself) and the CPU GRU recurrence runs in float32 under autocast."""
    sp = synthetic.make_splits(n_train=200, n_test=20, seed=6)
    clf = DocumentClassifier(
        "han", max_epochs=1, embeddings="random", device="cpu", precision="bf16-mixed", grad_clip=1.0, **TINY
    ).fit(sp["train"].sentences, sp["train"].labels)
    proba = clf.predict_proba(sp["test"].texts)
    assert clf.results["device"] == "cpu" and np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-5)


def test_loader_workers_build_the_same_batches(data):
    """Batches built in worker processes train the same model as batches built in the training process."""
    # dropouts off: their random masks differed between the two runs, and this test compares the batches
    opts = dict(max_epochs=2, embeddings="random", val_per_epoch=1, device="cpu", dropout=0.0, word_dropout=0.0, **TINY)
    here = DocumentClassifier("han", **opts).fit_prepared(data)
    workers = DocumentClassifier("han", loader_workers=2, **opts).fit_prepared(data)
    assert [r["val_loss"] for r in here.results["history"]] == pytest.approx(
        [r["val_loss"] for r in workers.results["history"]]
    )
    from docattn.training.inference import predict_logits

    test = data.splits["test"]
    np.testing.assert_allclose(
        predict_logits(here.model, test), predict_logits(workers.model, test), rtol=1e-5, atol=1e-6
    )
    with pytest.raises(ConfigError, match="loader_workers"):
        DocumentClassifier("han", loader_workers=-1)


def test_a_diverging_run_stops_and_says_so(data):
    """A loss and weights gone NaN end training at once: before any validation it is an error,
    after one the run keeps the weights from before (NaN weights still score an accuracy: never kept)."""
    from docattn.errors import Diverged

    with pytest.raises(
        Diverged, match=r"training diverged: .* before any validation; lower the learning rate \(now 1e\+12\)"
    ):
        DocumentClassifier(
            "kim-cnn",
            max_epochs=2,
            embeddings="random",
            optimizer="adam",
            lr=1e12,
            progress=False,
            min_count=2,
            embedding_dim=16,
        ).fit_prepared(data)


def _poison_at(monkeypatch, epoch: int, batch: int, stop: bool = False) -> None:
    """Make every weight NaN at that training step (and, with ``stop``, end training there, as --max-time would)."""
    import torch

    from docattn.training import engine

    step = engine.ClassifierModule.training_step

    def poisoned(self, b, batch_idx):
        if self.trainer.current_epoch == epoch and batch_idx == batch:
            with torch.no_grad():
                for p in self.model.parameters():
                    p.fill_(float("nan"))
            if stop:
                self.trainer.should_stop = True
        return step(self, b, batch_idx)

    monkeypatch.setattr(engine.ClassifierModule, "training_step", poisoned)


def test_divergence_after_a_validation_keeps_the_weights_from_before(data, monkeypatch, tmp_path):
    import torch

    _poison_at(monkeypatch, epoch=1, batch=2)
    clf = DocumentClassifier("han", max_epochs=3, embeddings="random", val_per_epoch=1, **TINY).fit_prepared(
        data, run_dir=tmp_path / "run"
    )
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["epoch"] == 0 and all(torch.isfinite(v).all() for v in ckpt["state_dict"].values())  # --resume: no NaN
    at = clf.results["diverged_at"]
    assert at["epoch"] == 1 and clf.results["best"]["epoch"] == 0
    assert len([r for r in clf.results["history"] if r.get("epoch") == 2]) == 0  # it stopped in epoch 2 of 3
    assert all(torch.isfinite(p).all() for p in clf.model.parameters())
    assert np.isfinite(clf.predict_proba(["a short review"])).all()
    with torch.no_grad():
        next(clf.model.parameters()).fill_(float("nan"))
    from docattn.errors import DocattnError

    with pytest.raises(DocattnError, match=r"NaN or infinite probabilities for 1 of 1 document"):
        clf.predict(["a short review"])  # not class 0, silently


def test_divergence_between_two_checks_is_caught_when_training_ends(data, monkeypatch):
    """A time budget or early stop can end training between the guard's checks: it looks once more at the end."""
    from docattn.errors import Diverged

    _poison_at(monkeypatch, epoch=0, batch=2, stop=True)  # global step 3: no check is due
    with pytest.raises(Diverged, match="by step 3"):
        DocumentClassifier("han", max_epochs=2, embeddings="random", batch_size=16, **TINY).fit_prepared(data)


def test_a_run_stopped_mid_epoch_after_diverging_keeps_no_nan_checkpoint(data, monkeypatch, tmp_path):
    """Lightning ends the epoch (where ResumePoint writes) before training ends: the guard looks there first."""
    import torch

    _poison_at(monkeypatch, epoch=1, batch=2, stop=True)
    clf = DocumentClassifier(
        "han", max_epochs=3, embeddings="random", batch_size=16, val_per_epoch=1, **TINY
    ).fit_prepared(data, run_dir=tmp_path / "run")
    assert clf.results["diverged_at"]["epoch"] == 1 and clf.results["best"]["epoch"] == 0
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert ckpt["epoch"] == 0 and all(torch.isfinite(v).all() for v in ckpt["state_dict"].values())
