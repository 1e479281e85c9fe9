"""The training engine: resume, learning-rate search, embeddings from files, optimiser groups."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from docattn.classifier import DocumentClassifier
from docattn.data import synthetic
from docattn.data.prepare import DataSettings, prepare
from docattn.errors import ConfigError, DataError, Interrupted

TINY = dict(embedding_dim=16, hidden_size=8, context_dim=8, progress=False, min_count=2)


@pytest.fixture(scope="module")
def data():
    sp = synthetic.make_splits(n_train=300, n_test=100, seed=5)
    return prepare(sp["train"], None, sp["test"], DataSettings(min_count=2))


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
    from docattn.training import engine

    run = tmp_path / "run"
    real = engine.MetricsLog.on_train_epoch_start

    def crash_in_epoch_2(self, trainer, pl_module):
        if trainer.current_epoch == 2:
            raise RuntimeError("killed")
        real(self, trainer, pl_module)

    monkeypatch.setattr(engine.MetricsLog, "on_train_epoch_start", crash_in_epoch_2)
    with pytest.raises(RuntimeError, match="killed"):
        DocumentClassifier("han", max_epochs=4, embeddings="random", val_per_epoch=2, **TINY).fit_prepared(
            data, run_dir=run
        )
    assert (run / "checkpoints" / "last.ckpt").exists() and (run / "model.safetensors").exists()
    monkeypatch.setattr(engine.MetricsLog, "on_train_epoch_start", real)
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


def test_embeddings_from_glove_file(data, tmp_path):
    words = data.vocab.tokens[3:13]
    glove = tmp_path / "glove.txt"
    glove.write_text(
        "".join(f"{w} " + " ".join(["0.5"] * 16) + "\n" for w in words) + "zzzunseen " + " ".join(["1"] * 16) + "\n"
    )
    clf = DocumentClassifier("han", max_epochs=1, embeddings=str(glove), freeze_embeddings=True, **TINY).fit_prepared(
        data
    )
    cov = clf.results["coverage"]
    assert cov["words"] == 10 and 0 < cov["token_share"] <= 1
    emb = clf.model.embedding.weight
    assert not emb.requires_grad
    np.testing.assert_allclose(emb[data.vocab.index[words[0]]].detach().numpy(), 0.5)
    bad = tmp_path / "bad.txt"
    bad.write_text("x 1 2\ny 1\n")
    with pytest.raises((DataError, ConfigError)):
        DocumentClassifier("han", max_epochs=1, embeddings=str(bad), **TINY).fit_prepared(data)


def test_frozen_random_embeddings_stay_as_they_started(data):
    """freeze_embeddings holds for the model's own random vectors too, not only for loaded ones."""
    import copy

    clf = DocumentClassifier("han", max_epochs=1, embeddings="random", freeze_embeddings=True, **TINY)
    seen = {}
    from docattn.training import trainer

    real = trainer.init_embeddings

    def spy(model, d, cfg):
        info = real(model, d, cfg)
        seen["start"] = copy.deepcopy(model.embedding.weight.detach())
        return info

    trainer.init_embeddings = spy
    try:
        clf.fit_prepared(data)
    finally:
        trainer.init_embeddings = real
    assert not clf.model.embedding.weight.requires_grad
    assert bool((clf.model.embedding.weight.detach() == seen["start"]).all())


def test_word2vec_initialisation(data):
    from docattn.data.embeddings import train_word2vec

    m = train_word2vec(data.splits["train"], data.vocab, dim=16, epochs=1, workers=1)
    assert m.shape == (len(data.vocab), 16) and np.all(m[0] == 0) and np.isfinite(m).all()
    sg = train_word2vec(data.splits["train"], data.vocab, dim=16, epochs=1, workers=1, skipgram=True)
    assert sg.shape == m.shape and np.isfinite(sg).all() and not np.allclose(sg[3:], m[3:])
    again = train_word2vec(data.splits["train"], data.vocab, dim=16, epochs=1, workers=1, skipgram=True)
    np.testing.assert_array_equal(sg, again)  # one worker thread: reproducible


def test_word2vec_with_one_worker_is_the_same_in_another_process(data, tmp_path):
    """gensim seeds each word's start vector with a hash of it; Python's str hash differs per process."""
    import os
    import subprocess
    import sys

    from docattn.data.embeddings import train_word2vec

    here = train_word2vec(data.splits["train"], data.vocab, dim=16, epochs=1, workers=1)
    code = (
        "import numpy as np; from docattn.data import synthetic; "
        "from docattn.data.prepare import prepare, DataSettings; "
        "from docattn.data.embeddings import train_word2vec; "
        "sp = synthetic.make_splits(n_train=300, n_test=100, seed=5); "
        "d = prepare(sp['train'], None, sp['test'], DataSettings(min_count=2)); "
        f"np.save({str(tmp_path / 'there.npy')!r}, "
        "train_word2vec(d.splits['train'], d.vocab, dim=16, epochs=1, workers=1))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONHASHSEED": "12345"})
    np.testing.assert_array_equal(here, np.load(tmp_path / "there.npy"))


