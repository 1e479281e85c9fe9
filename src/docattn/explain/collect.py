"""Running a fitted classifier to gather its attention: over a data set, for one word, for one document.

Each function drives the model (``attention_batches``) and reads ``ModelOutput.attentions`` by the
declared kinds of ``explain.attention_keys``; the numbers themselves come from ``explain.metrics``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from docattn.explain.attention_keys import SENTENCE, WORD, AttentionKind, attention_kind
from docattn.explain.metrics import BANDWIDTHS, AttentionSummary, summarize


def unlabelled(corpus):
    """The documents of ``corpus`` (or of a list of texts) without labels, so encoding never checks them
    against the model's classes."""
    from docattn.data.corpus import Corpus, to_corpus

    return corpus.without_labels() if isinstance(corpus, Corpus) else to_corpus(corpus)


def model_device(model):
    import torch

    try:
        return next(model.parameters()).device
    except StopIteration:  # non-neural baselines have no parameters
        return torch.device("cpu")


def attention_batches(clf, enc, batch_size: int = 32, bucketed: bool = True) -> Iterator[tuple]:
    """(batch, ModelOutput with attentions) over an encoded corpus, in inference mode.

    ``bucketed`` groups documents of similar length (less padding); otherwise documents come in
    corpus order. ``batch.documents`` says which documents a batch holds either way.
    """
    import torch

    from docattn.training.inference import iter_batches, make_batch

    model = clf.model
    model.eval()
    device = model_device(model)
    if bucketed:
        batches = iter_batches(enc, model.layout, batch_size, clf.limits)
    else:
        batches = (
            make_batch(enc, np.arange(s, min(s + batch_size, len(enc))), model.layout, clf.limits)
            for s in range(0, len(enc), batch_size)
        )
    for batch in batches:
        batch = batch.to(device)
        with torch.inference_mode():
            out = model(batch, return_attention=True)
        yield batch, out


def document_word_mask(batch):
    """(B, L, W) real words of each document's sentences (hierarchical batch), in document order."""
    return batch.word_mask[batch.sentence_index] & batch.sentence_mask.unsqueeze(-1)


def is_matrix(key: str) -> bool:
    """Whether attention ``key`` is declared a self-attention matrix."""
    kind = attention_kind(key)
    return kind is not None and kind.is_matrix


def _positions(kind: AttentionKind, batch):
    """The real positions of the sequence ``kind`` attends over, as the batch lays them out."""
    if batch.layout != "hierarchical":
        return batch.mask  # (B, T): every flat attention is over the document's tokens
    if kind.level == WORD:
        return batch.word_mask if kind.per_sentence_rows else document_word_mask(batch)  # (S, W) or (B, L, W)
    if kind.level == SENTENCE:
        return batch.sentence_mask  # (B, L)
    return None


def key_mask(key: str, weights, batch):
    """Boolean mask of real positions for attention ``key``, broadcastable to its weights; None for a key
    that is not declared in ``attention_keys``.

    Distributions (..., T) get a mask over their last axis; matrices (..., T, T) a mask (..., T)
    over words that serves for queries and keys alike.
    """
    kind = attention_kind(key)
    base = None if kind is None else _positions(kind, batch)
    if base is None:
        return None
    want = weights.dim() - (1 if kind.is_matrix else 0)  # mask dimensions
    width = weights.shape[-1]
    if base.shape[-1] != width:  # defensive: an output narrower or wider than the batch
        import torch.nn.functional as F

        base = base[..., :width] if base.shape[-1] > width else F.pad(base, (0, width - base.shape[-1]))
    while base.dim() < want:  # per-head / per-query / per-block axes sit just before the words
        base = base.unsqueeze(-2)
    return base


def attention_summary(key: str, weights, batch, bandwidths: Sequence[int] = BANDWIDTHS) -> dict:
    """``attention_statistics``' metrics for one batch's weights under ``key`` (e.g. to follow one
    attention through training)."""
    summary = AttentionSummary(is_matrix(key), bandwidths)
    summary.add(weights, key_mask(key, weights, batch))
    return summary.result()


