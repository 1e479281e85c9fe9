"""Non-neural baselines of HCAN's Table 2: tf-idf of unigrams + bigrams, then naive Bayes or logistic regression.

encoded token ids -> n-gram keys (NumPy, never across documents) -> counts (CSR, min_df 5)
                  -> tf-idf (sublinear tf, l2 rows) -> MultinomialNB / LogisticRegression

Features come from the ``EncodedCorpus`` every model receives, so the baselines see exactly
the tokens the neural models see (same tokenizer, same vocabulary: words under ``min_count``
are UNK). An n-gram is one int64 key: a unigram is its id, a bigram ``V + id1 * V + id2``
(order n adds an offset of V + ... + V^(n-1)), with V the vocabulary size. Bigrams span
sentence boundaries within a document, as a bag of n-grams over raw text does, but never
cross from one document into the next.

The fitted state is a handful of arrays (feature keys, idf, one weight row and bias per
class), saved as ``model.safetensors`` and scored with NumPy: no pickle anywhere, and the
probabilities after loading are bit-identical to those before saving.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn

from docattn.data.encoding import EncodedCorpus
from docattn.errors import CheckpointError, ConfigError, DataError, DocattnError
from docattn.models import register_model
from docattn.models.contract import BAG, AttentionKind
from docattn.models.output import ModelOutput

HCAN_PAPER = "Gao et al. 2018, Hierarchical Convolutional Attention Networks (Table 2 baselines)"
ARTIFACTS = "model.safetensors"
ARRAYS = ("feature_keys", "idf", "weight", "bias", "classes")
LINKS = ("softmax", "binary", "ovr", "sigmoid")  # how weight rows become probabilities (sigmoid: multi-label)


def _penalty_arguments(penalty: str) -> dict:
    """LogisticRegression's arguments for an "l1" or "l2" penalty: ``l1_ratio`` from scikit-learn 1.8,
    which deprecates ``penalty``; before it ``penalty``, since older versions ignore ``l1_ratio`` outside
    elastic-net and would fit logreg-l1 as L2 with only a warning."""
    import sklearn

    major, minor = (int(v) for v in re.match(r"(\d+)\.(\d+)", sklearn.__version__).groups())
    if (major, minor) >= (1, 8):
        return {"l1_ratio": 1.0 if penalty == "l1" else 0.0}
    return {"penalty": penalty}


@dataclass
class BagConfig:
    classifier: str = "logreg"  # "nb" (multinomial naive Bayes) or "logreg"
    ngram_max: int = 2  # unigrams + bigrams (HCAN)
    min_df: int = 5  # minimum document frequency in the training split (HCAN)
    sublinear_tf: bool = True  # tf -> 1 + log(tf)
    C: float = 10.0  # logreg: inverse regularisation strength (HCAN's L1 setting: 1.0)
    penalty: str = "l2"  # logreg: "l2" or "l1"
    alpha: float = 0.1  # nb: additive smoothing
    solver: str = "auto"  # logreg: "auto" (liblinear, one-vs-rest), "liblinear", "lbfgs" or "saga" (multinomial)
    max_iter: int = 1000  # logreg: solver iterations

    def __post_init__(self):
        if self.classifier not in ("nb", "logreg"):
            raise ConfigError(f"classifier must be nb or logreg, got {self.classifier!r}")
        if self.penalty not in ("l1", "l2"):
            raise ConfigError(f"penalty must be l1 or l2, got {self.penalty!r}")
        if self.solver not in ("auto", "liblinear", "lbfgs", "saga"):
            raise ConfigError(f"solver must be auto, liblinear, lbfgs or saga, got {self.solver!r}")
        if self.penalty == "l1" and self.solver == "lbfgs":
            raise ConfigError("the lbfgs solver supports only penalty='l2'; use liblinear or saga for l1")
        if not 1 <= self.ngram_max <= 3:
            raise ConfigError(f"ngram_max must be 1, 2 or 3, got {self.ngram_max}")
        if self.min_df < 1 or self.C <= 0 or self.alpha <= 0 or self.max_iter < 1:
            raise ConfigError("min_df and max_iter must be >= 1, C and alpha > 0")


# --------------------------------------------------------------------------- features


def ngram_keys(enc: EncodedCorpus, vocab_size: int, ngram_max: int) -> tuple[np.ndarray, np.ndarray]:
    """(document, key) of every n-gram occurrence, n = 1..ngram_max, within documents only.

    Keys of different orders never collide: order n is offset by V + V^2 + ... + V^(n-1).
    """
    if sum(vocab_size**n for n in range(1, ngram_max + 1)) >= 2**63:
        raise ConfigError(f"a vocabulary of {vocab_size} words is too large for {ngram_max}-gram int64 keys")
    start = int(enc.sentence_offsets[enc.document_offsets[0]])
    counts = np.asarray(enc.token_counts, dtype=np.int64)
    tokens = np.asarray(enc.tokens[start : start + int(counts.sum())], dtype=np.int64)
    if len(tokens) and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise DataError(f"token ids outside the vocabulary of {vocab_size} words (encoded with another vocabulary?)")
    doc_of = np.repeat(np.arange(len(counts), dtype=np.int64), counts)  # (N,)
    docs, keys = [doc_of], [tokens]
    offset = vocab_size
    for n in range(2, ngram_max + 1):
        m = len(tokens) - n + 1  # n-grams starting at 0..m-1
        if m <= 0:
            break
        # doc_of is sorted, so an n-gram whose first and last tokens share a document lies inside it
        inside = doc_of[:m] == doc_of[n - 1 :]
        key = tokens[:m].copy()
        for j in range(1, n):
            key = key * vocab_size + tokens[j : j + m]
        docs.append(doc_of[:m][inside])
        keys.append(key[inside] + offset)
        offset += vocab_size**n
    return np.concatenate(docs), np.concatenate(keys)


def count_matrix(docs: np.ndarray, columns: np.ndarray, n_docs: int, n_features: int) -> sp.csr_matrix:
    """(n_docs, n_features) CSR counts of (document, column) occurrences; duplicates summed."""
    data = np.ones(len(docs), dtype=np.float64)
    X = sp.csr_matrix((data, (docs, columns)), shape=(n_docs, n_features))
    X.sum_duplicates()
    return X


def tfidf(counts: sp.csr_matrix, idf: np.ndarray, sublinear_tf: bool) -> sp.csr_matrix:
    """sklearn's TfidfTransformer.transform (norm="l2") given its fitted ``idf_``, in NumPy."""
    X = counts.astype(np.float64, copy=True)
    if sublinear_tf:
        np.log(X.data, out=X.data)
        X.data += 1.0
    X.data *= idf[X.indices]
    row_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    norms = np.sqrt(np.bincount(row_of, weights=X.data**2, minlength=X.shape[0]))
    X.data /= np.where(norms > 0, norms, 1.0)[row_of]
    return X


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return expit(z)


