"""Attention statistics over a data set: Gini, diagonality, entropy and exact zeros.

Every metric works on masked weight arrays, vectorised over any leading axes: ``weights``
(..., T) with one attention distribution on its last axis (a row of a self-attention matrix,
a sentence's word weights, ...) and a boolean ``mask`` broadcastable to it, True on real
positions. NumPy arrays or torch tensors; results are float64 NumPy arrays, NaN where a
distribution has no real position (or no mass).

- ``gini``: inequality of one distribution, 0 for uniform weights, (n - 1) / n for one-hot.
- ``diagonality``: share of a self-attention matrix's mass with |i - j| <= b (Letarte et al.
  2018, Table 2), the diagonal itself included. It depends on length (uniform attention over n
  words gives about (2b + 1) / n), so the summaries also give it for uniform attention over the
  same words ("diagonality_uniform"); uniform attention's Gini is 0 and its H / log n is 1.
- ``entropy`` (nats) and its normalised form (divided by log n).
- ``zero_share``: share of real positions given exactly 0 (sparsemax, HPAN's pruning).

SANet's Table 2 does not say whether the Gini coefficient is taken per attention row or over a
whole matrix; ``attention_statistics`` reports the mean over rows ("gini") and, for matrices,
the mean over matrices of the Gini of all their real entries ("gini_matrix"). "gini_columns" is
the Gini of what each word receives from all the queries of its matrix: high when every word
attends to the same few words (the column pattern the paper shows for topic classification, its
Figure 4), near 0 for a diagonal band or uniform attention.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

BANDWIDTHS = (1, 2, 3, 4, 5)


def _array(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().float().cpu().numpy()
    return np.asarray(x)


def _broadcast(weights, mask) -> tuple[np.ndarray, np.ndarray]:
    w = _array(weights).astype(np.float64)
    m = np.ones(w.shape, dtype=bool) if mask is None else np.broadcast_to(_array(mask).astype(bool), w.shape)
    return np.where(m, w, 0.0), m


def gini(weights, mask=None) -> np.ndarray:
    """Gini coefficient of each distribution on the last axis: (...,).

    With the n real weights sorted ascending x_(1) <= ... <= x_(n):
    G = 2 sum_i i x_(i) / (n sum_i x_(i)) - (n + 1) / n.
    """
    w, m = _broadcast(weights, mask)
    T = w.shape[-1]
    n = m.sum(-1)  # (...,)
    # padding sorts first (-inf), so the real weights fill the last n slots in ascending order
    ordered = np.sort(np.where(m, w, -np.inf), axis=-1)
    rank = np.arange(1, T + 1) - (T - n)[..., None]  # (..., T): 1..n on real slots, <= 0 on padding
    ordered = np.where(rank > 0, ordered, 0.0)
    total = ordered.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        g = 2.0 * (rank * ordered).sum(-1) / (n * total) - (n + 1.0) / n
    return np.where((n > 0) & (total > 0), g, np.nan)


def entropy(weights, mask=None, normalized: bool = False) -> np.ndarray:
    """Shannon entropy (nats) of each distribution, (...,); ``normalized`` divides by log n (1 real position: 0)."""
    w, m = _broadcast(weights, mask)
    total = w.sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = w / total
        h = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(-1)
    n = m.sum(-1)
    h = np.where((n > 0) & (total[..., 0] > 0), h, np.nan)
    if normalized:
        with np.errstate(invalid="ignore", divide="ignore"):
            h = np.where(n > 1, h / np.log(np.maximum(n, 2)), np.where(n == 1, 0.0, np.nan))
    return h


def zero_share(weights, mask=None) -> np.ndarray:
    """Share of real positions whose weight is exactly 0, (...,)."""
    w, m = _broadcast(weights, mask)
    n = m.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, ((w == 0) & m).sum(-1) / n, np.nan)


def band_masks(T: int, bandwidths: Sequence[int] = BANDWIDTHS) -> np.ndarray:
    """(len(bandwidths), T, T) booleans, True where |i - j| <= b."""
    dist = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :])
    return dist[None] <= np.asarray(bandwidths)[:, None, None]


def diagonality(matrices, mask=None, bandwidths: Sequence[int] = BANDWIDTHS) -> np.ndarray:
    """Share of each matrix's attention mass inside the band |i - j| <= b: (..., len(bandwidths)).

    ``matrices`` (..., T, T), rows are queries; ``mask`` (..., T) marks real words (used for
    queries and keys alike). NaN for a matrix with no mass.
    """
    w = _array(matrices).astype(np.float64)
    T = w.shape[-1]
    if mask is not None:
        m = np.broadcast_to(_array(mask).astype(bool), w.shape[:-1])
        w = w * (m[..., :, None] & m[..., None, :])
    total = w.sum((-2, -1))  # (...,)
    inside = np.einsum("...ij,bij->...b", w, band_masks(T, bandwidths).astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total[..., None] > 0, inside / total[..., None], np.nan)


# ---------------------------------------------------------------- reading attentions from a model


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
        batches = (make_batch(enc, np.arange(s, min(s + batch_size, len(enc))), model.layout, clf.limits)
                   for s in range(0, len(enc), batch_size))
    for batch in batches:
        batch = batch.to(device)
        with torch.inference_mode():
            out = model(batch, return_attention=True)
        yield batch, out


def document_word_mask(batch):
    """(B, L, W) real words of each document's sentences (hierarchical batch), in document order."""
    return batch.word_mask[batch.sentence_index] & batch.sentence_mask.unsqueeze(-1)