def attention_statistics(clf, corpus, batch_size: int = 32, bandwidths: Sequence[int] = BANDWIDTHS) -> dict:
    """Gini, entropy, exact zeros and (self-attention matrices) diagonality of every attention a model returns.

    ``corpus`` is a ``Corpus`` or a list of texts. Returns ``{"model", "documents", "attentions":
    {key: metrics}, "pruned": {...}}``: for sparse models "pruned" holds the share of real words
    and sentences given exactly zero weight.
    """
    import torch

    enc = clf.encode(unlabelled(corpus))
    summaries: dict[str, AttentionSummary] = {}
    for batch, out in attention_batches(clf, enc, batch_size):
        for key, weights in (out.attentions or {}).items():
            if not torch.is_tensor(weights) or weights.dim() < 2:
                continue
            mask = key_mask(key, weights, batch)
            if mask is None:
                continue
            summaries.setdefault(key, AttentionSummary(is_matrix(key), bandwidths)).add(weights, mask)
    result = {
        "model": clf.model_name,
        "documents": len(enc),
        "attentions": {k: s.result() for k, s in summaries.items()},
    }
    pruned = {}
    for key, name in (("word", "words"), ("sentence", "sentences")):
        if key in result["attentions"]:
            pruned[name] = result["attentions"][key]["zero_share"]
    result["pruned"] = pruned
    return result


# ---------------------------------------------------------------- what one word receives (HAN Figs. 3-4)


def word_attention_distribution(
    clf, corpus, word: str, level: str = "word", batch_size: int = 32, bins: int = 30
) -> dict:
    """The attention every occurrence of ``word`` receives over ``corpus``, overall and per gold label.

    ``level``: "word" is the word-level weight p_word (HAN's Figs. 3-4; "token" weights for flat
    models); "combined" is HAN's visualisation score sqrt(p_sentence) * p_word.
    """
    from docattn.data.text import UNK
    from docattn.errors import ConfigError, DocattnError

    if level not in ("word", "combined"):
        raise ConfigError(f"level must be 'word' or 'combined', got {level!r}")
    toks = [t for t in clf.vocab.tokenize(word) if t.strip()]
    if len(toks) != 1:
        raise DocattnError(f"{word!r} is {len(toks)} tokens for this model's tokenizer; give a single word")
    wid = clf.vocab.index.get(toks[0], UNK)
    if wid == UNK:
        raise DocattnError(f"{word!r} is not in the model's vocabulary (it reads as <unk>)")
    corpus_labels = getattr(corpus, "labels", None)
    enc = clf.encode(corpus)  # labels encoded when the corpus has them
    values, labels = [], []
    for batch, out in attention_batches(clf, enc, batch_size):
        att = out.attentions or {}
        if batch.layout == "hierarchical":
            if "word" not in att:
                raise DocattnError(f"model {clf.model_name!r} returns no word attention")
            w = att["word"]  # (B, L, W)
            if level == "combined" and "sentence" in att:
                w = w * att["sentence"].clamp_min(0).sqrt().unsqueeze(-1)
            ids, mask = batch.words[batch.sentence_index], document_word_mask(batch)  # (B, L, W)
        else:
            if "token" not in att:
                raise DocattnError(f"model {clf.model_name!r} returns no token attention")
            w, ids, mask = att["token"], batch.tokens, batch.mask  # (B, T)
        hit = (ids == wid) & mask
        gold = batch.labels.view(-1, *([1] * (hit.dim() - 1))).expand_as(hit)
        values.append(w[hit].float().cpu().numpy())
        labels.append(gold[hit].cpu().numpy())
    values = np.concatenate(values) if values else np.zeros(0)
    labels = np.concatenate(labels) if labels else np.zeros(0, dtype=np.int64)
    top = float(values.max()) if values.size else 1.0
    edges = np.linspace(0.0, top if top > 0 else 1.0, bins + 1)
    result = {
        "model": clf.model_name,
        "word": toks[0],
        "level": level,
        "documents": len(enc),
        "bin_edges": edges.tolist(),
        "overall": summarize(values, edges),
        "by_label": {},
    }
    if corpus_labels is not None:
        for i, c in enumerate(clf.labels.classes):
            result["by_label"][str(c)] = summarize(values[labels == i], edges)
    result["values"] = values.tolist()
    result["labels"] = [str(clf.labels.classes[i]) if i >= 0 else None for i in labels.tolist()]
    return result


# ---------------------------------------------------------------- one document's self-attention matrices


def surface_token_lists(clf, corpus) -> list[list[list[str]]]:
    """Every document's tokens per sentence, aligned with the model's word positions (i, j)."""
    from docattn.data.text import documents_to_strings
    from docattn.explain.tokens import surface_sentences

    strings = documents_to_strings(corpus.texts, corpus.sentences, clf.vocab.text_config)
    return [surface_sentences(clf.vocab, s) for s in strings]


def surface_tokens(clf, corpus, doc: int) -> list[list[str]]:
    """The tokens of document ``doc`` per sentence, aligned with the model's word positions."""
    return surface_token_lists(clf, corpus.subset([doc]))[0]


