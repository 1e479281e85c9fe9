"""Training's optimiser: weight averaging, parameter groups, label smoothing, warmup, the learning-rate search."""

from __future__ import annotations

import json

import numpy as np
import pytest

from docattn.classifier import DocumentClassifier
from docattn.data import synthetic
from docattn.errors import ConfigError

TINY = dict(embedding_dim=16, hidden_size=8, context_dim=8, progress=False, min_count=2)


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


def test_vector_weight_decay_spares_biases_gains_and_attention_queries(data):
    """Decay toward 0 flattens an attention query and silences a norm gain: the 1-d weights can opt out."""
    import torch

    from docattn.models import create_model
    from docattn.training.config import TrainConfig
    from docattn.training.engine import ClassifierModule

    model = create_model("hpan", vocab_size=len(data.vocab), num_classes=4, embedding_dim=16, hidden_size=8)
    cfg = TrainConfig(optimizer="adamw", lr=0.1, weight_decay=0.5, vector_weight_decay=0.0)
    opt = ClassifierModule(model, cfg).configure_optimizers()
    decay = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    named = dict(model.named_parameters())
    assert decay[id(named["word_pool.attention.context"])] == 0.0
    assert decay[id(named["classifier.bias"])] == 0.0
    assert decay[id(named["classifier.weight"])] == 0.5 and decay[id(model.embedding.weight)] == 0.5
    assert len(decay) == len(named)  # every weight in exactly one group
    # with no gradient, AdamW moves only the decayed weights: the query stays, the matrix shrinks
    query, matrix = named["word_pool.attention.context"], named["classifier.weight"]
    before_query, before_matrix = query.detach().clone(), matrix.detach().clone()
    for p in named.values():
        p.grad = torch.zeros_like(p)
    opt.step()
    assert torch.equal(query, before_query)
    assert torch.allclose(matrix, before_matrix * (1 - 0.1 * 0.5))
    default = ClassifierModule(model, TrainConfig(optimizer="adamw", weight_decay=0.5)).configure_optimizers()
    assert all(g["weight_decay"] == 0.5 for g in default.param_groups)


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