def is_matrix(key: str) -> bool:
    """Self-attention matrices are the keys naming "self" ("self", "self_a", "word_self_b", "semantic_self", ...)."""
    return "self" in key


def key_mask(key: str, weights, batch):
    """Boolean mask of real positions for attention ``key``, broadcastable to its weights.

    Distributions (..., T) get a mask over their last axis; matrices (..., T, T) a mask (..., T)
    over words that serves for queries and keys alike. Keys are read by their documented names:
    hierarchical "word*" (document order (B, L, W), or one row per sentence (S, W) for
    "word_self_*"), "sentence*" (B, L); flat models' keys all index the document's tokens (B, T).
    """
    if getattr(batch, "layout", "flat") == "hierarchical":
        if key.startswith("word_self"):
            base = batch.word_mask  # (S, W)
        elif key.startswith("word"):
            base = document_word_mask(batch)  # (B, L, W)
        elif key.startswith("sentence"):
            base = batch.sentence_mask  # (B, L)
        else:
            return None
    else:
        base = batch.mask  # (B, T)
    want = weights.dim() - (1 if is_matrix(key) else 0)  # mask dimensions
    width = weights.shape[-1]
    if base.shape[-1] != width:  # defensive: an output narrower or wider than the batch
        import torch.nn.functional as F

        base = base[..., :width] if base.shape[-1] > width else F.pad(base, (0, width - base.shape[-1]))
    while base.dim() < want:  # per-head / per-query / per-block axes sit just before the words
        base = base.unsqueeze(-2)
    return base


class _Summary:
    """Running sums of one attention key's metrics over batches."""

    def __init__(self, matrix: bool, bandwidths):
        self.matrix = matrix
        self.bandwidths = list(bandwidths)
        self.sums = {"gini": 0.0, "entropy": 0.0, "normalized_entropy": 0.0}
        self.rows = 0
        self.zeros = 0
        self.real = 0
        self.matrices = 0
        self.gini_matrix = 0.0
        self.gini_columns = 0.0
        self.diag = np.zeros(len(self.bandwidths))
        self.diag_uniform = np.zeros(len(self.bandwidths))

    def add(self, weights, mask) -> None:
        w = _array(weights).astype(np.float64)
        m = np.broadcast_to(_array(mask).astype(bool), w.shape[:-1] if self.matrix else w.shape)
        if self.matrix:
            row_mask = m[..., None, :] & m[..., :, None]  # (..., T, T): real query and real key
            has_rows = m.any(-1)  # (...,) matrices with at least one real word
            d = diagonality(w, m, self.bandwidths)[has_rows]
            # the same share under uniform attention over the same real words: what chance gives these lengths
            u = diagonality(row_mask.astype(np.float64), None, self.bandwidths)[has_rows]
            keep = ~np.isnan(d).any(-1)
            self.diag += d[keep].sum(0)
            self.diag_uniform += u[keep].sum(0)
            self.matrices += int(keep.sum())
            flat_w = w.reshape(*w.shape[:-2], -1)[has_rows]
            flat_m = row_mask.reshape(*row_mask.shape[:-2], -1)[has_rows]
            self.gini_matrix += float(np.nansum(gini(flat_w, flat_m)[keep]))
            received = (w * row_mask).sum(-2)[has_rows]  # (n, T): what each real word receives from all queries
            self.gini_columns += float(np.nansum(gini(received, m[has_rows])[keep]))
            m = row_mask
        valid = m.any(-1) & ((w * m).sum(-1) > 0)  # distributions with real positions and mass
        wv, mv = w[valid], m[valid]
        self.rows += int(valid.sum())
        self.sums["gini"] += float(np.nansum(gini(wv, mv)))
        self.sums["entropy"] += float(np.nansum(entropy(wv, mv)))
        self.sums["normalized_entropy"] += float(np.nansum(entropy(wv, mv, normalized=True)))
        self.zeros += int(((wv == 0) & mv).sum())
        self.real += int(mv.sum())

    def result(self) -> dict:
        out = {"kind": "matrix" if self.matrix else "distribution", "distributions": self.rows}
        for k, v in self.sums.items():
            out[k] = v / self.rows if self.rows else float("nan")
        out["zero_share"] = self.zeros / self.real if self.real else float("nan")
        if self.matrix:
            out["matrices"] = self.matrices
            out["gini_matrix"] = self.gini_matrix / self.matrices if self.matrices else float("nan")
            out["gini_columns"] = self.gini_columns / self.matrices if self.matrices else float("nan")
            for name, sums in (("diagonality", self.diag), ("diagonality_uniform", self.diag_uniform)):
                out[name] = {str(b): (float(v) / self.matrices if self.matrices else float("nan"))
                             for b, v in zip(self.bandwidths, sums)}
        return out


