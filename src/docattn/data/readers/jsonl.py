"""JSON Lines: one object per line, its text a string or a list of sentences."""

from __future__ import annotations

import json
import math
from collections.abc import Hashable
from typing import Any

from docattn.data.corpus import Corpus
from docattn.data.readers.base import _Documents, _label_set, _missing_label, _numbered_lines, _Source
from docattn.data.readers.decoding import _clean
from docattn.errors import DataError


def _read_jsonl(source: _Source) -> Corpus:
    """One JSON object per line; label values keep their JSON types; the text is a string or a list of
    sentences; an "id" field (string or number) is the document's id, else its line number. A label that
    is a list makes a multi-label corpus (bare labels beside it become 1-tuples; [] is no label)."""
    options = source.options
    text_field = options.get("text_field") or "text"
    label_field = options.get("label_field")
    label_required = label_field is not None  # the default "label" may be absent: unlabelled input
    label_field = label_field or "label"
    sentences_field = options.get("sentences_field") or "sentences"
    docs = _Documents(source.name, options.get("on_empty", "skip"))
    first_unlabeled, any_labeled, multi = None, False, False
    for line, raw in _numbered_lines(source, docs.stats, "error"):
        if not raw.strip():
            continue
        where = f"{source.name}:{line}"
        try:
            record = json.loads(raw, strict=False)
        except json.JSONDecodeError as error:
            raise DataError(
                f"{where}: malformed JSON ({error.msg} at column {error.colno}); expected one JSON object per line"
            ) from None
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected a JSON object per line, found {type(record).__name__}")
        sentences = _json_sentences(record, sentences_field, where)
        if text_field in record and isinstance(record[text_field], list):  # a list of sentences, as fit() takes them
            listed = _json_sentences(record, text_field, where)
            sentences = listed if sentences is None else sentences
            text = "\n".join(listed)
        elif text_field in record:
            text = record[text_field]
            if not isinstance(text, str):
                raise DataError(
                    f"{where}: field {text_field!r} must be a string or a list of sentences, "
                    f"found {type(text).__name__}"
                )
            text = _clean(text)
        elif sentences is not None:
            text = "\n".join(sentences)
        else:
            raise DataError(
                f"{where}: no field {text_field!r} (fields: {', '.join(map(str, record))}); "
                "pass text_field= (on the command line --text-col)"
            )
        label = None
        if options.get("ignore_labels"):
            pass  # labels are not read (prediction input): a missing one is no error
        elif label_field in record:
            any_labeled = True
            label = _json_label(record[label_field], label_field, where)
            multi = multi or isinstance(label, tuple)
        elif label_required:
            raise DataError(
                f"{where}: no field {label_field!r} (fields: {', '.join(map(str, record))}); "
                "pass label_field= (on the command line --label-col)"
            )
        elif first_unlabeled is None:
            first_unlabeled = where
        doc_id = record.get("id")  # the document's own id, which predict writes back; else its line number
        if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool) or doc_id == "":
            doc_id = line
        docs.add(where, str(doc_id), text, label, sentences, record.get("rationale"))
    if any_labeled and first_unlabeled is not None:
        raise _missing_label(first_unlabeled, f"field {label_field!r}, present on other lines")
    return docs.corpus(labeled=any_labeled or label_required, multi_label=multi)


def _json_label(value: Any, field_name: str, where: str) -> Hashable:
    """One label (a string, a number), or a list of them: a multi-label document (an empty list: no labels)."""
    if isinstance(value, list):
        for item in value:
            if item is None or isinstance(item, (list, dict)) or (isinstance(item, str) and not item.strip()):
                shown = "an empty string" if isinstance(item, str) else "null" if item is None else type(item).__name__
                raise DataError(
                    f"{where}: the label list in field {field_name!r} holds {shown}; "
                    "give each label as a non-empty string or a number"
                )
            _check_label(item, field_name, where)
        return _label_set(value)
    if isinstance(value, str):
        value = value.strip()
    if value is None or value == "":
        raise _missing_label(where, f"field {field_name!r}")
    _check_label(value, field_name, where)
    return value


def _check_label(label: Any, field_name: str, where: str) -> None:
    """A DataError for a value that can be no class: NaN, infinities, objects."""
    if isinstance(label, float) and not math.isfinite(label):  # json reads NaN: equal to no label, not even itself
        spelling = "NaN" if label != label else "Infinity" if label > 0 else "-Infinity"
        raise DataError(
            f"{where}: label {spelling} in field {field_name!r} is no class; labels must be strings or integers"
        )
    if not isinstance(label, Hashable):
        raise DataError(f"{where}: label must be a string or a number, found {type(label).__name__}")


def _json_sentences(record: dict, field_name: str, where: str) -> list[str] | None:
    value = record.get(field_name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise DataError(f"{where}: field {field_name!r} must be a list of strings")
    return [stripped for s in value if (stripped := _clean(s).strip())]
