"""Linear explanations: each word's exact share of a linear model's logit for one class.

tf-idf baselines (nb, logreg, logreg-l1; ``models/baselines.py``), for class c of document d:

    logit_c(d) = sum_f x_df W_cf + b_c        x_df: tf-idf of n-gram f in d, W_cf: its coefficient

An n-gram's term x_df W_cf is split equally among its occurrences in d, and each occurrence's share
equally among its n words (a bigram gives half to each of its two words); n-grams the model never kept
give nothing. The words' contributions plus ``bias`` (b_c) are logit_c exactly. For naive Bayes W is
log P(f | c) and b the log prior; for a binary logistic regression (one weight row, p = sigmoid(z))
the logit of the second class is z and of the first -z, so sigmoid(logit) is the class's probability.

fastText (docattn's ``fasttext``): the document vector is the mean of its n rows, word embeddings and
hashed n-gram embeddings, so logit_c = (1/n) sum_k W_c . e_k + b_c; each word gets (1/n) W_c . e_word
plus 1/m of every m-gram it belongs to. fasttext-lib: the same through the library's input and output
matrices (no bias; the library's end-of-line token </s> is a row of every line, and it and its share
of the last bigram go to ``bias``, which then differs per document).

Each function returns ``(contributions, bias)``: (n_tokens,) aligned with ``enc.tokens`` and (n_documents,).
"""

from __future__ import annotations

import numpy as np

from docattn.data.encoding import EncodedCorpus
from docattn.errors import DocattnError
from docattn.explain.collect import model_device
from docattn.explain.tokens import batch_positions


def linear_contributions(clf, enc: EncodedCorpus, target: np.ndarray, batch_size: int = 64):
    """Each token's contribution to its document's ``target`` logit, and the bias: ``(contributions, bias)``."""
    from docattn.explain.methods import linear_family

    family = linear_family(clf.model)
    if family == "tfidf":
        return tfidf_contributions(clf.model, enc, target)
    if family == "fasttext":
        return fasttext_contributions(clf, enc, target, batch_size)
    if family == "fasttext-lib":
        return fasttext_lib_contributions(clf.model, enc, target)
    raise DocattnError(f"model {clf.model_name!r} is not linear in its words: it has no linear explanation")


# ---------------------------------------------------------------- tf-idf baselines


def ngram_starts(enc: EncodedCorpus, ngram_max: int) -> tuple[np.ndarray, np.ndarray]:
    """(first token, order) of every n-gram occurrence, in ``baselines.ngram_keys``' order (unigrams first)."""
    counts = np.asarray(enc.token_counts, dtype=np.int64)
    total = int(counts.sum())
    doc_of = np.repeat(np.arange(len(counts)), counts)
    starts, orders = [np.arange(total)], [np.ones(total, dtype=np.int64)]
    for n in range(2, ngram_max + 1):  # orders, not tokens
        m = total - n + 1
        if m <= 0:
            break
        inside = np.flatnonzero(doc_of[:m] == doc_of[n - 1 :])  # the rule ngram_keys keeps n-grams by
        starts.append(inside)
        orders.append(np.full(len(inside), n, dtype=np.int64))
    return np.concatenate(starts), np.concatenate(orders)


