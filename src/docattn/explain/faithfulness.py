"""Faithfulness of token rankings (ERASER, DeYoung et al. 2020): comprehensiveness, sufficiency, AOPC.

For each document and a ranking of its words, the top k% words (k in ``PERCENTS``, at least one
word) are

- removed: comprehensiveness = p(y | x) - p(y | x without them), high is faithful;
- kept alone: sufficiency = p(y | x) - p(y | only them), low is faithful;

where y is the class the model predicts on the whole document. AOPC is the mean over the k
values. Rankings compared on the same documents:

- "attention": the model's own weights; hierarchical models use HAN's word score
  sqrt(p_sentence) * p_word;
- "random": uniform random scores (seeded);
- "gradient_x_input": gradient of the predicted class's logit w.r.t. the word embeddings,
  times the embeddings, summed over the embedding axis;
- "integrated_gradients": the same along the straight path from the PAD embedding (the
  all-padding baseline) to the document's embeddings, midpoint Riemann sum (Captum's
  ``LayerIntegratedGradients(model, model.embedding)`` with ``method="riemann_middle"``
  computes the same numbers; here it is done by hand so hierarchical batches, whose rows are
  sentences, are attributed in one batched pass per step);
- "linear": each word's exact contribution to the predicted class's logit, for linear models
  (tf-idf baselines, fastText; ``explain.linear``), highest first.

By default every ranking the model has is compared, and random. Bag-of-words models are scored the
same way: their probabilities come from ``predict_proba_encoded`` on the shortened documents.

Removal works on the encoded corpus: a removed word is deleted and its sentence closes up (what
the model would read had the word never been there); a sentence left empty is dropped and a
document left empty becomes a single <unk> word. Documents are first cut to the run's limits
(max_sentences, max_words, max_tokens), so only words the model reads are ranked.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from docattn.data.batching import bucket_keys
from docattn.data.encoding import EncodedCorpus, ragged_ranges
from docattn.errors import DocattnError
from docattn.models.contract import is_one_shot

PERCENTS = (1, 5, 10, 20, 50)
METHODS = ("attention", "linear", "random", "gradient_x_input", "integrated_gradients")


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def token_documents(enc: EncodedCorpus) -> np.ndarray:
    """Document index of every token, (n_tokens,)."""
    return np.repeat(np.arange(len(enc)), enc.token_counts)


def document_starts(enc: EncodedCorpus) -> np.ndarray:
    """Where each document's tokens start in ``enc.tokens``, (n_documents,)."""
    return enc.sentence_offsets[enc.document_offsets[:-1]]


def compact(enc: EncodedCorpus, keep: np.ndarray) -> EncodedCorpus:
    """The corpus with only the tokens where ``keep`` is True; empty sentences dropped, empty documents -> <unk>."""
    from docattn.data.text import UNK

    keep = np.asarray(keep, dtype=bool)
    kept = np.concatenate([[0], np.cumsum(keep)])
    lengths = kept[enc.sentence_offsets[1:]] - kept[enc.sentence_offsets[:-1]]  # (n_sentences,)
    live = lengths > 0
    sent_doc = np.repeat(np.arange(len(enc)), enc.sentence_counts)
    counts = np.bincount(sent_doc[live], minlength=len(enc))  # sentences left per document
    tokens, lengths = np.asarray(enc.tokens)[keep], lengths[live]
    empty = np.flatnonzero(counts == 0)
    if len(empty):
        doc_tokens = np.bincount(token_documents(enc)[keep], minlength=len(enc))
        lengths = np.insert(lengths, _offsets(counts)[empty], 1)
        tokens = np.insert(tokens, _offsets(doc_tokens)[empty], UNK)
        counts[empty] = 1
    return EncodedCorpus(
        tokens=np.ascontiguousarray(tokens, dtype=np.int32),
        sentence_offsets=_offsets(lengths),
        document_offsets=_offsets(counts),
        labels=np.asarray(enc.labels, dtype=np.int64),
    )


