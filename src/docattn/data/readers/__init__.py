"""Readers for the corpus formats docattn trains on: a path in, :class:`Corpus` splits out.

``read_splits`` returns every split a source holds ("train", "valid", "test"; "all" for a source
without splits), ``read_corpus`` one of them. Formats: csv, tsv, jsonl, zhang (Zhang et al. 2015
CSVs), tang (Tang et al. 2015 ``.ss``), folder (folder-per-label trees, also inside .tar.gz/.zip),
fasttext, lines, parquet (``.parquet`` files), arrow (``.arrow``/``.feather`` files and Hugging Face
datasets saved with ``save_to_disk``; both need pyarrow, ``pip install 'docattn[parquet]'``) and reuters
(Reuters-21578's ``reut2-*.sgm``, as the ModApte split). A multi-label corpus (``Corpus.multi_label``)
gives each document a tuple of labels: from JSON label lists, ``label_sep`` in a CSV/TSV/Parquet cell,
several ``__label__`` prefixes, list columns, Reuters topics, or ``multi_label=True`` on any format. Bad
input is always a one-line :class:`DataError` naming the file, the line, row or archive member, and what
was expected.

This module dispatches a path to its reader: ``detection`` tells the format, ``decoding`` turns bytes into
text, ``delimited`` (csv, tsv), ``jsonl`` and ``line_formats`` (zhang, tang, fasttext, lines) read one file,
``trees`` and ``folders`` read folders and archives, whose members ``archives`` walks and checks (the same
walk unpacks ``docattn data download``'s archives); ``reuters`` reads the SGML files of a tree, ``table``
(with ``table_layout`` finding splits and class names) Parquet and Arrow tables; ``stdin`` reads "-".
``iter_chunks`` (``stream``) reads any of them in chunks of documents, in memory bounded by the chunk size.

Memory is bounded by settings, never by the input's size. Each limit is an environment variable,
read whenever a reader runs (the same for the CLI, Python code and tests), else the default below:

- ``DOCATTN_MAX_DOCUMENT_CHARS`` (1,000,000): a longer document is cut there and counted in the
  corpus ``stats["cut_documents"]`` (``stats["first_cut_document"]`` names the first). A line is
  read in blocks: past 8x this many bytes the rest of it is dropped unread; a CSV or JSON record
  that long is refused, since cut short it would read wrong.
- ``DOCATTN_MAX_MEMBER_BYTES`` (256 MiB): an archive member is held in memory whole, so a larger
  one is refused from its header, before it is read (unpack the archive and read the folder).
- ``DOCATTN_MAX_COMPRESSION_RATIO`` (100): members, and archives, over 8 MiB that unpack to more
  than this many times their compressed size are refused unread (text compresses about 3:1, a
  compression bomb about 1000:1). ``docattn data download`` applies it too (see data/download.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docattn.data.corpus import Corpus
from docattn.data.limits import MAX_COMPRESSION_RATIO, MAX_DOCUMENT_CHARS  # noqa: F401 (readers.X, where first defined)
from docattn.data.readers import plain_tar
from docattn.data.readers.archives import check_ratio as check_ratio
from docattn.data.readers.base import _SPLIT_ALIASES as _SPLIT_ALIASES
from docattn.data.readers.base import FORMATS, STDIN, _existing, _read_bytes, _select_splits, _Source
from docattn.data.readers.delimited import _read_csv, _read_tsv
from docattn.data.readers.detection import _detect_file, _detect_tree, _is_archive
from docattn.data.readers.folders import (
    _count_skipped_links,
    _read_folder,
    _read_folder_texts,
    _tang_sources,
    _zhang_sources,
)
from docattn.data.readers.jsonl import _read_jsonl
from docattn.data.readers.line_formats import (
    _CLASSES_BYTES,
    _read_classes,
    _read_fasttext,
    _read_lines,
    _read_tang,
    _read_zhang,
)
from docattn.data.readers.reuters import read_reuters
from docattn.data.readers.stdin import _stdin, _stdin_format
from docattn.data.readers.stream import iter_chunks
from docattn.data.readers.table import read_table_splits
from docattn.data.readers.trees import _archive_tree as _archive_tree
from docattn.data.readers.trees import _directory_tree as _directory_tree
from docattn.data.readers.trees import _open_tree, _Tree, file_tree
from docattn.data.readers.trees import walk as walk
from docattn.errors import ConfigError, DataError

__all__ = ["FORMATS", "STDIN", "detect_format", "iter_chunks", "read_corpus", "read_splits", "read_texts"]

# the "x as x" imports above, and this, keep the names other modules and tests take from here
_NotPlainTar = plain_tar.NotPlainTar

# formats read line by line from one file (or stdin); the rest need a directory or an archive
_LINE_FORMATS = ("csv", "tsv", "jsonl", "zhang", "tang", "fasttext", "lines")
_OPTIONS = {
    "csv": {"text_columns", "label_column", "header", "delimiter", "label_sep"},
    "tsv": {"text_columns", "label_column", "header", "delimiter", "label_sep"},
    "jsonl": {"text_field", "label_field", "sentences_field"},
    "parquet": {"text_columns", "label_column", "label_sep"},
    "arrow": {"text_columns", "label_column", "label_sep"},
}
_COMMON_OPTIONS = {"on_empty", "errors", "ignore_labels", "multi_label"}
_DECODE_ERRORS = ("strict", "replace", "latin-1")  # what a line or file that is not UTF-8 becomes


def read_splits(path: str | os.PathLike, format: str | None = None, **options: Any) -> dict[str, Corpus]:
    """Every split of ``path``, keyed "train"/"valid"/"test", or {"all": corpus} when it has none.

    Options: ``on_empty`` ("skip": drop empty documents and count them in
    ``stats["skipped_empty"]``; "error"); ``errors``, what text that is not UTF-8 becomes
    ("strict": a DataError naming the line, the default for files read line by line; "latin-1":
    Latin-1 text, the default for folder-per-label documents, each file with its own encoding, e.g.
    20 Newsgroups posts, and for Reuters SGML; "replace": U+FFFD; both counted in ``stats["decode_errors"]``); plus per
    format: csv/tsv ``text_columns``, ``label_column``, ``header``, ``delimiter``, ``label_sep``;
    parquet/arrow ``text_columns``, ``label_column``, ``label_sep``; jsonl ``text_field``,
    ``label_field``, ``sentences_field``. ``label_sep`` (e.g. ","): a label cell holds several labels,
    stripped, blanks dropped, each kept once; an empty cell is a document with no labels.
    ``multi_label=True``: every document's labels are a tuple, whatever the format; a folder tree then
    reads a file whose name is under several label folders, with the same text, as one document with
    all their labels (``stats["merged_documents"]``). UTF-16/32 text with a byte-order mark is
    decoded; without one it is a DataError. ``ignore_labels``: labels are not read, and a missing
    or empty one is no error (prediction input); the corpora have ``labels`` None. A document longer
    than $DOCATTN_MAX_DOCUMENT_CHARS is cut, counted in ``stats["cut_documents"]`` (limits: see the
    module docstring). Formats: see the module docstring and docs/formats.md.
    """
    return _finish(_read(path, format, options, split=None, single=False), options)


def read_corpus(path: str | os.PathLike, split: str | None = None, format: str | None = None, **options: Any) -> Corpus:
    """One split of ``path`` ("-" reads stdin, as "lines" unless ``format`` says otherwise).

    ``split`` may be left out only when the source has a single split; options as in
    :func:`read_splits`.
    """
    splits = _finish(_read(path, format, options, split=split, single=True), options)
    return next(iter(splits.values()))


def read_texts(path: str | os.PathLike, format: str | None = None, **options: Any) -> Corpus:
    """Unlabelled text for word vectors: the documents of the training split of ``path`` (all of
    it when the source has no splits), labels ignored.

    Folder trees also give their unlabelled folders (aclImdb's 50,000 reviews in train/unsup).
    A test split is never read, so test text cannot reach the vectors. Options as in
    :func:`read_splits`.
    """
    source = None if str(path) == STDIN else _existing(path)
    if source is not None and (source.is_dir() or _is_archive(source)):
        tree = _open_tree(source)
        if (format or _detect_tree(tree)) == "folder":
            _format_options("folder", options)
            corpus = _read_folder_texts(tree, options.get("on_empty", "skip"), options.get("errors", "latin-1"))
            return _count_skipped_links(tree, {"train": corpus})["train"]
    splits = read_splits(path, format, **options)
    name = "train" if "train" in splits else "all"
    if name not in splits:
        raise DataError(f"{path}: no training split to take text from (splits: {', '.join(splits)})")
    corpus = splits[name]
    corpus.labels = None
    return corpus


def detect_format(path: str | os.PathLike) -> str:
    """The format ``path`` will be read as, from its name, its folder layout or its first line."""
    if str(path) == STDIN:
        return _stdin_format()
    source = _existing(path)
    if source.is_dir() or _is_archive(source):
        return _detect_tree(_open_tree(source, keep_data=False))
    return _detect_file(source)


def _read(
    path: str | os.PathLike, format: str | None, options: dict[str, Any], split: str | None, single: bool
) -> dict[str, Corpus]:
    if format is not None and format not in FORMATS:
        raise ConfigError(f"unknown format {format!r}; formats: {', '.join(FORMATS)}")
    on_empty = options.get("on_empty", "skip")
    if on_empty not in ("skip", "error"):
        raise ConfigError(f"on_empty must be 'skip' or 'error', not {on_empty!r}")
    if options.get("errors", "strict") not in _DECODE_ERRORS:
        raise ConfigError(f"errors must be one of {', '.join(_DECODE_ERRORS)}, not {options['errors']!r}")
    if options.get("multi_label", False) not in (True, False):
        raise ConfigError(f"multi_label must be True or False, not {options['multi_label']!r}")

    if str(path) == STDIN:
        format = format or _stdin_format()
        if format not in _LINE_FORMATS:
            raise DataError(
                f"stdin: format {format!r} cannot be read from stdin; stdin reads {', '.join(_LINE_FORMATS)}"
            )
        options = _format_options(format, options)
        _select_splits(["all"], split, single, "<stdin>")
        return {"all": _READERS[format](_Source("<stdin>", _stdin, options))}

    source = _existing(path)
    if source.is_dir() and (source / "config.json").is_file() and (source / "vocab.json").is_file():
        raise DataError(
            f"{source} is a docattn run directory (a trained model), not data; "
            "give the documents to read (a file, folder, archive or data set name)"
        )
    if source.is_dir() or _is_archive(source):
        return _read_tree(source, format, options, split, single)
    format = format or _detect_file(source)
    options = _format_options(format, options)
    if format == "folder":
        raise DataError(f"{source}: format 'folder' reads a directory or a .tar.gz/.tgz/.tar/.zip archive")
    if format in _TREE_READERS:  # one file of a kind read from trees: a tree of it alone
        return _TREE_READERS[format](file_tree(source, ("dataset_info.json",)), format, split, single, options)
    # the reader opens it in a with block (_opened)
    file_source = _Source(str(source), lambda: open(source, "rb"), options)  # noqa: SIM115
    if format == "zhang":
        classes_file = source.parent / "classes.txt"
        if classes_file.is_file():
            file_source.classes = _read_classes(_read_bytes(classes_file, _CLASSES_BYTES + 1), str(classes_file))
            file_source.classes_name = str(classes_file)
    _select_splits(["all"], split, single, source)
    return {"all": _READERS[format](file_source)}


def _read_tree(
    source: Path, format: str | None, options: dict[str, Any], split: str | None, single: bool
) -> dict[str, Corpus]:
    """A folder or an archive: folder-per-label documents, Zhang or Tang files, Reuters SGML or tables."""
    tree = _open_tree(source)
    format = format or _detect_tree(tree)
    options = _format_options(format, options)
    if format == "folder":
        errors, multi_label = options.get("errors", "latin-1"), options.get("multi_label", False)
        return _count_skipped_links(
            tree, _read_folder(tree, split, single, options.get("on_empty", "skip"), errors, multi_label)
        )
    if format in _TREE_READERS:
        return _TREE_READERS[format](tree, format, split, single, options)
    if format == "zhang":
        sources = _zhang_sources(tree, options)
    elif format == "tang":
        sources = _tang_sources(tree, options)
    else:
        raise DataError(f"{source}: format {format!r} reads one file, not a directory or an archive")
    return {name: _READERS[format](sources[name]) for name in _select_splits(sources, split, single, source)}


def _read_reuters(
    tree: _Tree, format: str, split: str | None, single: bool, options: dict[str, Any]
) -> dict[str, Corpus]:
    return read_reuters(tree, split, single, options.get("on_empty", "skip"), options.get("errors", "latin-1"))


def _finish(splits: dict[str, Corpus], options: dict[str, Any]) -> dict[str, Corpus]:
    """``multi_label`` makes every label a tuple; ``ignore_labels`` drops them (see :func:`_without_labels`)."""
    if options.get("multi_label"):
        for corpus in splits.values():
            if corpus.labels is not None and not corpus.multi_label:
                corpus.labels = [y if isinstance(y, tuple) else (y,) for y in corpus.labels]
            corpus.multi_label = True
    return _without_labels(splits, options)


def _without_labels(splits: dict[str, Corpus], options: dict[str, Any]) -> dict[str, Corpus]:
    """With ``ignore_labels`` every corpus loses its labels: csv/jsonl skip them while reading (so a missing
    one is no error), the formats whose label is part of the line or path (zhang, tang, fasttext, folder) here."""
    if options.get("ignore_labels"):
        for corpus in splits.values():
            corpus.labels, corpus.classes = None, None
    return splits


def _format_options(format: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` checked against what ``format`` takes; the CLI's --text-col/--label-col
    (``text_columns``/``label_column``) name a JSONL file's fields."""
    if format == "jsonl" and ({"text_columns", "label_column"} & set(options)):
        options = dict(options)
        columns = options.pop("text_columns", None)
        if columns is not None:
            if len(columns) != 1 or "text_field" in options:
                raise ConfigError(
                    f"format 'jsonl' reads one text field; got text columns {columns}"
                    + (f" and text_field={options['text_field']!r}" if "text_field" in options else "")
                )
            options["text_field"] = str(columns[0])
        if "label_column" in options:
            label = options.pop("label_column")
            if "label_field" in options:
                raise ConfigError(
                    f"give a JSONL label field once: label_column={label!r} and label_field={options['label_field']!r}"
                )
            options["label_field"] = str(label)
    allowed = _OPTIONS.get(format, set()) | _COMMON_OPTIONS
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigError(
            f"option(s) {', '.join(unknown)} do not apply to format {format!r} (it takes: {', '.join(sorted(allowed))})"
        )
    return options


# readers of trees (a folder or an archive) that also read one file of theirs, as a tree of it alone
_TREE_READERS: dict[str, Callable[..., dict[str, Corpus]]] = {
    "reuters": _read_reuters,
    "parquet": read_table_splits,
    "arrow": read_table_splits,
}

_READERS: dict[str, Callable[[_Source], Corpus]] = {
    "csv": _read_csv,
    "tsv": _read_tsv,
    "jsonl": _read_jsonl,
    "zhang": _read_zhang,
    "tang": _read_tang,
    "fasttext": _read_fasttext,
    "lines": _read_lines,
}
