"""JSON Lines: one object per line, its text a string or a list of sentences."""

from __future__ import annotations

import json
import math
from collections.abc import Hashable

from docattn.data.corpus import Corpus
from docattn.data.readers.base import _Documents, _missing_label, _numbered_lines, _Source
from docattn.data.readers.decoding import _clean
from docattn.errors import DataError


def _read_jsonl(source: _Source) -> Corpus:
    """One JSON object per line; label values keep their JSON types; the text is a string or a list of
    sentences; an "id" field (string or number) is the document's id, else its line number."""
    options = source.options
    text_field = options.get("text_field") or "text"
    label_field = options.get("label_field")
    label_required = label_field is not None  # the default "label" may be absent: unlabelled input
    label_field = label_field or "label"
    sentences_field = options.get("sentences_field") or "sentences"
    docs = _Documents(source.name, options.get("on_empty", "skip"))
    first_unlabeled, any_labeled = None, False
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
        label = record.get(label_field)
        if options.get("ignore_labels"):
            label = None
        elif label_field in record:
            any_labeled = True
            if isinstance(label, str):
                label = label.strip()
            if label is None or label == "":
                raise _missing_label(where, f"field {label_field!r}")
            if isinstance(label, float) and not math.isfinite(
                label
            ):  # json reads NaN: equal to no label, not even itself
                spelling = "NaN" if label != label else "Infinity" if label > 0 else "-Infinity"
                raise DataError(
                    f"{where}: label {spelling} in field {label_field!r} is no class; "
                    "labels must be strings or integers"
                )
            if not isinstance(label, Hashable):
                raise DataError(f"{where}: label must be a string or a number, found {type(label).__name__}")
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
    return docs.corpus(labeled=any_labeled or label_required)


def _json_sentences(record: dict, field_name: str, where: str) -> list[str] | None:
    value = record.get(field_name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise DataError(f"{where}: field {field_name!r} must be a list of strings")
    return [stripped for s in value if (stripped := _clean(s).strip())]
