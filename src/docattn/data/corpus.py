"""Raw documents as readers return them, and the label <-> index map saved with every model."""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from docattn.errors import DataError


@dataclass
class Corpus:
    """Documents of one split: raw texts, their labels and, when the source has them, sentences.

    ``sentences[i]`` is the pre-split sentence list of document i (e.g. Tang et al. ``.ss``
    files); when ``sentences`` is None the text processor splits ``texts`` itself.
    ``classes`` is the class order the source defines (``classes.txt``, folder names); None
    lets the label map sort the labels it sees.
    A ``multi_label`` corpus gives each document a tuple of labels (possibly empty), never a bare label.
    """

    texts: list[str]
    labels: list[Hashable] | None = None
    sentences: list[list[str] | None] | None = None  # None for a document whose text the splitter splits
    ids: list[str] | None = None
    source: str = ""
    classes: list[Hashable] | None = None
    stats: dict[str, int] = field(default_factory=dict)  # e.g. {"skipped_empty": 3, "decode_errors": 1}
    rationales: list[dict] | None = None  # ground truth of the embedded corpus: deciding sentences/words
    multi_label: bool = False  # labels[i] is a tuple of labels (several, one or none)

    def __post_init__(self) -> None:
        n = len(self.texts)
        if self.labels is not None and len(self.labels) != n:
            raise DataError(f"{self.source}: {n} texts but {len(self.labels)} labels")
        if self.sentences is not None and len(self.sentences) != n:
            raise DataError(f"{self.source}: {n} texts but {len(self.sentences)} sentence lists")
        if self.ids is None:
            self.ids = [str(i) for i in range(n)]
        if self.multi_label and self.labels is not None:
            self.labels = [tuple(y) if isinstance(y, (list, tuple)) else (y,) for y in self.labels]

    def without_labels(self) -> Corpus:
        """The same documents with no labels, so encoding never checks them against a model's classes."""
        return Corpus(
            texts=self.texts, sentences=self.sentences, ids=self.ids, source=self.source, multi_label=self.multi_label
        )

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, indices: Sequence[int]) -> Corpus:
        """The documents at ``indices``, in that order (used for validation splits)."""
        pick = lambda xs: None if xs is None else [xs[i] for i in indices]  # noqa: E731
        return Corpus(
            texts=pick(self.texts),
            labels=pick(self.labels),
            sentences=pick(self.sentences),
            ids=pick(self.ids),
            rationales=pick(self.rationales),
            source=self.source,
            classes=self.classes,
            multi_label=self.multi_label,
        )


def to_corpus(texts, labels=None, source: str = "input") -> Corpus:
    """Validate user input: raw strings, or lists of sentence strings (pre-split documents)."""
    if isinstance(texts, str):
        raise DataError(f"{source}: expected a list of documents, got a single string")
    if hasattr(texts, "columns") and hasattr(texts, "iloc"):  # a pandas DataFrame iterates over its column names
        if len(texts.columns) != 1:
            raise DataError(
                f"{source}: a table with columns {list(texts.columns)}; pass its text column, "
                f"e.g. df[{str(texts.columns[0])!r}]"
                if len(texts.columns)
                else f"{source}: a table with no columns"
            )
        texts = texts.iloc[:, 0]
    texts = list(texts)
    if not texts:
        raise DataError(f"{source}: no documents (empty list)")
    sentences = None
    if all(isinstance(t, (list, tuple)) for t in texts):
        sentences = [[str(s) for s in t] for t in texts]
        texts = ["\n".join(s) for s in sentences]
    elif not all(isinstance(t, str) for t in texts):
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, (str, list, tuple))), None)
        if bad is None:  # strings and lists of sentences, mixed
            listed = next(i for i, t in enumerate(texts) if not isinstance(t, str))
            raise DataError(
                f"{source}: document {listed} is a list of sentences but document "
                f"{next(i for i, t in enumerate(texts) if isinstance(t, str))} a string; give every "
                "document as a string, or every one as a list of sentences"
            )
        raise DataError(f"{source}: document {bad} is {type(texts[bad]).__name__}, expected str or a list of sentences")
    texts, sentences, stats = _bounded(texts, sentences)
    if labels is not None:
        labels = list(labels)
        if len(labels) != len(texts):
            raise DataError(f"{source}: {len(texts)} documents but {len(labels)} labels")
        if any(isinstance(y, _LABEL_SETS) for y in labels):  # a list of label lists: multi-label documents
            labels = [_label_set(y, i, source) for i, y in enumerate(labels)]
            return Corpus(texts=texts, labels=labels, sentences=sentences, source=source, stats=stats, multi_label=True)
        missing = [i for i, y in enumerate(labels) if _is_missing(y)]
        if missing:
            raise DataError(f"{source}: document {missing[0]} has no label")
        labels = [y.item() if isinstance(y, np.generic) else y for y in labels]
    return Corpus(texts=texts, labels=labels, sentences=sentences, source=source, stats=stats)


# a document's labels given as one of these is a set of labels; a tuple stays one label, as it always was
_LABEL_SETS = (list, set, frozenset, np.ndarray)


