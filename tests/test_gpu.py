"""The CUDA paths: every model computes on the GPU what it computes on the CPU, trains in bf16,
and a run trained on the GPU loads and predicts on the CPU. Skipped without CUDA (CI has none)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_models import NEURAL, build, tiny_corpus

from docattn.training.inference import make_batch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (no GPU on this machine)"),
]


@pytest.fixture(scope="module")
def corpus():
    return tiny_corpus(n_docs=9)


@pytest.mark.parametrize("name", NEURAL)
def test_cuda_matches_cpu_with_and_without_attention(name, corpus):
    """float32 on both devices (tf32 off): logits and attention agree to rounding."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = build(name)
    batch = make_batch(corpus, np.arange(len(corpus)), model.layout, {})
    with torch.no_grad():
        cpu = model(batch, return_attention=True)
        gpu_model = model.to("cuda")
        fast = gpu_model(batch.to("cuda"))
        full = gpu_model(batch.to("cuda"), return_attention=True)
    torch.testing.assert_close(fast.logits.cpu(), cpu.logits, atol=2e-4, rtol=2e-4)
    torch.testing.assert_close(full.logits.cpu(), cpu.logits, atol=2e-4, rtol=2e-4)
    for key, weights in cpu.attentions.items():
        torch.testing.assert_close(full.attentions[key].cpu(), weights, atol=2e-4, rtol=2e-4)