def document_matrices(clf, corpus, doc: int = 0, sentence: int | str | None = None) -> list[dict]:
    """Every self-attention matrix the model computes for document ``doc``, one per block / head.

    Returns dicts ``{"key", "name", "matrix" (n, n) ndarray, "tokens" [n]}``, the heads' mean
    included for multi-head keys. Hierarchical word-level matrices exist per sentence: ``sentence``
    picks one (an index), "all", or None for the sentence with the highest sentence attention.
    An empty list means the model has no self-attention.
    """
    import torch

    from docattn.data.corpus import Corpus
    from docattn.errors import DocattnError
    from docattn.training.inference import make_batch

    if not isinstance(corpus, Corpus):
        from docattn.data.corpus import to_corpus

        corpus = to_corpus(corpus)
    if not 0 <= doc < len(corpus):
        raise DocattnError(f"--doc {doc} is out of range: the data has {len(corpus)} documents")
    sub = unlabelled(corpus.subset([doc]))
    enc = clf.encode(sub)
    model = clf.model
    model.eval()
    batch = make_batch(enc, np.array([0]), model.layout, clf.limits).to(model_device(model))
    with torch.inference_mode():
        att = model(batch, return_attention=True).attentions or {}
    sentences = surface_tokens(clf, sub, 0)
    if model.layout == "hierarchical":
        views = _HierarchicalViews(att, batch, sentences, doc, sentence)
    else:
        views = _FlatViews(batch, sentences)
    out: list[dict] = []
    for key, w in att.items():
        kind = attention_kind(key)
        if kind is None or not kind.is_matrix or not torch.is_tensor(w):
            continue
        for where, m, toks in views.targets(kind, w.float().cpu().numpy()):
            out.extend(_named_matrices(kind, where, m, toks))
    return out


class _FlatViews:
    """A flat document's matrices: one (..., T, T) per key, over its tokens."""

    def __init__(self, batch, sentences: list[list[str]]):
        self.tokens = [t for s in sentences for t in s][: int(batch.mask[0].sum())]

    def targets(self, kind: AttentionKind, w: np.ndarray) -> list[tuple]:
        return [("", w[0], self.tokens)]


class _HierarchicalViews:
    """A hierarchical document's matrices: its sentences' (per sentence) and its sentence-level one."""

    def __init__(self, att: dict, batch, sentences: list[list[str]], doc: int, sentence: int | str | None):
        from docattn.errors import DocattnError

        self.batch, self.sentences = batch, sentences
        n_sent = int(batch.sentence_mask[0].sum())
        self.lengths = batch.word_mask.sum(1).tolist()
        if sentence is None:
            self.picks = [int(att["sentence"][0, :n_sent].argmax())] if "sentence" in att else [0]
        elif sentence == "all":
            self.picks = list(range(n_sent))
        else:
            if not 0 <= int(sentence) < n_sent:
                raise DocattnError(f"--sentence {sentence} is out of range: document {doc} has {n_sent} sentences")
            self.picks = [int(sentence)]
        self.sentence_labels = [
            f"s{i + 1}: " + " ".join(s[:3]) + ("..." if len(s) > 3 else "") for i, s in enumerate(sentences[:n_sent])
        ]

    def targets(self, kind: AttentionKind, w: np.ndarray) -> list[tuple]:
        if kind.level != WORD:
            return [("", w[0], self.sentence_labels)]
        rows = [int(self.batch.sentence_index[0, i]) for i in self.picks]  # sentence i's row of the (S, ...) tensor
        return [(f" sentence {i + 1}", w[r], self.sentences[i][: self.lengths[r]]) for i, r in zip(self.picks, rows)]


def _named_matrices(kind: AttentionKind, where: str, m: np.ndarray, toks: list[str]) -> list[dict]:
    """One matrix ``m`` (n, n), or one per head / block of ``m`` (k, n, n) and the heads' mean."""
    n, key = len(toks), kind.key
    if m.ndim == 2:
        return [{"key": key, "name": f"{key}{where}", "matrix": m[:n, :n], "tokens": toks}]
    axis = kind.axis or "head"
    out = [
        {"key": key, "name": f"{key}{where} {axis} {h + 1}", "matrix": m[h, :n, :n], "tokens": toks}
        for h in range(m.shape[0])
    ]
    if axis == "head" and m.shape[0] > 1:
        out.append({"key": key, "name": f"{key}{where} mean of heads", "matrix": m[:, :n, :n].mean(0), "tokens": toks})
    return out