def _label_set(labels, i: int, source: str) -> tuple:
    if not isinstance(labels, _LABEL_SETS):
        raise DataError(
            f"{source}: document {i} has the label {labels!r} where others have lists of labels; "
            "give every document a list (multi-label), or every one a single label"
        )
    items = sorted(labels, key=_sort_key) if isinstance(labels, (set, frozenset)) else list(labels)
    items = [y.item() if isinstance(y, np.generic) else y for y in items]
    return tuple(dict.fromkeys(y for y in items if not _is_missing(y)))  # once each, in the order given


_SURROGATE = re.compile("[\ud800-\udfff]")


def _bounded(texts: list[str], sentences: list[list[str]] | None) -> tuple[list[str], list[list[str]] | None, dict]:
    """What the Python API gets, as the readers give it: documents cut at $DOCATTN_MAX_DOCUMENT_CHARS (counted),
    and a lone surrogate (text that is no valid Unicode) as U+FFFD, which the sentence splitter can encode."""
    from docattn.data.limits import max_document_chars

    limit = max_document_chars()
    cut = [i for i, t in enumerate(texts) if len(t) > limit]
    odd = [i for i, t in enumerate(texts) if _SURROGATE.search(t)]
    if not cut and not odd:
        return texts, sentences, {}
    texts = list(texts)
    for i in odd:
        texts[i] = _SURROGATE.sub("\ufffd", texts[i])
        if sentences is not None:
            sentences[i] = [_SURROGATE.sub("\ufffd", x) for x in sentences[i]]
    for i in cut:
        texts[i] = texts[i][:limit]
        if sentences is not None:  # the sentences that fit, the last one cut
            kept, used = [], 0
            for x in sentences[i]:
                if used >= limit:
                    break
                kept.append(x[: limit - used])
                used += len(x) + 1
            sentences[i] = kept
    return texts, sentences, ({"cut_documents": len(cut), "first_cut_document": f"document {cut[0]}"} if cut else {})


def _is_missing(label) -> bool:
    """None, NaN (float or NumPy) and pandas' NA / NaT: what a missing value in a data frame's column is."""
    if label is None or type(label).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(label, (float, np.floating)) and bool(np.isnan(label))


def _sort_key(label: Hashable) -> tuple:
    # ints sort numerically before strings so "2" < "10" holds for rating labels
    return (0, label, "") if isinstance(label, int) else (1, 0, str(label))