def _class_rows(model, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weight row and sign (+1 / -1) of each document's target class."""
    classes = model.arrays["classes"]
    if model.link == "binary":  # one row, for classes[1]; classes[0]'s logit is its negative
        sign = np.where(target == classes[1], 1.0, -1.0)
        known = np.isin(target, classes)
        rows = np.zeros(len(target), dtype=np.int64)
    else:
        row_of = np.full(model.num_classes, -1, dtype=np.int64)
        row_of[classes] = np.arange(len(classes))
        rows, sign = row_of[target], np.ones(len(target))
        known = rows >= 0
    if not known.all():
        missing = int(target[~known][0])
        raise DocattnError(f"class {missing} was absent from the training data: the model has no weights for it")
    return rows, sign


def tfidf_contributions(model, enc: EncodedCorpus, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per token: its share of ``sum_f x_df W_cf`` (see the module's docstring); bias b_c per document."""
    from docattn.models.baselines import count_matrix, ngram_keys, tfidf

    if not model.fitted:
        raise DocattnError(f"this {model.config.classifier} baseline is not fitted: nothing to explain")
    a = model.arrays
    keys_fitted, weight = a["feature_keys"], a["weight"]
    n_features, n_tokens = len(keys_fitted), len(enc.tokens)
    docs, keys = ngram_keys(enc, model.vocab_size, model.config.ngram_max)
    starts, orders = ngram_starts(enc, model.config.ngram_max)
    starts = starts + int(enc.sentence_offsets[enc.document_offsets[0]])  # ngram_keys reads from the first document
    pos = np.minimum(np.searchsorted(keys_fitted, keys), max(n_features - 1, 0))
    hit = keys_fitted[pos] == keys if n_features else np.zeros(len(keys), dtype=bool)
    docs, pos, starts, orders = docs[hit], pos[hit], starts[hit], orders[hit]
    X = tfidf(count_matrix(docs, pos, len(enc), n_features), a["idf"], model.config.sublinear_tf)
    X.sort_indices()  # row-major, columns ascending: (row, column) pairs become one sorted key
    entry = np.repeat(np.arange(X.shape[0], dtype=np.int64), np.diff(X.indptr)) * n_features + X.indices
    pair, occurrence_of, occurrences = np.unique(docs * n_features + pos, return_inverse=True, return_counts=True)
    x = X.data[np.searchsorted(entry, pair)][occurrence_of]  # (occurrences,) the tf-idf of each one's n-gram
    rows, sign = _class_rows(model, target)
    # an n-gram's term, shared by its occurrences in the document, then by the words of each occurrence
    term = x * weight[rows[docs], pos] * sign[docs] / occurrences[occurrence_of] / orders
    out = np.zeros(n_tokens)
    for j in range(model.config.ngram_max):  # word j of each n-gram, not tokens
        longer = orders > j
        out += np.bincount(starts[longer] + j, weights=term[longer], minlength=n_tokens)
    return out, a["bias"][rows] * sign


# ---------------------------------------------------------------- docattn's fasttext


def fasttext_contributions(clf, enc: EncodedCorpus, target: np.ndarray, batch_size: int = 64):
    """Per token: (1/n) W_c . e_token plus its 1/m share of each m-gram row; bias b_c. In float64."""
    import torch

    from docattn.models.fasttext import hash_ngrams
    from docattn.training.inference import iter_batches

    model = clf.model
    model.eval()
    device = model_device(model)
    W = model.classifier.weight.detach().double()  # (C, D)
    target_t = torch.as_tensor(target, dtype=torch.long, device=device)
    out = np.zeros(len(enc.tokens))
    with torch.inference_mode():
        for batch in iter_batches(enc, model.layout, batch_size, clf.limits):
            batch = batch.to(device)
            tokens, mask = batch.tokens, batch.mask  # (B, T)
            w = W[target_t[batch.documents]].unsqueeze(-1)  # (B, D, 1)
            share = (model.embedding(tokens).double() @ w).squeeze(-1) * mask  # (B, T): W_c . e_token
            count = mask.sum(1).double()  # (B,) rows in the mean
            for n in range(2, model.config.word_ngrams + 1):  # n-gram orders, not tokens
                if tokens.shape[1] < n:
                    break
                real = mask[:, n - 1 :]  # (B, T-n+1)
                rows = model.ngram_embedding(hash_ngrams(tokens, n, model.config.buckets))  # (B, T-n+1, D)
                gram = (rows.double() @ w).squeeze(-1) * real / n  # each of its n words' part
                for j in range(n):  # word j of each n-gram
                    share[:, j : j + gram.shape[1]] += gram
                count += real.sum(1)
            share = share / count.clamp_min(1).unsqueeze(-1)
            out[batch_positions(enc, batch.documents.cpu().numpy())] = share[mask].cpu().numpy()
    bias = model.classifier.bias.detach().double().cpu().numpy()[target]
    return out, bias


# ---------------------------------------------------------------- the fastText library

EOS = "</s>"  # the library's end-of-line token: a row of every line it reads
_FNV_OFFSET, _FNV_PRIME, _NGRAM_HASH = 2166136261, 16777619, 116049371


def _fnv1a(ids: np.ndarray) -> np.ndarray:
    """fastText's ``Dictionary::hash`` (32-bit FNV-1a) of each id's decimal string, as uint64."""
    ids = np.asarray(ids, dtype=np.int64)
    digits = np.searchsorted(10 ** np.arange(1, 19, dtype=np.int64), ids, side="right") + 1  # of each id
    h = np.full(len(ids), _FNV_OFFSET, dtype=np.uint64)
    for k in range(int(digits.max(initial=1))):  # digit positions, not words
        d = (ids // 10 ** np.maximum(digits - 1 - k, 0)) % 10
        step = ((h ^ (48 + d).astype(np.uint64)) * np.uint64(_FNV_PRIME)) & np.uint64(0xFFFFFFFF)
        h = np.where(k < digits, step, h)
    return h


def _fnv1a_text(text: str) -> int:
    h = _FNV_OFFSET
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF  # ASCII here: the library's int8 cast changes nothing
    return h


def _library_state(model):
    """The fitted library's arrays, checked: (input matrix, output matrix, output row of each class or -1, input row
    of each token id or -1, </s>'s row, dictionary words (n-gram rows follow them), args)."""
    ft = model.ft  # loading or fitting it needed the library, so it is there
    if ft is None:
        raise DocattnError("this fasttext-lib model is not fitted: nothing to explain")
    args = ft.f.getArgs()
    loss = str(args.loss).rsplit(".", 1)[-1]
    if ft.f.isQuant() or loss not in ("softmax", "ova") or args.maxn > 0:
        raise DocattnError(
            "fasttext-lib has a linear explanation only for an unquantized model trained with the softmax or "
            f"one-vs-all loss and no subwords (this one: loss {loss}, maxn {args.maxn}, quantized {ft.f.isQuant()})"
        )
    words = np.asarray(ft.get_words(on_unicode_error="replace"))
    word = words != EOS
    row_of_token = np.full(model.vocab_size, -1, dtype=np.int64)
    row_of_token[words[word].astype(np.int64)] = np.flatnonzero(word)  # the dictionary holds docattn's ids as text
    labels = np.char.replace(np.asarray(ft.get_labels()), "__label__", "").astype(np.int64)
    row_of_class = np.full(model.num_classes, -1, dtype=np.int64)
    row_of_class[labels] = np.arange(len(labels))
    eos_row = int(np.flatnonzero(~word)[0])
    return ft.get_input_matrix(), ft.get_output_matrix(), row_of_class, row_of_token, eos_row, len(words), args


def _library_lines(enc: EncodedCorpus) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lines the library reads: each document's token ids then </s> (-1 here), with each position's document
    and its position in ``enc.tokens`` (-1 for </s>)."""
    counts = np.asarray(enc.token_counts, dtype=np.int64)
    start = int(enc.sentence_offsets[enc.document_offsets[0]])
    eos = np.cumsum(counts + 1) - 1  # (n_documents,) where each line's </s> sits
    line = np.full(int(eos[-1]) + 1 if len(eos) else 0, -1, dtype=np.int64)
    token_of = line.copy()
    word = np.ones(len(line), dtype=bool)
    word[eos] = False
    token_of[word] = start + np.arange(int(counts.sum()))
    line[word] = np.asarray(enc.tokens, dtype=np.int64)[token_of[word]]
    return line, np.repeat(np.arange(len(counts)), counts + 1), token_of


def fasttext_lib_contributions(model, enc: EncodedCorpus, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each token's share of the library's logit O_c . mean(rows of the line); </s> and its shares are the bias.

    The rows of a line are rebuilt as the library's ``Dictionary::getLine`` makes them: the known words and
    </s>, then the word n-grams of the line's hashes (every word's, </s>'s included), bucket ``h % bucket``
    of the library's ``h = h * 116049371 + hash`` over hashes sign-extended to 64 bits.
    """
    inp, out_matrix, row_of_class, row_of_token, eos_row, n_words, args = _library_state(model)
    if (row_of_class[target] < 0).any():
        missing = int(target[row_of_class[target] < 0][0])
        raise DocattnError(f"class {missing} was absent from the training data: the model has no weights for it")
    line, doc_of, token_of = _library_lines(enc)
    eos = line < 0
    hashes = np.where(eos, np.uint64(_fnv1a_text(EOS)), _fnv1a(np.maximum(line, 0)))
    signed = hashes.astype(np.uint32).view(np.int32).astype(np.int64).view(np.uint64)  # C++'s int32 -> uint64
    rows = np.where(eos, eos_row, row_of_token[np.maximum(line, 0)])
    known = rows >= 0  # a word the library never saw has no row (but has a hash)
    parts = [(np.flatnonzero(known), 1, rows[known])]  # (first position, order, input row) of every row
    h = signed
    for n in range(2, args.wordNgrams + 1):  # n-gram orders, not tokens
        m = len(line) - n + 1
        if m <= 0:
            break
        h = h[:m] * np.uint64(_NGRAM_HASH) + signed[n - 1 :]  # wraps modulo 2**64, as the C++ does
        inside = np.flatnonzero(doc_of[:m] == doc_of[n - 1 :])
        parts.append((inside, n, n_words + (h[inside] % np.uint64(args.bucket)).astype(np.int64)))
    class_rows = out_matrix[row_of_class[target]].astype(np.float64)  # (n_documents, dim)
    n_rows = sum(np.bincount(doc_of[first], minlength=len(target)) for first, _, _ in parts)
    out, bias = np.zeros(len(enc.tokens)), np.zeros(len(target))
    for first, n, input_rows in parts:
        doc = doc_of[first]
        value = np.einsum("kd,kd->k", inp[input_rows].astype(np.float64), class_rows[doc]) / n_rows[doc] / n
        for j in range(n):  # word j of each n-gram
            at = token_of[first + j]
            out += np.bincount(at[at >= 0], weights=value[at >= 0], minlength=len(out))
            bias += np.bincount(doc[at < 0], weights=value[at < 0], minlength=len(bias))
    return out, bias
