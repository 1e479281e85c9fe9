"""From raw splits to encoded arrays: validation split, vocabulary, label map, encoding, cache.

``prepare`` works on in-memory corpora (the Python API); ``prepare_paths`` reads files and
caches the result keyed by the files' content hashes and every setting that changes the
encoding, so a second run on the same data reloads memory-mapped arrays without tokenizing.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from docattn.data.corpus import Corpus, LabelMap
from docattn.data.encoding import EncodedCorpus, cache_key, cached, fingerprint_path
from docattn.data.files import write_json
from docattn.data.text import TextConfig, Vocabulary
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
    # documents tokenized at a time: preparation's memory grows with this, not with the corpus
    prepare_chunk: int = 10_000
    # worker processes that split sentences, count words and encode, one core each (0: this process, whose
    # tokenizer spreads over the cores itself); a script asking for workers guards its code with
    # if __name__ == "__main__", as Python's multiprocessing needs
    prepare_workers: int = 0

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
        for name, least in _RUNTIME.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"{name} must be a whole number >= {least}, got {value!r}")

    def to_json(self) -> dict:
        d = asdict(self)
        d["text"] = self.text.to_json()
        return d

    @classmethod
    def from_json(cls, data: dict) -> DataSettings:
        """Settings a run recorded; how its preparation ran (``_RUNTIME``) is left to this session's defaults."""
        data = {k: v for k, v in data.items() if k not in _RUNTIME}
        data["text"] = TextConfig.from_json(data.get("text", {}))
        return cls(**data)

    def encoding_key(self) -> dict:
        """The settings that change encoded arrays (truncation happens at batch time)."""
        return {k: v for k, v in self.to_json().items() if k not in (*_LIMITS, *_RUNTIME)}


_LIMITS = ("max_sentences", "max_words", "max_tokens", "max_batch_words", "max_batch_pairs")
_RUNTIME = {"prepare_chunk": 1, "prepare_workers": 0}  # how preparation runs, never what it gives: least values


@dataclass
class PreparedData:
    vocab: Vocabulary
    labels: LabelMap
    splits: dict[str, EncodedCorpus]  # "train", "valid" and, when given, "test"
    info: dict = field(default_factory=dict)  # counts, skipped documents, timings


def prepare(
    train: Corpus, valid: Corpus | None = None, test: Corpus | None = None, settings: DataSettings | None = None
) -> PreparedData:
    """Split off validation if needed, build vocabulary and label map on train, encode all splits; a chunk of
    ``settings.prepare_chunk`` documents at a time, which gives the arrays one chunk of everything would."""
    from docattn.data.chunked import corpus_chunks, prepare_chunked

    settings = settings or DataSettings()
    if len(train) == 0:
        raise DataError(f"{train.source or 'training data'}: no documents")
    if train.labels is None:
        raise DataError(f"{train.source or 'training data'}: documents have no labels")
    # labels checked under the user's own document numbers (an unhashable one names its document)
    LabelMap.from_labels(train.labels, train.classes, train.multi_label)
    given = {"train": train, "valid": valid, "test": test}
    inputs = {k: corpus_chunks(c, settings.prepare_chunk) for k, c in given.items() if c is not None}
    vocab, label_map, splits, info = prepare_chunked(inputs, settings)
    return PreparedData(vocab, label_map, splits, info)


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

    built = []  # whether this call encoded the data, or found it cached

    def build(folder: Path) -> None:
        from docattn.data.chunked import input_chunks, prepare_chunked

        built.append(folder)

        inputs, skipped = input_chunks(train_path, valid_path, test_path, reader_options, settings.prepare_chunk)
        vocab, labels, _, info = prepare_chunked(inputs, settings, folder)  # the splits' arrays go to folder
        info["skipped"] = skipped()
        vocab.save(folder / "vocab.json")
        write_json(folder / "labels.json", labels.to_json())
        write_json(folder / "info.json", info)

    if use_cache:
        key = cache_key(key_parts)
        try:
            folder = cached(key, build, cache_dir)
            try:
                # an entry this call wrote is not read through again: at 1M documents that alone maps ~1 GB
                data = _load_prepared(folder, mmap=True, check=not built)
            except (
                DocattnError,
                ValueError,
                KeyError,
                OSError,
            ):  # a damaged entry (a truncated file...): build it again
                shutil.rmtree(folder, ignore_errors=True)
                data = _load_prepared(cached(key, build, cache_dir), mmap=True)
            data.info["inputs"] = key_parts["inputs"]  # content hashes: what tune --resume compares
            data.info["reused"] = not built
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


def _load_prepared(folder: Path, mmap: bool, check: bool = True) -> PreparedData:
    vocab = Vocabulary.load(folder / "vocab.json")
    labels = LabelMap.from_json(json.loads((folder / "labels.json").read_text(encoding="utf-8")))
    info = json.loads((folder / "info.json").read_text(encoding="utf-8"))
    splits = {p.name: EncodedCorpus.load(p, mmap=mmap, check=check) for p in sorted(folder.iterdir()) if p.is_dir()}
    for name, enc in splits.items():  # a damaged or tampered entry is rebuilt (prepare_paths), never trained on
        problem = enc.problem(len(vocab), len(labels)) if check else None
        if problem:
            raise DataError(f"{folder / name}: encoded corpus is corrupt ({problem})")
    info["cache"] = str(folder)
    return PreparedData(vocab, labels, splits, info)