def test_word2vec_reads_extra_unlabelled_text(data, tmp_path):
    """Text from word2vec_text moves the vectors, is cached under its own name, and needs word2vec."""
    from docattn.training.config import TrainConfig
    from docattn.training.trainer import _cached_word2vec

    words = data.vocab.tokens[3:40]
    extra = tmp_path / "unlabelled.txt"
    extra.write_text("".join(" ".join(words[i:] + words[:i]) + "\n" for i in range(200)), encoding="utf-8")
    data.info["cache"] = str(tmp_path)
    try:
        plain = _cached_word2vec(data, 16, TrainConfig(word2vec_epochs=1))
        more = _cached_word2vec(data, 16, TrainConfig(word2vec_epochs=1, word2vec_text=str(extra)))
    finally:
        data.info.pop("cache")
    assert more.shape == plain.shape and not np.allclose(more[3:40], plain[3:40])
    assert len(list(tmp_path.glob("word2vec-x*-d16-e1-s0.npy"))) == 1 and (tmp_path / "word2vec-d16-e1-s0.npy").exists()
    with pytest.raises(ConfigError, match="word2vec_text"):
        TrainConfig(embeddings="random", word2vec_text=str(extra))
    with pytest.raises(DataError, match="no such"):
        DocumentClassifier("han", max_epochs=1, word2vec_text=str(tmp_path / "missing.txt"), **TINY).fit_prepared(data)


def test_skipgram_vectors_are_cached_apart_from_cbow(data, tmp_path):
    """A skip-gram run never reads CBOW vectors cached for the same corpus, size, epochs and seed."""
    from docattn.training.config import TrainConfig
    from docattn.training.trainer import _cached_word2vec

    data.info["cache"] = str(tmp_path)
    try:
        cbow = _cached_word2vec(data, 16, TrainConfig(word2vec_epochs=1))
        sg = _cached_word2vec(data, 16, TrainConfig(word2vec_epochs=1, word2vec_skipgram=True))
        sg_again = _cached_word2vec(data, 16, TrainConfig(word2vec_epochs=1, word2vec_skipgram=True))
    finally:
        data.info.pop("cache")
    assert (tmp_path / "word2vec-d16-e1-s0.npy").exists() and (tmp_path / "word2vec-sg-d16-e1-s0.npy").exists()
    assert not np.allclose(sg[3:], cbow[3:])
    np.testing.assert_array_equal(sg, sg_again)


def test_ema_scores_keeps_and_saves_the_averaged_weights(data, tmp_path):
    """Under ema_decay the weights kept, returned and written are the average validation scored."""
    import torch
    from safetensors.torch import load_file

    from docattn.training.inference import predict_logits

    def rescored_loss(model) -> float:
        logits = torch.from_numpy(predict_logits(model, data.splits["valid"], 64, {}))
        return float(
            torch.nn.functional.cross_entropy(logits, torch.from_numpy(np.asarray(data.splits["valid"].labels)))
        )

    options = dict(max_epochs=2, embeddings="random", val_per_epoch=2, monitor="val_loss", **TINY)
    ema = DocumentClassifier("han", ema_decay=0.9, **options).fit_prepared(data, run_dir=tmp_path / "ema")
    plain = DocumentClassifier("han", **options).fit_prepared(data)
    assert rescored_loss(ema.model) == pytest.approx(ema.results["best"]["val_loss"], rel=1e-4)
    saved = load_file(str(tmp_path / "ema" / "model.safetensors"))
    assert all(torch.equal(saved[k], v) for k, v in ema.model.state_dict().items())
    same = [a.equal(b) for a, b in zip(ema.model.state_dict().values(), plain.model.state_dict().values())]
    assert not all(same)  # the average is not what the same run without it keeps
    with pytest.raises(ConfigError, match="ema_decay"):
        DocumentClassifier("han", ema_decay=1.0, **TINY)


def test_sgd_with_separate_embedding_group(data):
    from docattn.models import create_model
    from docattn.training.config import TrainConfig
    from docattn.training.engine import ClassifierModule

    model = create_model(
        "han", vocab_size=len(data.vocab), num_classes=4, embedding_dim=16, hidden_size=8, context_dim=8
    )
    cfg = TrainConfig(
        optimizer="sgd",
        lr=0.01,
        momentum=0.9,
        embedding_lr=0.001,
        embedding_momentum=0.0,
        schedule="multistep",
        milestones=[2],
    )
    (opt,), _ = ClassifierModule(model, cfg).configure_optimizers()
    emb = next(g for g in opt.param_groups if any(p is model.embedding.weight for p in g["params"]))
    assert emb["lr"] == 0.001 and emb["momentum"] == 0.0
    other = next(g for g in opt.param_groups if g is not emb)
    assert other["lr"] == 0.01 and other["momentum"] == 0.9