def fit_to_limits(enc: EncodedCorpus, layout: str, limits: dict) -> EncodedCorpus:
    """Only the words a model reads: its first sentences and words (hierarchical) or tokens (flat) under the run's
    limits and batch budgets, as ``bucket_keys`` reads them."""
    keys = bucket_keys(enc, layout, limits)
    keep = np.ones(len(enc.tokens), dtype=bool)
    if layout == "hierarchical":
        n_sent, width = keys.T
        sent_of_tok = np.repeat(np.arange(len(enc.sentence_lengths)), enc.sentence_lengths)
        sent_doc = np.repeat(np.arange(len(enc)), enc.sentence_counts)
        rank = np.arange(len(sent_doc)) - enc.document_offsets[sent_doc]
        keep &= (rank < n_sent[sent_doc])[sent_of_tok]
        keep &= np.arange(len(enc.tokens)) - enc.sentence_offsets[sent_of_tok] < width[sent_doc][sent_of_tok]
    elif layout == "flat":
        keep &= (
            np.arange(len(enc.tokens)) - document_starts(enc)[token_documents(enc)] < keys[:, 0][token_documents(enc)]
        )
    return enc if keep.all() else compact(enc, keep)


def top_fraction(enc: EncodedCorpus, scores: np.ndarray, percent: float) -> np.ndarray:
    """Per token: is it among the ceil(percent% of n) highest-scored words of its document (at least one)?"""
    doc = token_documents(enc)
    n = enc.token_counts
    k = np.maximum(np.ceil(n * percent / 100.0 - 1e-9), 1).astype(np.int64)  # (n_documents,)
    s = np.where(np.isnan(scores), -np.inf, scores)
    order = np.lexsort((-s, doc))  # by document, then best score first (ties: earlier word first)
    rank = np.empty(len(doc), dtype=np.int64)
    rank[order] = np.arange(len(doc)) - document_starts(enc)[doc[order]]
    return rank < k[doc]


def probabilities(clf, enc: EncodedCorpus, batch_size: int = 64) -> np.ndarray:
    """(n_documents, n_classes) class probabilities of an encoded corpus."""
    from docattn.training.inference import predict_logits, sigmoid, softmax

    model = clf.model
    if is_one_shot(model):
        return np.asarray(model.predict_proba_encoded(enc))
    logits = predict_logits(model, enc, batch_size, clf.limits)
    return sigmoid(logits) if clf.labels.multi_label else softmax(logits)  # multi-label: one probability a class


def batch_positions(enc: EncodedCorpus, docs: np.ndarray) -> np.ndarray:
    """Token indices of ``docs`` in ``enc.tokens``, documents in the given order."""
    return ragged_ranges(document_starts(enc)[docs], enc.token_counts[docs])


def _ids_and_mask(batch):
    if batch.layout == "hierarchical":
        return batch.words, batch.word_mask  # (S, W): rows are the batch's sentences in document order
    return batch.tokens, batch.mask  # (B, T)


def attention_scores(clf, enc: EncodedCorpus, batch_size: int = 32) -> np.ndarray | None:
    """Per token of ``enc``: the model's attention (hierarchical: sqrt(p_sentence) * p_word); None without attention."""
    from docattn.explain.collect import attention_batches, document_word_mask

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

    emb = getattr(model, "embedding", None)
    if not isinstance(emb, torch.nn.Embedding):
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
    from docattn.explain.collect import model_device
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


def _check_options(methods: Sequence[str], percents: Sequence[float], ig_steps: int) -> None:
    from docattn.errors import ConfigError

    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ConfigError(f"unknown ranking methods {sorted(unknown)}; choose from {', '.join(METHODS)}")
    if ig_steps < 1:
        raise ConfigError(f"ig_steps must be at least 1; got {ig_steps}")
    bad = [k for k in percents if not 0 < k <= 100]
    if bad or not percents:
        raise ConfigError(f"percents must be shares of a document's words in (0, 100]; got {list(percents)}")


def model_rankings(model) -> list[str]:
    """The rankings ``faithfulness`` compares by default: every method the model has, and random."""
    from docattn.explain.methods import model_methods

    have = set(model_methods(model)) | {"random"}
    return [m for m in METHODS if m in have]


