"""Delimited text: CSV and TSV, with text and label columns chosen by header name or index."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager
from itertools import chain, islice
from typing import Any

from docattn.data.corpus import Corpus
from docattn.data.readers.base import (
    _INTEGER,
    _Documents,
    _integer_labels,
    _label_set,
    _missing_label,
    _opened,
    _Source,
    _source_lines,
)
from docattn.data.readers.decoding import _BLOCK, _line_limit
from docattn.data.readers.stdin import _stdin
from docattn.errors import ConfigError, DataError

_SAMPLE_ROWS = 200  # rows looked at to sniff a CSV header


def _read_csv(source: _Source) -> Corpus:
    return _read_delimited(source, ",")


def _read_tsv(source: _Source) -> Corpus:
    """Tab-separated values, quoted as a CSV writer quotes them (pandas) or not at all (GLUE, most
    tools): a file that does not parse as quoted, a text field starting with a bare quote say, is
    read again with quotes as ordinary characters. A quoted field holding both a line break and a
    tab reads as CSV quoting says, one field, but is counted (``stats["quoted_tab_breaks"]``, with the
    first one's lines): a bare opening quote whose partner happened to sit before a tab looks the
    same, and merges the records between them, so it is said, never silent."""
    if source.open is _stdin:  # read twice at most, so keep what stdin gave, on disk past 16 MiB
        with _opened(source) as stream:
            mode = "w+" if isinstance(stream, io.TextIOBase) else "w+b"
            kept = tempfile.SpooledTemporaryFile(16 << 20, mode=mode)  # noqa: SIM115 (read again below, then dropped)
            shutil.copyfileobj(stream, kept, _BLOCK)

        def reopen() -> AbstractContextManager[Any]:
            kept.seek(0)
            return contextlib.nullcontext(kept)

        source = dataclasses.replace(source, open=reopen)
    try:
        return _read_delimited(source, "\t")
    except _QuotingError:
        return _read_delimited(source, "\t", quoted=False)


class _QuotingError(DataError):
    """A record the csv module could not parse with quotes."""


def _read_delimited(source: _Source, default_delimiter: str, quoted: bool = True) -> Corpus:
    """Chosen text column(s) and a label column, by header name or 0-based index; with ``label_sep`` the label
    cell holds several labels (stripped, blanks dropped, each once): a multi-label corpus."""
    options = source.options
    delimiter = options.get("delimiter") or default_delimiter
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ConfigError(f"delimiter must be one character, not {delimiter!r}")
    header = options.get("header")
    if header not in (True, False, None):
        raise ConfigError(f"header must be True, False or None (sniff), not {header!r}")
    text_columns = options.get("text_columns")
    if text_columns is not None and not isinstance(text_columns, (list, tuple)):
        text_columns = [text_columns]
    label_column = options.get("label_column")
    label_sep = options.get("label_sep")  # several labels in one cell: a multi-label corpus
    if label_sep is not None and (not isinstance(label_sep, str) or not label_sep):
        raise ConfigError(f"label_sep must be a non-empty string (e.g. ','), not {label_sep!r}")

    docs = _Documents(source.name, options.get("on_empty", "skip"))
    with _opened(source) as stream:
        rows = _csv_rows(
            _source_lines(stream, source, docs.stats, "error"),
            source.name,
            delimiter,
            quoted,
            docs.stats if quoted and delimiter == "\t" else None,
        )
        sample = list(islice(rows, _SAMPLE_ROWS))
        if not sample:
            raise DataError(f"no documents in {source.name}")
        columns = _resolve_columns(sample, list(text_columns or []), label_column, header, source.name, delimiter)
        text_index, label_index, has_header = columns
        if options.get("ignore_labels"):
            label_index = None
        width = max(text_index + ([label_index] if label_index is not None else [])) + 1
        for line, row in chain(sample[1:] if has_header else sample, rows):
            where = f"{source.name}:{line}"
            if len(row) < width:
                raise DataError(f"{where}: expected at least {width} fields, found {len(row)}")
            label = None
            if label_index is not None:
                label = row[label_index].strip()
                if label_sep is not None:  # an empty cell is a document with no labels
                    label = _label_set(label.split(label_sep))
                elif not label:
                    raise _missing_label(where, f"column {label_index}")
            text = "\n".join(part for part in (row[i] for i in text_index) if part and not part.isspace())
            docs.add(where, str(line), text, label)
    if label_index is not None:
        docs.labels = _integer_labels(docs.labels)
    return docs.corpus(labeled=label_index is not None, multi_label=label_index is not None and label_sep is not None)


def _csv_rows(
    lines: Iterator[str], source: str, delimiter: str, quoted: bool = True, stats: dict | None = None
) -> Iterator[tuple[int, list[str]]]:
    """(first line number, fields) of each non-blank record; quoting errors name the line. With
    ``stats``, records whose quoted field holds a line break and the delimiter are counted there."""
    limit = _line_limit()  # documents are longer than the 128 KiB default; an unclosed quote must not take the file
    csv.field_size_limit(limit)
    if quoted:
        reader = csv.reader(lines, delimiter=delimiter, strict=True)
    else:
        reader = csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            if "field larger than field limit" in str(error):
                raise _QuotingError(
                    f"{source}:{start}: a field longer than {limit:,} characters (8 x "
                    f"DOCATTN_MAX_DOCUMENT_CHARS), or a quote that never closes; raise "
                    "DOCATTN_MAX_DOCUMENT_CHARS if the document is that long"
                ) from None
            raise _QuotingError(f"{source}:{start}: malformed CSV record ({error})") from None
        if stats is not None and reader.line_num > start and any(_spans_records(f, delimiter) for f in row):
            stats["quoted_tab_breaks"] = stats.get("quoted_tab_breaks", 0) + 1
            stats.setdefault("first_quoted_tab_break", f"{source}:{start}-{reader.line_num}")
        if row:
            yield start, row


def _spans_records(field: str, delimiter: str) -> bool:
    """Whether a field holds a line break and the delimiter: maybe records swallowed by a quote."""
    return "\n" in field and delimiter in field


def _resolve_columns(
    sample: list[tuple[int, list[str]]],
    text_columns: list[Any],
    label_column: Any,
    header: bool | None,
    source: str,
    delimiter: str,
) -> tuple[list[int], int | None, bool]:
    """Column indexes of the text(s) and the label, and whether the first row is a header."""
    line, first = sample[0]
    named = [c for c in [*text_columns, label_column] if isinstance(c, str)]
    if header is False and named:
        raise ConfigError(f"{source}: columns {named} are names, but header=False; use 0-based indexes")
    if header is None:
        if named:
            header = True
        elif not text_columns:
            header = bool({"text", "label"} & {cell.strip() for cell in first})
        else:
            header = _looks_like_header(sample, label_column, delimiter)
    names = [cell.strip() for cell in first] if header else None
    if not text_columns:
        if names is None:
            preview = ", ".join(repr(cell[:20]) for cell in first[:6])
            raise DataError(
                f"{source}:{line}: no header row with a 'text' column (first row: {preview}); "
                "pass text_columns= and label_column= (names or 0-based indexes; "
                "on the command line --text-col and --label-col)"
            )
        text_columns = ["text"]
        if label_column is None and "label" in names:
            label_column = "label"

    def index(column: Any) -> int:
        if isinstance(column, str):
            if column not in names:  # type: ignore[operator]
                raise DataError(f"{source}:{line}: no column {column!r} in the header (columns: {', '.join(names)})")  # type: ignore[arg-type]
            return names.index(column)  # type: ignore[union-attr]
        if isinstance(column, bool) or not isinstance(column, int) or column < 0:
            raise ConfigError(f"a column is a header name or a 0-based index, not {column!r}")
        if names is not None and column >= len(names):
            raise DataError(
                f"{source}:{line}: column {column} out of range: the header has {len(names)} "
                f"columns ({', '.join(names)})"
            )
        return column

    text_index = [index(c) for c in text_columns]
    label_index = None if label_column is None else index(label_column)
    return text_index, label_index, bool(header)


def _looks_like_header(sample: list[tuple[int, list[str]]], label_column: Any, delimiter: str) -> bool:
    """Sniff a header row: its label cell is unlike the labels below it, else csv.Sniffer decides."""
    first, rest = sample[0][1], [row for _, row in sample[1:]]
    if isinstance(label_column, int) and rest:
        head = first[label_column].strip() if len(first) > label_column else ""
        labels = [row[label_column].strip() for row in rest if len(row) > label_column]
        if labels and all(_INTEGER.fullmatch(v) for v in labels):
            return not _INTEGER.fullmatch(head)
        if head in labels:
            return False
        if len(set(labels)) < len(labels):  # labels repeat below, the first cell never: a column name
            return True
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter).writerows([first, *rest[:20]])
    try:
        return csv.Sniffer().has_header(buffer.getvalue())
    except csv.Error:
        return False