def attention_summary(key: str, weights, batch, bandwidths: Sequence[int] = BANDWIDTHS) -> dict:
    """``attention_statistics``' metrics for one batch's weights under ``key`` (e.g. to follow one
    attention through training)."""
    summary = _Summary(is_matrix(key), bandwidths)
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
    summaries: dict[str, _Summary] = {}
    for batch, out in attention_batches(clf, enc, batch_size):
        for key, weights in (out.attentions or {}).items():
            if not torch.is_tensor(weights) or weights.dim() < 2:
                continue
            mask = key_mask(key, weights, batch)
            if mask is None:
                continue
            summaries.setdefault(key, _Summary(is_matrix(key), bandwidths)).add(weights, mask)
    result = {"model": clf.model_name, "documents": len(enc),
              "attentions": {k: s.result() for k, s in summaries.items()}}
    pruned = {}
    for key, name in (("word", "words"), ("sentence", "sentences")):
        if key in result["attentions"]:
            pruned[name] = result["attentions"][key]["zero_share"]
    result["pruned"] = pruned
    return result


# ---------------------------------------------------------------- what one word receives (HAN Figs. 3-4)

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def summarize(values: np.ndarray, edges: np.ndarray | None = None) -> dict:
    """count, mean, std, min, max, quantiles and (with ``edges``) histogram counts of ``values``."""
    values = np.asarray(values, dtype=np.float64)
    out: dict = {"count": int(values.size)}
    if values.size:
        q = np.quantile(values, QUANTILES)
        out.update(mean=float(values.mean()), std=float(values.std()), min=float(values.min()), max=float(values.max()),
                   quantiles={f"{p:g}": float(v) for p, v in zip(QUANTILES, q)})
    else:
        out.update(mean=None, std=None, min=None, max=None, quantiles={f"{p:g}": None for p in QUANTILES})
    if edges is not None:
        out["histogram"] = np.histogram(values, bins=edges)[0].tolist()
    return out


def word_attention_distribution(clf, corpus, word: str, level: str = "word", batch_size: int = 32, bins: int = 30) -> dict:
    """The attention every occurrence of ``word`` receives over ``corpus``, overall and per gold label.

    ``level``: "word" is the word-level weight p_word (HAN's Figs. 3-4; "token" weights for flat
    models); "combined" is HAN's visualisation score sqrt(p_sentence) * p_word.
    """
    import torch

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
    result = {"model": clf.model_name, "word": toks[0], "level": level, "documents": len(enc),
              "bin_edges": edges.tolist(), "overall": summarize(values, edges), "by_label": {}}
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
    from docattn.explain.attention import surface_sentences

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
    out: list[dict] = []
    if model.layout == "hierarchical":
        n_sent = int(batch.sentence_mask[0].sum())
        lengths = batch.word_mask.sum(1).tolist()
        if sentence is None:
            picks = [int(att["sentence"][0, :n_sent].argmax())] if "sentence" in att else [0]
        elif sentence == "all":
            picks = list(range(n_sent))
        else:
            if not 0 <= int(sentence) < n_sent:
                raise DocattnError(f"--sentence {sentence} is out of range: document {doc} has {n_sent} sentences")
            picks = [int(sentence)]
        sentence_labels = [f"s{i + 1}: " + " ".join(s[:3]) + ("..." if len(s) > 3 else "")
                           for i, s in enumerate(sentences[:n_sent])]
    else:
        n_tok = int(batch.mask[0].sum())
        tokens = [t for s in sentences for t in s][:n_tok]
    for key, w in att.items():
        if not is_matrix(key) or not torch.is_tensor(w):
            continue
        w = w.float().cpu().numpy()
        if model.layout == "hierarchical" and key.startswith("word"):
            rows = [int(batch.sentence_index[0, i]) for i in picks]  # sentence i's row of the (S, ...) tensor
            targets = [(f" sentence {i + 1}", w[r], sentences[i][: lengths[r]]) for i, r in zip(picks, rows)]
        elif model.layout == "hierarchical":
            targets = [("", w[0], sentence_labels)]
        else:
            targets = [("", w[0], tokens)]
        for where, m, toks in targets:
            n = len(toks)
            if m.ndim == 2:
                out.append({"key": key, "name": f"{key}{where}", "matrix": m[:n, :n], "tokens": toks})
                continue
            axis = "block" if key == "self" else "head"
            for h in range(m.shape[0]):
                out.append({"key": key, "name": f"{key}{where} {axis} {h + 1}", "matrix": m[h, :n, :n], "tokens": toks})
            if axis == "head" and m.shape[0] > 1:
                out.append({"key": key, "name": f"{key}{where} mean of heads", "matrix": m[:, :n, :n].mean(0), "tokens": toks})
    return out