class LabelMap:
    """Ordered classes; index i is the model's output i. Saved as a JSON list in config.json.

    A multi-label map (``multi_label``) gives each document a set of classes: output i is the probability
    that class i applies, and ``thresholds`` (one per class, tuned on validation) decide which do. It is
    saved as {"classes", "multi_label", "thresholds"}.
    """

    DEFAULT_THRESHOLD = 0.5  # a class applies when its probability reaches this, until thresholds are tuned

    def __init__(
        self, classes: Iterable[Hashable], multi_label: bool = False, thresholds=None, at_least_one: bool = False
    ):
        self.multi_label = bool(multi_label)
        # multi-label: every training document had a label, so no document is given none (``decide``)
        self.at_least_one = bool(at_least_one)
        self.thresholds = None if thresholds is None else np.asarray(thresholds, dtype=np.float64)
        self.classes: list[Hashable] = list(classes)
        if self.thresholds is not None and self.thresholds.shape != (len(self.classes),):
            raise DataError(f"{len(self.thresholds)} decision thresholds for {len(self.classes)} classes")
        if not self.classes:
            raise DataError("no classes: the training data has no labels")
        for label in self.classes:
            if not _survives_json(label):
                raise DataError(
                    f"label {label!r} ({type(label).__name__}) cannot be saved with the model: "
                    "labels must be str, int, float, bool or tuples of those"
                )
        self.index = {c: i for i, c in enumerate(self.classes)}
        if len(self.index) != len(self.classes):
            raise DataError(f"duplicate class names in {self.classes!r}")
        # JSON output, reports and text files name a class by its text: 1 and "1" would be one name for two classes
        self.by_text = {}
        for label in self.classes:
            other = self.by_text.setdefault(str(label), label)
            if other is not label:
                raise DataError(
                    f"labels {other!r} ({type(other).__name__}) and {label!r} ({type(label).__name__}) are "
                    "written the same way; use one type for all labels"
                )

    @classmethod
    def from_labels(
        cls, labels: Iterable[Hashable], classes: Sequence[Hashable] | None = None, multi_label: bool = False
    ) -> LabelMap:
        """Classes in the source's order when given, else sorted; labels outside ``classes`` are an error.
        ``multi_label``: each of ``labels`` is a tuple of classes."""
        labels = list(labels)
        if multi_label:
            labels = [x for y in labels for x in y]
        for i, label in enumerate(labels):
            _check_hashable(label, i)
        seen = set(labels)
        if classes is not None:
            unknown = seen - set(classes)
            if unknown:
                raise DataError(f"labels {sorted(map(str, unknown))} are not among the classes {list(classes)}")
            return cls(classes, multi_label)
        return cls(sorted(seen, key=_sort_key), multi_label)

    def encode(self, labels: Iterable[Hashable], source: str = "", ids: Sequence[str] | None = None) -> list[int]:
        """Indices of ``labels``; a label unseen in training is a clear error naming it and where it is.

        ``ids`` are the documents' ids as readers give them (a line number, an archive member),
        so the error points at ``source:id`` rather than at a position the user has to count.
        """
        out = []
        for i, label in enumerate(labels):
            _check_hashable(label, i, source, ids)
            idx = self._index_of(label)
            if idx is None:
                raise DataError(
                    f"{_document(i, source, ids)} has label {label!r}, unseen in training (known: {self.classes})"
                )
            out.append(idx)
        return out

    def encode_sets(self, labels: Iterable[tuple]) -> tuple[np.ndarray, int]:
        """(n_documents, n_classes) 0/1 matrix of multi-label ``labels``, and how many labels were dropped
        as unseen in training: a rare label only in the test split is common, and no model can predict it."""
        rows = list(labels)
        matrix = np.zeros((len(rows), len(self.classes)), dtype=np.int8)
        unseen = 0
        for i, row in enumerate(rows):
            for label in row:
                idx = self._index_of(label)
                if idx is None:
                    unseen += 1
                else:
                    matrix[i, idx] = 1
        return matrix, unseen

    def _index_of(self, label: Hashable) -> int | None:
        idx = self.index.get(label)
        if idx is None:  # "3", "True" or "1.5" from a text file vs 3, True or 1.5 in the map, and the reverse
            text = label if isinstance(label, str) else str(label)
            idx = self.index[self.by_text[text]] if text in self.by_text else None
        if idx is None and isinstance(label, str) and re.fullmatch(r"[+-]?[0-9]+", label.strip()):
            idx = self.index.get(int(label))  # "03" (a label folder) vs 3; never a bool class (1 == True)
            idx = idx if idx is not None and type(self.classes[idx]) is int else None
        return idx

    def decide(self, probs: np.ndarray) -> np.ndarray:
        """0/1 decisions of multi-label probabilities (n, n_classes): each class against its threshold."""
        probs = np.asarray(probs)
        cut = self.thresholds if self.thresholds is not None else self.DEFAULT_THRESHOLD
        decisions = (probs >= cut).astype(np.int8)
        none = np.flatnonzero(~decisions.any(1)) if self.at_least_one and decisions.size else []
        if len(none):  # an empty answer is certainly wrong: the class nearest its own threshold
            ratio = probs[none] / np.maximum(np.broadcast_to(cut, probs.shape[1:]), 1e-12)
            decisions[none, ratio.argmax(1)] = 1
        return decisions

    def decode_sets(self, decisions: np.ndarray) -> list[list[Hashable]]:
        return [[self.classes[j] for j in np.flatnonzero(row)] for row in np.asarray(decisions)]

    def decode(self, indices: Iterable[int]) -> list[Hashable]:
        return [self.classes[int(i)] for i in indices]

    def __len__(self) -> int:
        return len(self.classes)

    def to_json(self) -> list[Any] | dict:
        classes = [_to_json(c) for c in self.classes]
        if not self.multi_label:
            return classes
        thresholds = None if self.thresholds is None else [round(float(t), 6) for t in self.thresholds]
        return {"classes": classes, "multi_label": True, "thresholds": thresholds, "at_least_one": self.at_least_one}

    @classmethod
    def from_json(cls, data: list[Any] | dict) -> LabelMap:
        if isinstance(data, dict):
            if not isinstance(data.get("classes"), list):
                raise DataError("saved labels have no list of classes")
            classes = (_from_json(c) for c in data["classes"])
            multi, thresholds = bool(data.get("multi_label")), data.get("thresholds")
            return cls(classes, multi, thresholds, bool(data.get("at_least_one", False)))
        return cls(_from_json(c) for c in data)


def _document(i: int, source: str, ids: Sequence[str] | None) -> str:
    """'reviews.csv:13: the document' when the reader gave it an id of its own, else 'document i'."""
    if ids is not None and i < len(ids) and str(ids[i]) != str(i):
        return f"{source or 'input'}:{ids[i]}: the document"
    return f"{source}: document {i}" if source else f"document {i}"


def _check_hashable(label: Any, i: int, source: str = "", ids: Sequence[str] | None = None) -> None:
    try:
        hash(label)
    except TypeError as err:
        raise DataError(
            f"{_document(i, source, ids)} has label {label!r}, which cannot be a label ({err}); "
            "use str, int, float, bool or a tuple"
        ) from None


# JSON has no tuples; a label is never a list (unhashable), so a list in saved labels is a tuple
def _to_json(label: Any) -> Any:
    return [_to_json(x) for x in label] if isinstance(label, tuple) else label


def _from_json(value: Any) -> Any:
    return tuple(_from_json(x) for x in value) if isinstance(value, list) else value


def _survives_json(label: Any) -> bool:
    """Whether config.json gives ``label`` back equal (frozensets and objects do not)."""
    try:
        return _from_json(json.loads(json.dumps(_to_json(label)))) == label
    except (TypeError, ValueError):
        return False
