"""Where an explanation's words sit: token positions of an encoded corpus, the words a model reads under its
limits, a corpus with words removed, and each document's tokens as a person reads them.

Every explanation method and the faithfulness measure address words by their index in ``enc.tokens``;
these functions convert between that index, documents, batches and the surface tokens.
"""

from __future__ import annotations

import numpy as np

from docattn.data.batching import bucket_keys
from docattn.data.encoding import EncodedCorpus, ragged_ranges
from docattn.data.text import SEP_TOKEN


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


def batch_positions(enc: EncodedCorpus, docs: np.ndarray) -> np.ndarray:
    """Token indices of ``docs`` in ``enc.tokens``, documents in the given order."""
    return ragged_ranges(document_starts(enc)[docs], enc.token_counts[docs])


def surface_sentences(vocab, string: str) -> list[list[str]]:
    """The tokens of one tokenizer-ready document, split into its non-empty sentences.

    Mirrors ``encode_ids``: the same pre-tokenizer, SEP splits, empty sentences dropped, so
    token j of sentence i lines up with the model's word position (i, j).
    """
    sentences, current = [], []
    for tok in vocab.tokenize(string):
        if tok == SEP_TOKEN:
            if current:
                sentences.append(current)
            current = []
        else:
            current.append(tok)
    if current:
        sentences.append(current)
    return sentences or [["<unk>"]]


def fit_length(values: np.ndarray, n: int) -> list[float]:
    """First ``n`` values, zero-filled where truncation cut words the model never read."""
    out = np.zeros(n, dtype=np.float64)
    k = min(n, len(values))
    out[:k] = values[:k]
    return out.tolist()
