"""The one-document-a-line formats of the papers and tools: Zhang et al.'s CSVs, Tang et al.'s ``.ss``,
fastText's ``__label__`` lines and plain lines."""

from __future__ import annotations

import re
from collections.abc import Hashable

from docattn.data.corpus import Corpus
from docattn.data.readers.base import (
    _INTEGER,
    _Documents,
    _integer_labels,
    _label_set,
    _missing_label,
    _numbered_lines,
    _opened,
    _Source,
    _source_lines,
)
from docattn.data.readers.decoding import _clean, _decode_document
from docattn.data.readers.delimited import _csv_rows
from docattn.errors import DataError

_FASTTEXT_LABELS = re.compile(r"\s*((?:__label__\S*(?:\s+|$))+)")


def _read_zhang(source: _Source) -> Corpus:
    """Zhang et al. 2015: "class","title","text" (more text columns for Yahoo), classes 1-based."""
    docs = _Documents(source.name, source.options.get("on_empty", "skip"))
    classes = source.classes
    with _opened(source) as stream:
        for line, row in _csv_rows(_source_lines(stream, source, docs.stats, "error"), source.name, ","):
            where = f"{source.name}:{line}"
            if len(row) < 2:
                raise DataError(f"{where}: expected a class and at least one text field, found {len(row)} field(s)")
            class_id = row[0].strip()
            if not class_id:
                raise _missing_label(where, "the class column")
            if not _INTEGER.fullmatch(class_id):
                raise DataError(f"{where}: expected a 1-based class number in the first column, found {class_id!r}")
            label: Hashable = int(class_id)
            if classes is not None:
                if not 1 <= int(class_id) <= len(classes):
                    raise DataError(
                        f"{where}: class {class_id} is outside 1-{len(classes)} "
                        f"({source.classes_name} lists {len(classes)} classes)"
                    )
                label = classes[int(class_id) - 1]
            parts = _zhang_unescape(row[1:])
            # a blank line between title, description (and answer): each field is its own sentence
            text = "\n\n".join(part for part in parts if part and not part.isspace())
            docs.add(where, str(line), text, label)
    return docs.corpus(labeled=True, classes=list(classes) if classes is not None else None)


_NOT_A_NEWLINE_ESCAPE = re.compile(r"\\(?!n)")
_BACKSLASH_RUN = re.compile(r"\\+")


def _zhang_unescape(fields: list[str]) -> list[str]:
    """Line breaks in Zhang et al.'s CSVs: "\\n" in Yelp, Yahoo and Amazon, but runs of backslashes in
    AG News ("worm\\Sasser", "results.\\\\Using"), where "social\\network" is a break before "network".
    A record with any backslash that is no "\\n" is read the AG way: each run of them is a break."""
    if any(_NOT_A_NEWLINE_ESCAPE.search(f) for f in fields):
        return [_BACKSLASH_RUN.sub("\n", f) for f in fields]
    return [f.replace("\\n", "\n") for f in fields]


_CLASSES_BYTES = 1 << 20  # a classes.txt names a few dozen classes


def _read_classes(data: bytes, where: str) -> list[str]:
    if len(data) > _CLASSES_BYTES:
        raise DataError(f"{where}: over {_CLASSES_BYTES:,} bytes; expected one class name per line")
    names = [line.strip() for line in _clean(_decode_document(data, where, "strict", {})).splitlines() if line.strip()]
    if not names:
        raise DataError(f"{where}: no class names (expected one per line)")
    if len(set(names)) != len(names):
        raise DataError(f"{where}: duplicate class names in {names}")
    return names


def _read_tang(source: _Source) -> Corpus:
    """Tang et al. 2015 ``user\\t\\tproduct\\t\\trating\\t\\ttext``, sentences split by <sssss>."""
    docs = _Documents(source.name, source.options.get("on_empty", "skip"))
    for line, raw in _numbered_lines(source, docs.stats):
        if not raw.strip():
            continue
        where = f"{source.name}:{line}"
        fields = raw.split("\t\t", 3)
        if len(fields) < 4:
            raise DataError(
                f"{where}: expected 4 fields separated by two tabs (user, product, rating, text), found {len(fields)}"
            )
        rating = fields[2].strip()
        if not rating:
            raise _missing_label(where, "the rating field")
        if not _INTEGER.fullmatch(rating):
            raise DataError(f"{where}: expected an integer rating in the third field, found {rating!r}")
        sentences = [s for part in fields[3].split("<sssss>") if (s := part.strip())]
        docs.add(where, str(line), "\n".join(sentences), int(rating), sentences)
    return docs.corpus(labeled=True)


# --------------------------------------------------------------------------- fasttext / lines


def _read_fasttext(source: _Source) -> Corpus:
    """``__label__x text``; several label prefixes (``__label__a __label__b text``) make the document, and so
    the corpus, multi-label: each document then has a tuple of its labels."""
    docs = _Documents(source.name, source.options.get("on_empty", "skip"))
    multi = False
    for line, raw in _numbered_lines(source, docs.stats):
        if not raw.strip():
            continue
        where = f"{source.name}:{line}"
        match = _FASTTEXT_LABELS.match(raw)
        if match is None:
            raise DataError(f"{where}: expected the line to start with __label__<label>, found {raw[:40]!r}")
        labels = [token[len("__label__") :] for token in match.group(1).split()]
        if not all(labels):
            raise _missing_label(where, "nothing after __label__")
        label: Hashable = labels[0] if len(labels) == 1 else _label_set(labels)
        multi = multi or len(labels) > 1
        docs.add(where, str(line), raw[match.end() :], label)
    docs.labels = _integer_labels(docs.labels)
    return docs.corpus(labeled=True, multi_label=multi)


def _read_lines(source: _Source) -> Corpus:
    """One unlabelled document per line (prediction input); ids are the line numbers."""
    docs = _Documents(source.name, source.options.get("on_empty", "skip"))
    for line, raw in _numbered_lines(source, docs.stats):
        docs.add(f"{source.name}:{line}", str(line), raw)
    return docs.corpus(labeled=False)
