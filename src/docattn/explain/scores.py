"""What a model says about an encoded corpus: its class probabilities and predictions, and a score for each
word (its attention, gradient x input or integrated gradients), aligned with ``enc.tokens``."""

from __future__ import annotations

import numpy as np

from docattn.data.encoding import EncodedCorpus
from docattn.explain.collect import attention_batches, document_word_mask, model_device
from docattn.explain.tokens import batch_positions
from docattn.models.contract import is_one_shot, word_embedding


def predicted(labels, probs: np.ndarray) -> list:
    """Each document's prediction: the most probable class, or for a multi-label model the list of classes at or
    over their thresholds (as ``predict`` gives them)."""
    if labels.multi_label:
        return labels.decode_sets(labels.decide(probs))
    return [labels.classes[int(i)] for i in probs.argmax(1)]


def probabilities(clf, enc: EncodedCorpus, batch_size: int = 64) -> np.ndarray:
    """(n_documents, n_classes) class probabilities of an encoded corpus."""
    from docattn.training.inference import predict_logits, sigmoid, softmax

    model = clf.model
    if is_one_shot(model):
        return np.asarray(model.predict_proba_encoded(enc))
    logits = predict_logits(model, enc, batch_size, clf.limits)
    return sigmoid(logits) if clf.labels.multi_label else softmax(logits)  # multi-label: one probability a class


def _ids_and_mask(batch):
    if batch.layout == "hierarchical":
        return batch.words, batch.word_mask  # (S, W): rows are the batch's sentences in document order
    return batch.tokens, batch.mask  # (B, T)


def attention_scores(clf, enc: EncodedCorpus, batch_size: int = 32) -> np.ndarray | None:
    """Per token of ``enc``: the model's attention (hierarchical: sqrt(p_sentence) * p_word); None without attention."""

    out = np.full(len(enc.tokens), np.nan)
    for batch, result in attention_batches(clf, enc, batch_size):
        att = result.attentions or {}
        if batch.layout == "hierarchical":
            if "word" not in att:
                return None
            w = att["word"]  # (B, L, W)
            if "sentence" in att:
                w = w * att["sentence"].clamp_min(0).sqrt().unsqueeze(-1)  # HAN: sqrt(p_sentence) * p_word
            values = w[document_word_mask(batch)]
        else:
            if "token" not in att:
                return None
            values = att["token"][batch.mask]  # (B, T) -> real tokens, row-major
        out[batch_positions(enc, batch.documents.cpu().numpy())] = values.float().cpu().numpy()
    return out


def embedding_attribution(model, batch, target, steps: int | None = None):
    """(S, W) or (B, T) attribution of each word to ``target``'s logit; None if the model has no usable embedding.

    ``steps`` None: gradient x input. Otherwise integrated gradients from the PAD embedding with
    ``steps`` midpoint steps. The gradient is taken w.r.t. the output of ``model.embedding``:
    directly when the model embeds the whole id tensor in one call, else (HAN embeds its
    sentences in length groups) by giving every word position its own row in a temporary
    embedding table, looked up through position ids; the latter is checked to reproduce the
    model's logits.
    """
    import dataclasses

    import torch
    import torch.nn.functional as F

    emb = word_embedding(model)
    if emb is None:
        return None
    ids, _ = _ids_and_mask(batch)
    field = "words" if batch.layout == "hierarchical" else "tokens"
    calls: list[tuple] = []
    probe = emb.register_forward_hook(lambda m, i, o: calls.append(tuple(o.shape)))
    try:
        with torch.no_grad():
            reference = model(batch).logits.float()  # (B, C)
            e = emb(ids).float()  # (..., E)
            base = emb.weight[0].float().expand_as(e)  # PAD's embedding: the all-padding baseline
    finally:
        probe.remove()
    direct = calls[:1] == [tuple(e.shape)] and len(calls) == 2  # one call in the forward, one here
    run_batch = (
        batch
        if direct
        else dataclasses.replace(batch, **{field: torch.arange(ids.numel(), device=ids.device).view_as(ids)})
    )
    stash: list = []

    def pre_hook(module, args):
        if direct:
            return None
        stash.append(args[0])
        return (torch.zeros_like(args[0]),)  # position ids are no vocabulary ids: look up PAD, replaced below

    def logits_at(x):
        def hook(module, args, output):
            if direct:
                return x.to(output.dtype)
            return F.embedding(stash.pop(), x.reshape(-1, x.shape[-1])).to(output.dtype)

        handles = [emb.register_forward_pre_hook(pre_hook), emb.register_forward_hook(hook)]
        try:
            return model(run_batch).logits
        finally:
            for h in handles:
                h.remove()

    with torch.enable_grad(), torch.backends.cudnn.flags(enabled=False):  # cuDNN RNNs: no backward in eval mode
        if not direct:
            with torch.no_grad():
                same = torch.allclose(logits_at(e).float(), reference, atol=1e-4, rtol=1e-4)
            if not same:
                return None  # the model reads its ids other than through the embedding: cannot attribute
        alphas = [1.0] if steps is None else ((np.arange(steps) + 0.5) / steps).tolist()
        total = torch.zeros_like(e)
        for alpha in alphas:
            x = (base + alpha * (e - base)).detach().requires_grad_(True)
            logits = logits_at(x)  # (B, C)
            (grad,) = torch.autograd.grad(logits.gather(1, target.view(-1, 1)).sum(), x)
            total += grad
    if steps is None:
        return (total * e).sum(-1)
    return (total / len(alphas) * (e - base)).sum(-1)