# --------------------------------------------------------------------------- model


class BagModel(nn.Module):
    """A model fitted in one call on an encoded corpus, outside the training engine.

    Subclasses implement the "bag" hooks the trainer and run directory use: ``fit_encoded``,
    ``predict_proba_encoded``, ``save_artifacts``, ``load_artifacts``. It is an ``nn.Module``
    only so that code written for neural models (eval mode, ``next(model.parameters())``,
    ``model(batch)`` in explanations) keeps working; it has no trainable parameters.
    """

    layout = BAG
    weighs_classes = True  # fit_encoded honours class_weights (the fastText library cannot)
    penalised_per_class = False  # see contract.OneShotModel

    def __init__(self, vocab_size: int, num_classes: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.num_classes = num_classes
        # an empty, frozen parameter: next(model.parameters()) gives the device, as for neural models
        self._device_anchor = nn.Parameter(torch.zeros(0), requires_grad=False)

    def predict_proba_encoded(self, enc: EncodedCorpus) -> np.ndarray:
        raise NotImplementedError

    def attention_kinds(self) -> tuple[AttentionKind, ...]:
        return ()  # a bag of n-grams: no weights over positions

    def forward(self, batch, return_attention: bool = False) -> ModelOutput:
        """Log-probabilities of a ``FlatBatch`` as logits (what explanations and evaluation call)."""
        mask = batch.mask.cpu().numpy()
        lengths = mask.sum(1).astype(np.int64)
        enc = EncodedCorpus(
            tokens=batch.tokens.cpu().numpy()[mask].astype(np.int32),  # row-major: each row's real tokens in order
            sentence_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            document_offsets=np.arange(len(lengths) + 1, dtype=np.int64),
            labels=np.full(len(lengths), -1, dtype=np.int64),
        )
        logp = np.log(np.maximum(self.predict_proba_encoded(enc), np.finfo(np.float64).tiny))
        logits = torch.from_numpy(logp.astype(np.float32)).to(batch.tokens.device)
        return ModelOutput(logits=logits, attentions={} if return_attention else None)


class TfidfBaseline(BagModel):
    """tf-idf + naive Bayes or logistic regression, fitted in one call on an encoded corpus."""

    def __init__(self, vocab_size: int, num_classes: int, **hparams):
        super().__init__(vocab_size, num_classes)
        self.config = BagConfig(**hparams)
        self.arrays: dict[str, np.ndarray] | None = None
        self.link: str | None = None

    def hparams(self) -> dict:
        return asdict(self.config)

    @property
    def penalised_per_class(self) -> bool:
        return self.config.classifier == "logreg"

    @property
    def fitted(self) -> bool:
        return self.arrays is not None

    def n_parameters(self) -> int | None:
        """Learned numbers: the classifier's weights and biases (the benchmark's parameter column)."""
        return None if self.arrays is None else int(self.arrays["weight"].size + self.arrays["bias"].size)

    # ------------------------------------------------------------------ features
    def _features(self, enc: EncodedCorpus) -> sp.csr_matrix:
        """tf-idf rows of ``enc`` over the fitted feature keys (unseen n-grams dropped)."""
        keys_fitted, idf = self.arrays["feature_keys"], self.arrays["idf"]
        docs, keys = ngram_keys(enc, self.vocab_size, self.config.ngram_max)
        pos = np.searchsorted(keys_fitted, keys)
        pos = np.minimum(pos, max(len(keys_fitted) - 1, 0))
        hit = keys_fitted[pos] == keys if len(keys_fitted) else np.zeros(len(keys), dtype=bool)
        counts = count_matrix(docs[hit], pos[hit], len(enc), len(keys_fitted))
        return tfidf(counts, idf, self.config.sublinear_tf)

    # ------------------------------------------------------------------ fitting
    def fit_encoded(
        self, enc: EncodedCorpus, vocab=None, seed: int = 0, class_weights: np.ndarray | None = None
    ) -> TfidfBaseline:
        """Fit feature keys (min_df), idf and the classifier on a labelled encoded split (deterministic: ``seed``
        unused); ``class_weights`` (one per class) weigh each document's loss by its class, as scikit-learn's
        class_weight."""
        from sklearn.feature_extraction.text import TfidfTransformer

        cfg = self.config
        if vocab is not None and len(vocab) != self.vocab_size:
            raise ConfigError(f"model built for {self.vocab_size} words but the vocabulary has {len(vocab)}")
        y = np.asarray(enc.labels, dtype=np.int64)
        if enc.multi_label:
            if y.shape[1:] != (self.num_classes,):
                raise DataError(f"a multi-label training matrix of {y.shape[1:]} classes for {self.num_classes}")
        elif len(y) == 0 or (y < 0).any() or (y >= self.num_classes).any():
            raise DataError(f"training labels must be class indices 0..{self.num_classes - 1} for every document")
        docs, keys = ngram_keys(enc, self.vocab_size, cfg.ngram_max)
        uniq, inverse = np.unique(keys, return_inverse=True)
        inverse = inverse.ravel()
        # document frequency: count each (document, n-gram) pair once. A sort dedupes them
        # (np.unique without return_inverse takes a hash path that is ~40x slower here)
        pairs = np.sort(docs * len(uniq) + inverse)
        first = np.ones(len(pairs), dtype=bool)
        np.not_equal(pairs[1:], pairs[:-1], out=first[1:])
        df = np.bincount(pairs[first] % len(uniq), minlength=len(uniq))
        keep = df >= cfg.min_df
        if not keep.any():
            raise DataError(f"no n-gram occurs in {cfg.min_df} or more training documents (lower min_df)")
        column = np.cumsum(keep) - 1  # new column of every kept key
        occ = keep[inverse]
        counts = count_matrix(docs[occ], column[inverse[occ]], len(enc), int(keep.sum()))
        idf = TfidfTransformer(sublinear_tf=cfg.sublinear_tf).fit(counts).idf_.astype(np.float64)
        X = tfidf(counts, idf, cfg.sublinear_tf)
        if enc.multi_label:
            weight, bias, classes, link = self._fit_per_class(X, y, class_weights)
        else:
            weight, bias, classes, link = self._fit_classifier(X, y, class_weights)
        self.arrays = {
            "feature_keys": uniq[keep].astype(np.int64),
            "idf": idf,
            "weight": np.ascontiguousarray(weight, dtype=np.float64),
            "bias": np.ascontiguousarray(bias, dtype=np.float64),
            "classes": np.asarray(classes, dtype=np.int64),
        }
        self.link = link
        return self

    def _fit_classifier(self, X: sp.csr_matrix, y: np.ndarray, class_weights: np.ndarray | None = None):
        """(weight (R, F), bias (R,), classes, link) of the fitted classifier."""
        cfg = self.config
        present = np.unique(y)
        # per-document weights: the same as scikit-learn's class_weight, and they also pass one-vs-rest intact
        sample_weight = None if class_weights is None else np.asarray(class_weights, dtype=np.float64)[y]
        if cfg.classifier == "nb":
            from sklearn.naive_bayes import MultinomialNB

            nb = MultinomialNB(alpha=cfg.alpha).fit(X, y, sample_weight=sample_weight)
            return nb.feature_log_prob_, nb.class_log_prior_, nb.classes_, "softmax"
        from sklearn.linear_model import LogisticRegression

        if len(present) < 2:
            raise DataError("logistic regression needs at least two classes in the training data")
        binary = len(present) == 2
        # "auto" is liblinear (one-vs-rest beyond two classes), scikit-learn's default when HCAN
        # was written. It is single-threaded; lbfgs (multinomial) uses OpenMP, which on a busy
        # 2-core machine took 13 s instead of 0.3 s with one thread on a 1,800 x 2,500 problem
        solver = "liblinear" if cfg.solver == "auto" else cfg.solver
        penalty = _penalty_arguments(cfg.penalty)

        def make():
            return LogisticRegression(C=cfg.C, solver=solver, max_iter=cfg.max_iter, random_state=0, **penalty)

        if binary:
            lr = make().fit(X, y, sample_weight=sample_weight)
            return lr.coef_, lr.intercept_, lr.classes_, "binary"
        if solver == "liblinear":  # liblinear is binary only: one-vs-rest, one class at a time
            fits = [make().fit(X, (y == c).astype(np.int64), sample_weight=sample_weight) for c in present]
            return np.vstack([f.coef_ for f in fits]), np.concatenate([f.intercept_ for f in fits]), present, "ovr"
        lr = make().fit(X, y, sample_weight=sample_weight)
        return lr.coef_, lr.intercept_, lr.classes_, "softmax"

    def _fit_per_class(self, X: sp.csr_matrix, Y: np.ndarray, positive_weights: np.ndarray | None = None):
        """Multi-label: one binary classifier per class (one-vs-rest), each a sigmoid over its own weight row.
        Naive Bayes becomes its two-class log-odds, so the sigmoid gives exactly its posterior. A class with no
        positive (or no negative) training document gets a constant answer."""
        cfg = self.config
        k = Y.shape[1]
        weight, bias = np.zeros((k, X.shape[1])), np.zeros(k)
        for c in range(k):
            y = Y[:, c].astype(np.int64)
            positives = int(y.sum())
            if positives in (0, len(y)):
                bias[c] = 20.0 if positives else -20.0  # sigmoid ~1 or ~0: all the training data says
                continue
            sample_weight = None if positive_weights is None else np.where(y == 1, positive_weights[c], 1.0)
            if cfg.classifier == "nb":
                from sklearn.naive_bayes import MultinomialNB

                nb = MultinomialNB(alpha=cfg.alpha).fit(X, y, sample_weight=sample_weight)
                weight[c] = nb.feature_log_prob_[1] - nb.feature_log_prob_[0]
                bias[c] = nb.class_log_prior_[1] - nb.class_log_prior_[0]
                continue
            from sklearn.linear_model import LogisticRegression

            solver = "liblinear" if cfg.solver == "auto" else cfg.solver
            lr = LogisticRegression(
                C=cfg.C, solver=solver, max_iter=cfg.max_iter, random_state=0, **_penalty_arguments(cfg.penalty)
            ).fit(X, y, sample_weight=sample_weight)
            weight[c], bias[c] = lr.coef_[0], lr.intercept_[0]
        return weight, bias, np.arange(k), "sigmoid"

    # ------------------------------------------------------------------ inference
    def _check_fitted(self) -> None:
        if not self.fitted:
            raise DocattnError(
                f"this {self.config.classifier} baseline is not fitted: call fit_encoded() or load_artifacts()"
            )

    def predict_proba_encoded(self, enc: EncodedCorpus) -> np.ndarray:
        """(n_documents, num_classes) probabilities; classes absent from training get 0."""
        self._check_fitted()
        a = self.arrays
        X = self._features(enc)
        z = np.asarray(X @ a["weight"].T) + a["bias"]  # (N, R)
        if self.link == "binary":
            p1 = _sigmoid(z[:, 0])
            part = np.stack([1.0 - p1, p1], axis=1)
        elif self.link == "ovr":
            part = _sigmoid(z)
            part = part / part.sum(axis=1, keepdims=True)
        elif self.link == "sigmoid":  # multi-label: each class's own probability, not normalised
            part = _sigmoid(z)
        else:
            part = _softmax(z)
        probs = np.zeros((len(enc), self.num_classes), dtype=np.float64)
        probs[:, a["classes"]] = part
        return probs

    # ------------------------------------------------------------------ persistence
    def _metadata(self) -> dict[str, str]:
        cfg = self.config
        return {
            "kind": "tfidf-bag",
            "classifier": cfg.classifier,
            "link": str(self.link),
            "vocab_size": str(self.vocab_size),
            "num_classes": str(self.num_classes),
            "ngram_max": str(cfg.ngram_max),
            "sublinear_tf": str(cfg.sublinear_tf),
        }

    def save_artifacts(self, run_dir) -> Path:
        """Write the fitted arrays to ``run_dir/model.safetensors`` (temp file + rename)."""
        from safetensors.numpy import save

        from docattn.version import __version__

        self._check_fitted()
        from docattn.data.files import atomic_write

        path = Path(run_dir) / ARTIFACTS
        arrays = {k: np.ascontiguousarray(v) for k, v in self.arrays.items()}
        # written by Python so the mode follows the umask (save_file makes a private 0600 file)
        return atomic_write(path, save(arrays, metadata={**self._metadata(), "docattn_version": __version__}))

    def load_artifacts(self, run_dir) -> TfidfBaseline:
        """Read arrays written by ``save_artifacts``; a missing or mismatched file is a ``CheckpointError``."""
        from safetensors import SafetensorError, safe_open

        path = Path(run_dir) / ARTIFACTS
        if not path.exists():
            raise CheckpointError(f"{run_dir}: {ARTIFACTS} missing")
        try:
            with safe_open(str(path), framework="numpy") as f:
                meta = f.metadata() or {}
                arrays = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118  (safe_open is no mapping)
        except (SafetensorError, OSError, ValueError) as err:
            raise CheckpointError(f"{path}: unreadable or truncated ({err})") from None
        expected = self._metadata()
        expected.pop("link")
        wrong = {k: (meta.get(k), v) for k, v in expected.items() if meta.get(k) != v}
        if wrong:
            detail = ", ".join(f"{k} is {got!r}, config says {want!r}" for k, (got, want) in wrong.items())
            raise CheckpointError(f"{path}: does not match this model ({detail})")
        missing = [k for k in ARRAYS if k not in arrays]
        if missing or meta.get("link") not in LINKS:
            raise CheckpointError(f"{path}: missing arrays {missing} or link {meta.get('link')!r}")
        keys, idf, w, b, c = (arrays[k] for k in ARRAYS)
        rows = 1 if meta["link"] == "binary" else len(c)
        ok = (
            keys.ndim == 1
            and idf.shape == keys.shape
            and w.shape == (rows, len(keys))
            and b.shape == (rows,)
            and c.ndim == 1
            and len(np.unique(c)) == len(c)
            and (len(c) == 2 or meta["link"] != "binary")
            and (c.size == 0 or (c.min() >= 0 and c.max() < self.num_classes))
            and bool(np.all(keys[1:] > keys[:-1]))
        )
        if not ok:
            raise CheckpointError(f"{path}: arrays have inconsistent shapes or values (corrupt file?)")
        self.arrays = {"feature_keys": keys, "idf": idf, "weight": w, "bias": b, "classes": c}
        self.link = meta["link"]
        return self


def _variant(name: str, description: str, **defaults):
    @register_model(name, description=description, paper=HCAN_PAPER, layout=BAG, **defaults)
    def build(vocab_size: int, num_classes: int, **hparams) -> TfidfBaseline:
        return TfidfBaseline(vocab_size, num_classes, **hparams)

    return build


_variant("nb", "tf-idf (uni+bigrams, min_df 5) + multinomial naive Bayes, alpha 0.1", classifier="nb", alpha=0.1)
_variant(
    "logreg",
    "tf-idf (uni+bigrams, min_df 5, sublinear tf) + L2 logistic regression, C=10",
    classifier="logreg",
    penalty="l2",
    C=10.0,
)
_variant(
    "logreg-l1",
    "HCAN's baseline: tf-idf (uni+bigrams, min_df 5) + L1 logistic regression, C=1",
    classifier="logreg",
    penalty="l1",
    C=1.0,
)
