"""From raw splits to encoded arrays: validation split, vocabulary, label map, encoding, cache.

``prepare`` works on in-memory corpora (the Python API); ``prepare_paths`` reads files and
caches the result keyed by the files' content hashes and every setting that changes the
encoding, so a second run on the same data reloads memory-mapped arrays without tokenizing.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from docattn.data.corpus import Corpus, LabelMap
from docattn.data.encoding import EncodedCorpus, cache_key, cached, encode_corpus, fingerprint_path
from docattn.data.files import write_json
from docattn.data.splits import stratified_split
from docattn.data.text import TextConfig, Vocabulary, documents_to_strings
from docattn.errors import ConfigError, DataError, DocattnError, checked_fields

CACHE_VERSION = 6  # 2: text that is not UTF-8 is read as Latin-1 (folders) or refused (line files), no U+FFFD
# 3: TextConfig.caseless_sentences (lowercased text split at . ! ?); 4: Zhang CSV fields as sentences, AG's
# backslash breaks, folder labels from the folder under the split; 5: fastText integer labels as ints, numeric
# folder classes in numeric order
# 6: each Han character a token (TextConfig.han_characters)


@dataclass
class DataSettings:
    """Everything about the data a model depends on; saved in a run's config.json."""

    text: TextConfig = field(default_factory=TextConfig)
    # words seen fewer times map to UNK: HCAN's 5 (HAN keeps words seen more than 5 times, i.e. 6;
    # SANet every word of the training and validation sets, i.e. 1)
    min_count: int = 5
    max_vocab: int | None = None  # the most frequent words kept, at most (None: all seen min_count times)
    valid_fraction: float = 0.1  # HAN: 10% of train; the HPAN paper: 0.3
    split_seed: int = 0  # the validation, test-fraction and cross-validation splits
    # for data without a test split: this share of the training documents (stratified, seeded) is tested on...
    test_fraction: float | None = None
    # ... or fold cv_fold of a stratified cv_folds-fold split (benchmark --cv runs every fold)
    cv_folds: int | None = None
    cv_fold: int = 0  # which fold is tested (0 to cv_folds - 1)
    max_sentences: int | None = 1000  # sentences of a document hierarchical models read (0 or None: all)
    max_words: int | None = 1000  # words of a sentence hierarchical models read (0 or None: all)
    max_tokens: int | None = None  # tokens of a document flat models read (0 or None: all)
    # words one batch reads: a batch of long documents is cut into smaller ones and a longer document is read up
    # to it, so memory is bounded by this setting, not by the longest document
    max_batch_words: int | None = 150_000
    # word pairs one batch compares (each sentence's words, each document's sentences): set by the self-attention
    # models, whose memory grows with the square of a sentence's length
    max_batch_pairs: int | None = None

    def __post_init__(self):
        if self.test_fraction is not None and not 0.0 < self.test_fraction < 1.0:
            raise ConfigError(f"test_fraction must be between 0 and 1, got {self.test_fraction}")
        if self.test_fraction is not None and self.cv_folds is not None:
            raise ConfigError("test_fraction and cv_folds both choose the test documents: give one of them")
        if self.cv_folds is not None and not (isinstance(self.cv_folds, int) and self.cv_folds >= 2):
            raise ConfigError(f"cv_folds must be a whole number >= 2, got {self.cv_folds!r}")
        if self.cv_folds is not None and not 0 <= self.cv_fold < self.cv_folds:
            raise ConfigError(f"cv_fold must be from 0 to {self.cv_folds - 1}, got {self.cv_fold}")
        for name in _LIMITS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ConfigError(f"{name} must be a whole number >= 0 (0 or unset: no limit), got {value!r}")
        checked_fields(self)

    def to_json(self) -> dict:
        d = asdict(self)
        d["text"] = self.text.to_json()
        return d

    @classmethod
    def from_json(cls, data: dict) -> DataSettings:
        data = dict(data)
        data["text"] = TextConfig.from_json(data.get("text", {}))
        return cls(**data)

    def encoding_key(self) -> dict:
        """The settings that change encoded arrays (truncation happens at batch time)."""
        return {k: v for k, v in self.to_json().items() if k not in _LIMITS}


_LIMITS = ("max_sentences", "max_words", "max_tokens", "max_batch_words", "max_batch_pairs")


@dataclass
class PreparedData:
    vocab: Vocabulary
    labels: LabelMap
    splits: dict[str, EncodedCorpus]  # "train", "valid" and, when given, "test"
    info: dict = field(default_factory=dict)  # counts, skipped documents, timings