def test_embedding_weight_decay_group(data):
    """Adam's coupled L2 shrinks rarely-updated word vectors towards 0: the embeddings can opt out."""
    import torch

    from docattn.models import create_model
    from docattn.training.config import TrainConfig
    from docattn.training.engine import ClassifierModule

    model = create_model(
        "han", vocab_size=len(data.vocab), num_classes=4, embedding_dim=16, hidden_size=8, context_dim=8
    )
    cfg = TrainConfig(optimizer="adam", lr=0.01, weight_decay=1e-2, embedding_weight_decay=0.0)
    opt = ClassifierModule(model, cfg).configure_optimizers()
    emb = next(g for g in opt.param_groups if any(p is model.embedding.weight for p in g["params"]))
    other = next(g for g in opt.param_groups if g is not emb)
    assert emb["weight_decay"] == 0.0 and other["weight_decay"] == 1e-2
    # a word no batch contains keeps its vector exactly (a zero gradient plus L2 would move it)
    before = model.embedding.weight.detach().clone()
    model.embedding.weight.grad = torch.zeros_like(model.embedding.weight)
    for p in other["params"]:
        p.grad = torch.zeros_like(p)
    opt.step()
    assert torch.equal(model.embedding.weight, before)
    default = ClassifierModule(model, TrainConfig(optimizer="adam", weight_decay=1e-2)).configure_optimizers()
    assert all(g["weight_decay"] == 1e-2 for g in default.param_groups)


@pytest.mark.filterwarnings("ignore:You are trying")
def test_label_smoothing_softens_the_training_targets_only(data):
    """The training loss is cross-entropy against (1 - e) one-hot + e / C; validation loss stays plain."""
    import torch
    import torch.nn.functional as F

    from docattn.data.batching import hierarchical_batch
    from docattn.models import create_model
    from docattn.training.config import TrainConfig
    from docattn.training.engine import ClassifierModule

    torch.manual_seed(0)
    model = create_model(
        "han", vocab_size=len(data.vocab), num_classes=4, embedding_dim=16, hidden_size=8, context_dim=8
    )
    batch = hierarchical_batch(data.splits["train"], range(16))
    logits = model(batch).logits.float()
    target = F.one_hot(batch.labels, 4).float() * 0.8 + 0.2 / 4
    smoothed = ClassifierModule(model, TrainConfig(label_smoothing=0.2)).training_step(batch, 0)
    assert torch.allclose(smoothed, -(target * logits.log_softmax(-1)).sum(-1).mean(), atol=1e-6)
    plain = ClassifierModule(model, TrainConfig()).training_step(batch, 0)
    assert torch.allclose(plain, F.cross_entropy(logits, batch.labels), atol=1e-6)
    for bad in (-0.1, 1.0):
        with pytest.raises(ConfigError, match="label_smoothing"):
            DocumentClassifier("han", label_smoothing=bad)


