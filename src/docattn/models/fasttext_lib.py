"""The original fastText library (Joulin et al. 2017) as a baseline, beside docattn's own ``fasttext``.

Optional: ``pip install 'docattn[fasttext]'`` (the ``fasttext-wheel`` package). Documents reach
the library as the token ids every docattn model sees (same tokenizer and vocabulary), so the
two fastTexts differ only in their implementation. The trained model is fastText's own binary
``fasttext.bin``; a SHA-256 beside it is checked before the library reads it, because the
library does not detect a truncated file. Its ``predict()`` breaks under NumPy 2, so the
binding's ``f.predict`` is called directly.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from docattn.data.encoding import EncodedCorpus
from docattn.errors import CheckpointError, ConfigError, DataError, DocattnError
from docattn.models import register_model
from docattn.models.baselines import BagModel
from docattn.models.contract import BAG

FASTTEXT_PAPER = "Joulin et al. 2017, Bag of Tricks for Efficient Text Classification (the fastText library)"
BINARY, DIGEST = "fasttext.bin", "fasttext.json"


@dataclass
class FastTextLibConfig:
    dim: int = 10  # hidden units (Joulin et al.: 10)
    word_ngrams: int = 2  # word n-grams up to this order (the paper's "bigram" runs)
    epoch: int = 10  # with lr 0.25: more than the library's 5 at 0.1, which left IMDB underfit (benchmarks/LOG.md)
    learning_rate: float = 0.25  # the library's own rate (not docattn's `lr`, which the training engine owns)
    bucket: int = 2_000_000  # hashed n-gram rows (the library's default)
    threads: int = 1  # one thread makes training reproducible for a seed; more is faster

    def __post_init__(self):
        if min(self.dim, self.word_ngrams, self.epoch, self.bucket, self.threads) < 1 or self.learning_rate <= 0:
            raise ConfigError(
                "fasttext-lib: dim, word_ngrams, epoch, bucket and threads must be >= 1, learning_rate > 0"
            )


def _library():
    try:
        import fasttext.FastText as ft
    except ImportError:
        raise ConfigError("model 'fasttext-lib' needs the fastText library: pip install 'docattn[fasttext]'") from None
    return ft


def _lines(enc: EncodedCorpus, labels: np.ndarray | None = None) -> list[str]:
    """One line of space-separated token ids per document, prefixed by ``__label__k`` when labelled."""
    start = np.asarray(enc.sentence_offsets)[
        np.asarray(enc.document_offsets)
    ]  # each document's first token, and the end
    tokens = np.asarray(enc.tokens)
    docs = [" ".join(map(str, tokens[a:b].tolist())) for a, b in zip(start[:-1], start[1:])]
    if labels is None:
        return docs
    if labels.ndim == 2:  # multi-label: every class of the document as its own __label__ token
        return [" ".join([*(f"__label__{j}" for j in np.flatnonzero(row)), d]) for row, d in zip(labels, docs)]
    return [f"__label__{y} {d}" for y, d in zip(labels.tolist(), docs)]


def _shuffled(lines: list[str], seed: int) -> list[str]:
    """The library reads its file in order and SGD remembers the last lines best: files sorted by
    label (IMDB's) left it predicting one class for every document. A seeded shuffle."""
    return [lines[i] for i in np.random.default_rng(seed).permutation(len(lines))]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class FastTextLib(BagModel):
    """fastText's supervised classifier, fitted in one call (the "bag" hooks of the trainer and run directory)."""

    def __init__(self, vocab_size: int, num_classes: int, **hparams):
        super().__init__(vocab_size, num_classes)
        self.config = FastTextLibConfig(**hparams)
        self.ft = None

    def hparams(self) -> dict:
        return asdict(self.config)

    weighs_classes = False  # the library's training has no per-class or per-example weights

    def fit_encoded(self, enc: EncodedCorpus, vocab=None, seed: int = 0, class_weights=None) -> FastTextLib:
        """Train on a labelled encoded split (rare words are already UNK by docattn's vocabulary)."""
        if class_weights is not None:
            raise ConfigError(
                "fasttext-lib cannot weigh classes (the fastText library has no such option); leave class_weight unset"
            )
        ft = _library()
        y = np.asarray(enc.labels, dtype=np.int64)
        if not enc.multi_label and (len(y) == 0 or (y < 0).any() or (y >= self.num_classes).any()):
            raise DataError(f"training labels must be class indices 0..{self.num_classes - 1} for every document")
        cfg = self.config
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "train.txt"
            path.write_text("\n".join(_shuffled(_lines(enc, y), seed)) + "\n", encoding="utf-8")
            self.ft = ft.train_supervised(
                input=str(path),
                dim=cfg.dim,
                wordNgrams=cfg.word_ngrams,
                epoch=cfg.epoch,
                lr=cfg.learning_rate,
                bucket=cfg.bucket,
                minCount=1,
                thread=cfg.threads,
                seed=seed,
                verbose=0,
                loss="ova" if enc.multi_label else "softmax",  # ova: one independent sigmoid per class
            )
        return self

    def predict_proba_encoded(self, enc: EncodedCorpus) -> np.ndarray:
        """(n_documents, num_classes) probabilities; classes absent from training get 0."""
        if self.ft is None:
            raise DocattnError("this fasttext-lib model is not fitted: call fit_encoded() or load_artifacts()")
        probs = np.zeros((len(enc), self.num_classes), dtype=np.float64)
        for i, line in enumerate(_lines(enc)):
            for p, label in self.ft.f.predict(line + "\n", self.num_classes, 0.0, "strict"):
                probs[i, int(label[len("__label__") :])] = p
        if not str(self.ft.f.getArgs().loss).endswith("ova"):  # multi-label probabilities are not normalised
            probs /= np.maximum(probs.sum(1, keepdims=True), np.finfo(np.float64).tiny)
        return probs

    def n_parameters(self) -> int:
        return 0 if self.ft is None else int(self.ft.get_input_matrix().size + self.ft.get_output_matrix().size)

    def save_artifacts(self, run_dir) -> Path:
        """``fasttext.bin`` (the library's format) and its SHA-256, each written to a temp file and renamed."""
        if self.ft is None:
            raise DocattnError("this fasttext-lib model is not fitted")
        run_dir = Path(run_dir)
        tmp = run_dir / f".{BINARY}.{os.getpid()}.tmp"
        self.ft.save_model(str(tmp))
        digest = {"sha256": _sha256(tmp), "num_classes": self.num_classes, "vocab_size": self.vocab_size}
        os.replace(tmp, run_dir / BINARY)
        tmp = run_dir / f".{DIGEST}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(digest), encoding="utf-8")
        os.replace(tmp, run_dir / DIGEST)
        return run_dir / BINARY

    def load_artifacts(self, run_dir) -> FastTextLib:
        """Read ``fasttext.bin`` after checking its digest.

        A missing, truncated or foreign file is a ``CheckpointError``.
        """
        ft = _library()
        path, digest_path = Path(run_dir) / BINARY, Path(run_dir) / DIGEST
        if not path.exists() or not digest_path.exists():
            raise CheckpointError(f"{run_dir}: {BINARY} or {DIGEST} missing")
        try:
            digest = json.loads(digest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise CheckpointError(f"{digest_path}: unreadable ({err})") from None
        if digest.get("sha256") != _sha256(path):
            raise CheckpointError(f"{path}: does not match its SHA-256 (truncated or replaced?)")
        if digest.get("num_classes") != self.num_classes or digest.get("vocab_size") != self.vocab_size:
            raise CheckpointError(
                f"{path}: trained for {digest.get('num_classes')} classes and {digest.get('vocab_size')} "
                f"words, the run's config says {self.num_classes} and {self.vocab_size}"
            )
        self.ft = ft._FastText(model_path=str(path))
        return self


@register_model(
    "fasttext-lib",
    description="the original fastText library (optional extra): bag of words + bigrams, 10 hidden units",
    paper=FASTTEXT_PAPER,
    layout=BAG,
)
def build(vocab_size: int, num_classes: int, **hparams) -> FastTextLib:
    return FastTextLib(vocab_size, num_classes, **hparams)