def prepare(
    train: Corpus, valid: Corpus | None = None, test: Corpus | None = None, settings: DataSettings | None = None
) -> PreparedData:
    """Split off validation if needed, build vocabulary and label map on train, encode all splits."""
    settings = settings or DataSettings()
    if len(train) == 0:
        raise DataError(f"{train.source or 'training data'}: no documents")
    if train.labels is None:
        raise DataError(f"{train.source or 'training data'}: documents have no labels")
    t0 = time.perf_counter()
    LabelMap.from_labels(
        train.labels, train.classes, train.multi_label
    )  # labels checked under the user's own document numbers, before splits
    if settings.test_fraction is not None or settings.cv_folds is not None:
        if test is not None:
            raise DataError(
                f"{test.source or 'the test data'}: the data has a test split of its own, so "
                "test_fraction / cv_folds (--test-fraction, --cv) would test on other documents; drop one"
            )
        from docattn.data.splits import held_out_split

        tr_idx, te_idx = held_out_split(
            _strata(train), settings.test_fraction, settings.cv_folds, settings.cv_fold, settings.split_seed
        )
        train, test = train.subset(tr_idx), train.subset(te_idx)
    if valid is None:
        tr_idx, va_idx = stratified_split(_strata(train), settings.valid_fraction, settings.split_seed)
        train, valid = train.subset(tr_idx), train.subset(va_idx)
    elif valid.labels is None:
        raise DataError(
            f"{valid.source or 'validation data'}: documents have no labels; validation needs them "
            "to choose the best weights"
        )
    label_map = LabelMap.from_labels(train.labels, train.classes, train.multi_label)
    train_strings = documents_to_strings(train.texts, train.sentences, settings.text)
    vocab = Vocabulary.build(train_strings, settings.text, settings.min_count, settings.max_vocab)
    dropped: dict = {}  # labels of validation or test documents that training never saw (multi-label)
    splits = {
        "train": encode_corpus(train, vocab, label_map),
        "valid": encode_corpus(valid, vocab, label_map, dropped),
    }
    if test is not None:
        splits["test"] = encode_corpus(test, vocab, label_map, dropped)
    info = {
        "documents": {k: len(v) for k, v in splits.items()},
        "vocab_size": len(vocab),
        "seconds": round(time.perf_counter() - t0, 2),
        **dropped,
    }
    return PreparedData(vocab, label_map, splits, info)


def _strata(corpus: Corpus) -> list:
    """What splits stratify on: the labels, or for multi-label documents each one's rarest label."""
    if corpus.multi_label:
        from docattn.data.splits import label_set_strata

        return label_set_strata(corpus.labels)
    return corpus.labels


def read_inputs(train_path, valid_path=None, test_path=None, reader_options: dict | None = None) -> dict[str, Corpus]:
    """Train/valid/test corpora from paths; a source holding several splits fills the missing ones."""
    from docattn.data.readers import read_splits

    opts = reader_options or {}
    found = read_splits(train_path, **opts)
    if "train" in found:
        out = dict(found)
    elif "all" in found:
        out = {"train": found["all"]}
    else:
        raise DataError(f"{train_path}: no training split (found {sorted(found)})")
    for name, path in (("valid", valid_path), ("test", test_path)):
        if path is not None:
            split = read_splits(path, **opts)
            if name not in split and "all" not in split:  # never another split: a source's train is no validation data
                raise DataError(
                    f"{path} holds the splits {sorted(split)} but no {name} split; give --{name} a file or "
                    f"folder of {name} documents only"
                )
            out[name] = split.get(name) or split["all"]
    return out


def prepare_paths(
    train_path,
    valid_path=None,
    test_path=None,
    settings: DataSettings | None = None,
    reader_options: dict | None = None,
    cache_dir=None,
    use_cache: bool = True,
) -> PreparedData:
    """``prepare`` for files, cached: the second run with the same inputs reloads arrays only."""
    settings = settings or DataSettings()
    paths = {"train": train_path, "valid": valid_path, "test": test_path}
    key_parts = {
        "version": CACHE_VERSION,
        "inputs": {k: fingerprint_path(p) if p is not None else None for k, p in paths.items()},
        "reader": reader_options or {},
        "settings": settings.encoding_key(),
    }

    def build(folder: Path) -> None:
        corpora = read_inputs(train_path, valid_path, test_path, reader_options)
        prepared = prepare(corpora["train"], corpora.get("valid"), corpora.get("test"), settings)
        prepared.info["skipped"] = {k: c.stats for k, c in corpora.items() if c.stats}
        prepared.vocab.save(folder / "vocab.json")
        write_json(folder / "labels.json", prepared.labels.to_json())
        write_json(folder / "info.json", prepared.info)
        for name, enc in prepared.splits.items():
            enc.save(folder / name)

    if use_cache:
        key = cache_key(key_parts)
        try:
            folder = cached(key, build, cache_dir)
            try:
                data = _load_prepared(folder, mmap=True)
            except (
                DocattnError,
                ValueError,
                KeyError,
                OSError,
            ):  # a damaged entry (a truncated file...): build it again
                shutil.rmtree(folder, ignore_errors=True)
                data = _load_prepared(cached(key, build, cache_dir), mmap=True)
            data.info["inputs"] = key_parts["inputs"]  # content hashes: what tune --resume compares
            return data
        except PermissionError as err:  # a read-only cache folder: work without it, and say so
            unwritable = f"{err.filename or cache_dir}: not writable"
    else:
        unwritable = None
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        data = _load_prepared(Path(tmp), mmap=False)
    data.info.pop("cache", None)  # nothing was kept, so word2vec vectors are not cached either
    data.info["inputs"] = key_parts["inputs"]
    if unwritable:
        data.info["cache_error"] = unwritable
    return data


def _load_prepared(folder: Path, mmap: bool) -> PreparedData:
    vocab = Vocabulary.load(folder / "vocab.json")
    labels = LabelMap.from_json(json.loads((folder / "labels.json").read_text(encoding="utf-8")))
    info = json.loads((folder / "info.json").read_text(encoding="utf-8"))
    splits = {p.name: EncodedCorpus.load(p, mmap=mmap) for p in sorted(folder.iterdir()) if p.is_dir()}
    for name, enc in splits.items():  # a damaged or tampered entry is rebuilt (prepare_paths), never trained on
        problem = enc.problem(len(vocab), len(labels))
        if problem:
            raise DataError(f"{folder / name}: encoded corpus is corrupt ({problem})")
    info["cache"] = str(folder)
    return PreparedData(vocab, labels, splits, info)
