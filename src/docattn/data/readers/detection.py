"""Which format a path holds, from its name, its folder layout or its first line."""

from __future__ import annotations

import posixpath
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from docattn.data.readers.base import FORMATS
from docattn.data.readers.decoding import _decoded_lines
from docattn.data.readers.reuters import is_reuters_file
from docattn.data.readers.table_layout import table_format
from docattn.errors import DataError

if TYPE_CHECKING:
    from docattn.data.readers.trees import _Tree

_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")


def _is_archive(path: Path) -> bool:
    return path.is_file() and path.name.lower().endswith(_ARCHIVE_SUFFIXES)


def _detect_file(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "zhang" if (path.parent / "classes.txt").is_file() else "csv"
    if suffix == ".tsv":
        return "tsv"
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix == ".ss":
        return "tang"
    if suffix in (".parquet", ".arrow", ".feather", ".sgm"):
        return {".parquet": "parquet", ".sgm": "reuters"}.get(suffix, "arrow")
    first = _first_nonempty_line(path)
    if first.startswith("__label__"):
        return "fasttext"
    if suffix in (".txt", ".ft"):
        return "lines"
    raise DataError(
        f"{path}: cannot tell the format from the name; use .csv, .tsv, .jsonl, .ss, .txt, .parquet, .arrow, "
        f"a directory or an archive, or pass format= (one of {', '.join(FORMATS)})"
    )


def _first_nonempty_line(path: Path) -> str:
    try:
        with open(path, "rb") as stream:
            for line in islice(_decoded_lines(stream, str(path), "replace", {"decode_errors": 0}), 1000):
                if line.strip():
                    return line.strip()
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror or error}") from None
    return ""


def _detect_tree(tree: _Tree) -> str:
    if any(is_reuters_file(p) for p in tree.paths):
        return "reuters"
    table = table_format(tree.paths)
    if table is not None:
        return table
    folders_with_classes = {posixpath.dirname(p) for p in tree.paths if posixpath.basename(p) == "classes.txt"}
    if any(posixpath.dirname(p) in folders_with_classes and p.endswith(".csv") for p in tree.paths):
        return "zhang"
    names = {}
    for p in tree.paths:
        names.setdefault(posixpath.dirname(p), set()).add(posixpath.basename(p))
    if any({"train.csv", "test.csv"} <= files for files in names.values()):  # Zhang's Yelp and Amazon: no classes.txt
        return "zhang"
    if any(p.endswith(".ss") for p in tree.paths):
        return "tang"
    return "folder"