def test_warmup_rises_linearly_then_hands_over_to_the_schedule(data):
    """warmup_steps=4 with a cosine over 4 epochs of 3 steps: lr/4, 2lr/4, 3lr/4, lr, then the cosine, whose
    first epoch boundary may fall inside the warm-up (the two factors multiply); a real fit runs it."""
    import math

    from docattn.models import create_model
    from docattn.training.config import TrainConfig
    from docattn.training.engine import ClassifierModule

    model = create_model(
        "han", vocab_size=len(data.vocab), num_classes=4, embedding_dim=16, hidden_size=8, context_dim=8
    )
    cfg = TrainConfig(lr=0.1, embedding_lr=0.02, schedule="cosine", max_epochs=4, warmup_steps=4)
    (opt,), configs = ClassifierModule(model, cfg).configure_optimizers()
    (cosine, warm) = (c["scheduler"] for c in configs)
    assert [c["interval"] for c in configs] == ["epoch", "step"]
    seen = []
    for step in range(8):  # epochs of 3 steps: the cosine steps after steps 2 and 5
        seen.append([g["lr"] for g in opt.param_groups])
        opt.step()
        warm.step()
        if step % 3 == 2:
            cosine.step()
    factor = [min(k + 1, 4) / 4 * (1 + math.cos(math.pi * (k // 3) / 4)) / 2 for k in range(8)]
    for lrs, f in zip(seen, factor):
        assert lrs == pytest.approx([0.1 * f, 0.02 * f])
    plain = ClassifierModule(model, TrainConfig(lr=0.1, warmup_steps=3)).configure_optimizers()
    assert [c["interval"] for c in plain[1]] == ["step"]
    with pytest.raises(ConfigError, match="warmup_steps"):
        DocumentClassifier("han", warmup_steps=-1)
    clf = DocumentClassifier(
        "han",
        max_epochs=1,
        lr=0.004,
        schedule="none",
        warmup_steps=2,
        embeddings="random",
        progress=False,
        embedding_dim=16,
        hidden_size=8,
        context_dim=8,
    ).fit_prepared(data)
    assert clf.results["history"][-1]["lr"] == pytest.approx(0.004)  # warmed up by the end of the epoch


def test_bad_training_options():
    with pytest.raises(ConfigError):
        DocumentClassifier("han", schedule="exponential")
    with pytest.raises(ConfigError):
        DocumentClassifier("han", monitor="val_bleu")


def test_tune_reports_each_trial(tmp_path):
    from typer.testing import CliRunner

    from docattn.cli import app

    sp = synthetic.make_splits(n_train=200, n_test=10, seed=6)
    with open(tmp_path / "train.jsonl", "w") as f:
        for t, y in zip(sp["train"].texts, sp["train"].labels):
            f.write(json.dumps({"text": t, "label": y}) + "\n")
    res = CliRunner().invoke(
        app,
        [
            "tune",
            "--train",
            str(tmp_path / "train.jsonl"),
            "--out",
            str(tmp_path / "tune"),
            "--lr",
            "0.01,0.001",
            "--epochs",
            "1",
            "--set",
            "embedding_dim=16",
            "--set",
            "hidden_size=8",
            "--set",
            "context_dim=8",
            "--set",
            "progress=false",
            "--set",
            "embeddings=random",
            "--set",
            "min_count=2",
        ],
        env={"DOCATTN_CACHE": str(tmp_path / "cache")},
    )
    assert res.exit_code == 0, res.output
    tune = json.loads((tmp_path / "tune" / "tune.json").read_text())
    assert [t["lr"] for t in tune["trials"]] == [0.01, 0.001]
    assert tune["best"]["lr"] in (0.01, 0.001) and all("val_acc" in t for t in tune["trials"])
    # no --lr: HAN trains with Adam, so the grid surrounds its Adam rate, not the paper's SGD rates
    res = CliRunner().invoke(
        app,
        [
            "tune",
            "--train",
            str(tmp_path / "train.jsonl"),
            "--out",
            str(tmp_path / "tune2"),
            "--epochs",
            "1",
            "--set",
            "embedding_dim=16",
            "--set",
            "hidden_size=8",
            "--set",
            "context_dim=8",
            "--set",
            "progress=false",
            "--set",
            "embeddings=random",
            "--set",
            "min_count=2",
            "--set",
            "lr=0.004",
        ],
        env={"DOCATTN_CACHE": str(tmp_path / "cache")},
    )
    assert res.exit_code == 0, res.output
    tune = json.loads((tmp_path / "tune2" / "tune.json").read_text())
    assert [t["lr"] for t in tune["trials"]] == pytest.approx([0.001, 0.002, 0.004, 0.008])


def test_tune_grid_suits_the_optimizer_that_runs():
    """Adam at the SGD grid's 0.5 diverges: the default grid follows the resolved optimizer and rate."""
    assert DocumentClassifier("han").train_config.lr_grid() == pytest.approx([5e-4, 1e-3, 2e-3, 4e-3])
    assert DocumentClassifier("hcan", recipe="paper").train_config.lr_grid() == pytest.approx([5e-5, 1e-4, 2e-4, 4e-4])
    assert DocumentClassifier("han", optimizer="sgd").train_config.lr_grid() == [0.5, 0.1, 0.05, 0.01]
    assert DocumentClassifier("sanet", recipe="paper").train_config.lr_grid() == [
        0.5,
        0.1,
        0.05,
        0.01,
    ]  # SANet's paper: SGD
    # on a CPU the auto recipe trains both at the Adam rate they were measured at there (2e-3)
    for name in ("hcan", "sanet"):
        cpu = DocumentClassifier(name, accelerator="cpu").train_config
        assert cpu.optimizer == "adam" and cpu.lr_grid() == pytest.approx([5e-4, 1e-3, 2e-3, 4e-3])
    assert DocumentClassifier("han", lr=0.004).train_config.lr_grid() == pytest.approx([1e-3, 2e-3, 4e-3, 8e-3])


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
    lines = [
        line for line in capsys.readouterr().err.splitlines() if "val_acc" in line
    ]  # pytest's stderr is no terminal
    assert len(lines) == 2 and lines[0].strip().startswith("epoch 1 ") and "docs/s" in lines[0]
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
    opts = dict(max_epochs=2, embeddings="random", val_per_epoch=1, device="cpu", **TINY)
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