def _ranking(clf, enc: EncodedCorpus, method: str, pred: np.ndarray, batch_size: int, ig_steps: int, seed: int):
    """(scores per token, None) for ``method``, or (None, why) where the model has no such ranking."""
    from docattn.explain.methods import model_methods

    if method == "random":
        return np.random.default_rng(seed).random(len(enc.tokens)), None
    if method not in model_methods(clf.model):
        return None, f"model {clf.model_name!r} has no {method} explanation"
    if method == "attention":
        scores = attention_scores(clf, enc, batch_size)
        return scores, None if scores is not None else f"model {clf.model_name!r} returns no word/token attention"
    if method == "linear":
        from docattn.explain.linear import linear_contributions

        try:
            return linear_contributions(clf, enc, pred, batch_size)[0], None
        except DocattnError as err:  # fasttext-lib trained with a loss whose logits are not linear
            return None, str(err)
    steps = ig_steps if method == "integrated_gradients" else None
    scores = gradient_scores(clf, enc, pred, steps, batch_size)
    return scores, None if scores is not None else f"model {clf.model_name!r} has no differentiable word embedding"


def faithfulness(
    clf,
    corpus,
    n: int | None = None,
    methods: Sequence[str] | None = None,
    percents: Sequence[float] = PERCENTS,
    batch_size: int = 32,
    ig_steps: int = 20,
    seed: int = 0,
) -> dict:
    """ERASER comprehensiveness and sufficiency at each k% and their AOPC, per ranking method.

    ``corpus``: a ``Corpus`` or a list of texts; ``n`` keeps its first n documents. ``methods`` None
    compares every ranking the model has, and random (``model_rankings``); methods a model cannot
    support are listed with ``"available": False`` and the reason.
    """
    from docattn.data.corpus import Corpus, to_corpus
    from docattn.errors import DataError
    from docattn.explain.collect import unlabelled

    methods = model_rankings(clf.model) if methods is None else list(methods)
    _check_options(methods, percents, ig_steps)
    corpus = corpus if isinstance(corpus, Corpus) else to_corpus(corpus)
    if n:
        corpus = corpus.subset(range(min(n, len(corpus))))
    layout = clf.model.layout
    enc = fit_to_limits(clf.encode(unlabelled(corpus)), layout, clf.limits)  # y is the prediction: no labels needed
    rows = np.arange(len(enc))
    full = probabilities(clf, enc, batch_size)
    pred = full.argmax(1)
    p_full = full[rows, pred]
    result = {
        "model": clf.model_name,
        "documents": len(enc),
        "percents": list(percents),
        "mean_words": float(enc.token_counts.mean()) if len(enc) else 0.0,
        "methods": {},
    }
    if corpus.labels is not None:
        try:
            gold = np.asarray(clf.labels.encode(corpus.labels, "faithfulness data"))
            result["accuracy"] = float((pred == gold).mean())
        except DataError:
            pass  # labels the model was not trained on: no accuracy, the rest stands
    for method in methods:
        t0 = time.perf_counter()
        scores, why = _ranking(clf, enc, method, pred, batch_size, ig_steps, seed)
        if scores is None:
            result["methods"][method] = {"available": False, "reason": why}
            continue
        ranking_s = time.perf_counter() - t0
        comp, suff = {}, {}
        for p in percents:
            top = top_fraction(enc, scores, p)
            comp[str(p)] = float(np.mean(p_full - probabilities(clf, compact(enc, ~top), batch_size)[rows, pred]))
            suff[str(p)] = float(np.mean(p_full - probabilities(clf, compact(enc, top), batch_size)[rows, pred]))
        result["methods"][method] = {
            "available": True,
            "comprehensiveness": comp,
            "sufficiency": suff,
            "aopc_comprehensiveness": float(np.mean(list(comp.values()))),
            "aopc_sufficiency": float(np.mean(list(suff.values()))),
            "ranking_seconds": ranking_s,
            "seconds": time.perf_counter() - t0,
        }
    return result


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