def gradient_scores(
    clf, enc: EncodedCorpus, target: np.ndarray, steps: int | None = None, batch_size: int = 32
) -> np.ndarray | None:
    """Per token of ``enc``: gradient x input (``steps`` None) or integrated gradients toward ``target`` classes."""
    import torch

    from docattn.errors import ConfigError
    from docattn.training.inference import iter_batches

    if steps is not None and steps < 1:
        raise ConfigError(f"integrated gradients need at least 1 step; got {steps}")

    model = clf.model
    was_training = model.training
    model.eval()
    device = model_device(model)
    target = torch.as_tensor(np.asarray(target), dtype=torch.long)
    out = np.full(len(enc.tokens), np.nan)
    try:
        for batch in iter_batches(enc, model.layout, batch_size, clf.limits):
            batch = batch.to(device)
            docs = batch.documents.cpu().numpy()
            a = embedding_attribution(model, batch, target[docs].to(device), steps)
            if a is None:
                return None
            _, mask = _ids_and_mask(batch)
            out[batch_positions(enc, docs)] = a[mask].detach().float().cpu().numpy()
    finally:
        model.train(was_training)
    return out


def captum_integrated_gradients(clf, enc: EncodedCorpus, target: np.ndarray, steps: int = 20):
    """Integrated gradients of a flat model by Captum's ``LayerIntegratedGradients`` (a cross-check), per token."""
    import torch
    from captum.attr import LayerIntegratedGradients

    from docattn.data.batching import FlatBatch
    from docattn.training.inference import make_batch

    model = clf.model
    model.eval()
    if model.layout == "hierarchical":
        raise NotImplementedError(
            "the Captum cross-check covers flat models (a hierarchical batch's rows are sentences)"
        )
    batch = make_batch(enc, np.arange(len(enc)), model.layout, clf.limits)

    def forward(tokens, mask):
        return model(
            FlatBatch(
                tokens=tokens,
                mask=mask,
                labels=torch.zeros(len(tokens), dtype=torch.long),
                documents=torch.arange(len(tokens)),
            )
        ).logits

    lig = LayerIntegratedGradients(forward, model.embedding)
    attr = lig.attribute(
        batch.tokens,
        baselines=torch.zeros_like(batch.tokens),
        target=torch.as_tensor(target),
        additional_forward_args=(batch.mask,),
        n_steps=steps,
        method="riemann_middle",
    )
    out = np.full(len(enc.tokens), np.nan)
    out[batch_positions(enc, batch.documents.numpy())] = attr.sum(-1)[batch.mask].detach().float().numpy()
    return out
