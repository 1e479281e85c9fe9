"""Batched inference over an encoded corpus, in bucketed order, results back in input order."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from docattn.data.batching import batch_sampler, flat_batch, hierarchical_batch
from docattn.data.encoding import EncodedCorpus


def make_batch(corpus: EncodedCorpus, documents, layout: str, limits: dict):
    """The batch layout a model asks for, truncated by the run's data settings."""
    if layout == "hierarchical":
        return hierarchical_batch(
            corpus,
            documents,
            limits.get("max_sentences"),
            limits.get("max_words"),
            limits.get("max_batch_words"),
            limits.get("max_batch_pairs"),
        )
    return flat_batch(
        corpus, documents, limits.get("max_tokens"), limits.get("max_batch_words"), limits.get("max_batch_pairs")
    )


def iter_batches(corpus: EncodedCorpus, layout: str, batch_size: int, limits: dict) -> Iterator:
    """Length-bucketed batches of every document once, unshuffled."""
    for docs in batch_sampler(corpus, layout, limits, batch_size, shuffle=False):
        yield make_batch(corpus, docs, layout, limits)


def _evaluated(model, corpus: EncodedCorpus, batch_size: int, limits: dict | None, device) -> Iterator:
    """(documents, batch on the model's device) over the corpus, the model in eval mode meanwhile."""
    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        for batch in iter_batches(corpus, model.layout, batch_size, limits or {}):
            yield batch.documents.numpy(), batch.to(device)
    finally:
        model.train(was_training)


@torch.inference_mode()
def predict_logits(
    model, corpus: EncodedCorpus, batch_size: int = 256, limits: dict | None = None, device=None
) -> np.ndarray:
    """(n_documents, n_classes) logits in corpus order."""
    out = np.zeros((len(corpus), model.num_classes), dtype=np.float32)
    for docs, batch in _evaluated(model, corpus, batch_size, limits, device):
        out[docs] = model(batch).logits.float().cpu().numpy()
    return out


@torch.inference_mode()
def document_vectors(
    model, corpus: EncodedCorpus, batch_size: int = 256, limits: dict | None = None, device=None
) -> np.ndarray:
    """(n_documents, features) what the model's output layer (``model.classifier``) reads, in corpus order."""
    head = model.classifier
    out = np.zeros((len(corpus), head.in_features), dtype=np.float32)
    seen: list[torch.Tensor] = []
    handle = head.register_forward_pre_hook(lambda _layer, args: seen.append(args[0]))
    try:
        for docs, batch in _evaluated(model, corpus, batch_size, limits, device):
            seen.clear()
            model(batch)
            out[docs] = seen[-1].float().cpu().numpy()
    finally:
        handle.remove()
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def sigmoid(logits: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return expit(logits)


def probabilities(model, corpus: EncodedCorpus, batch_size: int, limits: dict, multi_label: bool) -> np.ndarray:
    """(n_documents, n_classes) class probabilities: a softmax over classes, or for a multi-label model one
    independent probability per class."""
    from docattn.models.contract import is_one_shot

    if is_one_shot(model):
        return np.asarray(model.predict_proba_encoded(corpus))
    logits = predict_logits(model, corpus, batch_size, limits)
    return sigmoid(logits) if multi_label else softmax(logits)