@pytest.mark.parametrize("name", NEURAL)
def test_bf16_training_step_is_finite_and_masks_padding(name, corpus):
    """One bf16-autocast step: finite loss and gradients; a document's logits ignore its batch mates."""
    model = build(name).to("cuda").train()
    batch = make_batch(corpus, np.arange(len(corpus)), model.layout, {}).to("cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(batch).logits.float(), batch.labels)
    loss.backward()
    assert torch.isfinite(loss)
    for p in model.parameters():
        if p.grad is not None:
            assert torch.isfinite(p.grad).all()
    model.eval()
    with torch.no_grad():
        alone = model(make_batch(corpus, np.array([0]), model.layout, {}).to("cuda")).logits
        together = model(batch).logits[:1]
    torch.testing.assert_close(together, alone, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["hpan", "hsan"])
def test_sparse_attention_stays_finite_on_extreme_inputs(name, corpus):
    model = build(name).to("cuda").train()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(50.0)
    batch = make_batch(corpus, np.arange(len(corpus)), model.layout, {}).to("cuda")
    out = model(batch, return_attention=True)
    out.logits.sum().backward()
    assert torch.isfinite(out.logits).all()
    assert all(torch.isfinite(w).all() for w in out.attentions.values())
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_fit_on_gpu_then_load_and_predict_on_cpu(tmp_path):
    """bf16-mixed training on the GPU; the saved run predicts the same on the CPU."""
    from docattn import DocumentClassifier
    from docattn.data import synthetic

    sp = synthetic.make_splits(n_train=2000, n_test=400, seed=3)
    tr, te = sp["train"], sp["test"]
    clf = DocumentClassifier(
        "han", max_epochs=6, device="gpu", embeddings="random", progress=False, seed=0, min_count=2
    )
    clf.fit(tr.sentences, tr.labels)
    assert clf.results["device"].startswith("cuda")  # trained there; the fitted model then predicts on the CPU
    assert clf.score(te.texts, te.labels) >= 0.8  # 0.91 in fp32 on the CPU; chance is 0.25
    clf.save(tmp_path / "run")
    on_cpu = DocumentClassifier.load(tmp_path / "run", device="cpu")
    np.testing.assert_allclose(on_cpu.predict_proba(te.texts), clf.predict_proba(te.texts), atol=1e-3)


def test_attend_on_cuda_matches_the_explicit_softmax_for_shapes_it_never_saw():
    """The SDPA wrapper (cuDNN's kernel excluded) on ever-changing shapes, with masks and bf16."""
    from docattn.models.layers import attend

    g = torch.Generator().manual_seed(0)
    for n, t in ((3, 7), (5, 13), (2, 29), (7, 4)):
        q, k, v = (torch.randn(n, 4, t, 16, generator=g) for _ in range(3))
        mask = torch.rand(n, 1, 1, t, generator=g) > 0.3
        mask[..., 0] = True  # every row has a key
        ref = torch.softmax((q @ k.transpose(-2, -1) / 4).masked_fill(~mask, float("-inf")), -1) @ v
        out = attend(*(x.cuda().bfloat16() for x in (q, k, v)), attn_mask=mask.cuda())
        torch.testing.assert_close(out.float().cpu(), ref, atol=3e-2, rtol=3e-2)


def test_test_split_is_scored_on_the_gpu_then_the_model_returns_to_the_cpu(monkeypatch):
    """Lightning hands the model back on the CPU; the test split is still scored where it trained."""
    from docattn import DocumentClassifier
    from docattn.data import synthetic
    from docattn.data.prepare import DataSettings, prepare
    from docattn.training import trainer

    sp = synthetic.make_splits(n_train=200, n_test=50, seed=4)
    data = prepare(sp["train"], None, sp["test"], DataSettings(min_count=2))
    seen = []
    real = trainer.evaluate_encoded
    monkeypatch.setattr(
        trainer,
        "evaluate_encoded",
        lambda clf, enc: seen.append(next(clf.model.parameters()).device.type) or real(clf, enc),
    )
    clf = DocumentClassifier(
        "han",
        max_epochs=1,
        device="gpu",
        embeddings="random",
        progress=False,
        embedding_dim=16,
        hidden_size=8,
        context_dim=8,
    ).fit_prepared(data)
    assert seen[-1] == "cuda" and clf.results["test"]["documents"] == 50
    assert next(clf.model.parameters()).device.type == "cpu"


def test_ema_average_lives_on_the_gpu_beside_the_model(monkeypatch):
    """Lightning builds the average before it moves the model: EMAWeights moves it after."""
    from docattn import DocumentClassifier
    from docattn.data import synthetic
    from docattn.data.prepare import DataSettings, prepare
    from docattn.training import engine

    sp = synthetic.make_splits(n_train=200, n_test=50, seed=4)
    data = prepare(sp["train"], None, sp["test"], DataSettings(min_count=2))
    seen = []
    real = engine.EMAWeights.on_train_batch_end

    def spy(self, trainer, pl_module, *args):
        seen.append(next(self._average_model.module.parameters()).device.type)
        return real(self, trainer, pl_module, *args)

    monkeypatch.setattr(engine.EMAWeights, "on_train_batch_end", spy)
    clf = DocumentClassifier(
        "han",
        max_epochs=1,
        device="gpu",
        embeddings="random",
        progress=False,
        ema_decay=0.9,
        embedding_dim=16,
        hidden_size=8,
        context_dim=8,
    ).fit_prepared(data)
    assert seen and set(seen) == {"cuda"} and clf.results["test"]["documents"] == 50


def test_han_packed_rnn_on_cuda_matches_the_cpu_and_trains_in_bf16(corpus):
    """``packed_rnn``: cuDNN's packed bidirectional GRU gives the CPU's logits; a bf16 step is finite."""
    torch.backends.cudnn.allow_tf32 = False
    cpu_model = build("han")
    model = build("han", packed_rnn=True)
    model.load_state_dict(cpu_model.state_dict())
    batch = make_batch(corpus, np.arange(len(corpus)), "hierarchical", {})
    model = model.to("cuda")
    with torch.no_grad():
        torch.testing.assert_close(model(batch.to("cuda")).logits.cpu(), cpu_model(batch).logits, atol=2e-4, rtol=2e-4)
    model.train()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(batch.to("cuda")).logits.float(), batch.labels.cuda())
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("how", ["one group", "length groups", "groups where memory is short"])
def test_han_word_groups_on_cuda_match_the_cpu(how, corpus, monkeypatch):
    """HAN's word encoder on a GPU: one group (the default), equal groups, and the fallback to length
    groups when one group would not fit give the CPU's logits."""
    from docattn.models import han as han_module

    torch.backends.cudnn.allow_tf32 = False
    cpu_model = build("han")
    model = build("han", length_groups=3 if how == "length groups" else 0)
    model.load_state_dict(cpu_model.state_dict())
    if how == "groups where memory is short":
        monkeypatch.setattr(han_module, "_one_group_fits", lambda positions, device: False)
    batch = make_batch(corpus, np.arange(len(corpus)), "hierarchical", {})
    with torch.no_grad():
        expected = cpu_model(batch).logits
        got = model.to("cuda")(batch.to("cuda")).logits.cpu()
    torch.testing.assert_close(got, expected, atol=2e-4, rtol=2e-4)


def test_loader_workers_pin_batches_for_the_gpu():
    """With loader_workers on a GPU, batches arrive in page-locked memory and training completes."""
    from docattn import DocumentClassifier
    from docattn.data import synthetic

    sp = synthetic.make_splits(n_train=200, n_test=20, seed=4)
    clf = DocumentClassifier(
        "han",
        max_epochs=1,
        device="gpu",
        embeddings="random",
        progress=False,
        loader_workers=2,
        embedding_dim=16,
        hidden_size=8,
        context_dim=8,
    ).fit(sp["train"].texts, sp["train"].labels)
    assert clf.results["device"].startswith("cuda") and np.isfinite(clf.predict_proba(sp["test"].texts)).all()
    from docattn.data.batching import hierarchical_batch

    enc = clf.encode(sp["test"].texts)
    assert hierarchical_batch(enc, [0, 1]).pin_memory().words.is_pinned()
