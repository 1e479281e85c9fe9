"""Where a command's data comes from: a path or a registered name, and which split of it to use."""

from __future__ import annotations

import json
from pathlib import Path

from docattn.errors import DataError


def parse_value(text: str):
    """Command-line values: JSON where it parses (numbers, true, null, lists), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def resolve_source(path_or_name: str) -> str:
    """An existing path (or '-' for stdin) as is; a registered data set name -> its downloaded folder."""
    if path_or_name == "-" or Path(path_or_name).exists():
        return path_or_name
    from docattn.data.registry import resolve

    return str(resolve(path_or_name))


def reader_options(
    fmt: str | None = None,
    text_col: str | None = None,
    label_col: str | None = None,
    label_sep: str | None = None,
    multi_label: bool = False,
) -> dict:
    """Reader keyword arguments from the CLI's --format, --text-col (comma separated), --label-col,
    --label-sep (several labels in one CSV/TSV cell) and --multi-label (every document a set of labels)."""
    opts: dict = {}
    if label_sep:
        opts["label_sep"] = label_sep
    if multi_label:
        opts["multi_label"] = True
    if fmt:
        opts["format"] = fmt
    if text_col:
        opts["text_columns"] = [parse_value(c) for c in text_col.split(",")]
    if label_col is not None:
        opts["label_column"] = parse_value(label_col)
    return opts


def read_evaluation_corpus(
    data: str,
    split: str | None = None,
    fmt=None,
    text_col=None,
    label_col=None,
    ignore_labels: bool = False,
    label_sep: str | None = None,
    multi_label: bool = False,
):
    """One split of a source: the one asked for, else its test split, else all of it (never its train split unasked).

    ``ignore_labels`` (predicting): labels are not read, so missing or unseen ones are no error.
    """
    from docattn.data.readers import read_splits

    options = reader_options(fmt, text_col, label_col, label_sep, multi_label)
    if ignore_labels:
        options["ignore_labels"] = True
    splits = read_splits(resolve_source(data), **options)
    default = next((n for n in ("test", "all") if n in splits), None)
    if split is None and default is None:  # never a training split unless asked for
        raise DataError(f"{data}: no test split (found {sorted(splits)}); choose one with --split")
    from docattn.data.readers import _SPLIT_ALIASES

    name = (
        _SPLIT_ALIASES.get(split, split) if split else default
    )  # --split dev means the valid split, as in the readers
    if name not in splits:
        raise DataError(f"{data}: no split {name!r} (found {sorted(splits)})")
    return splits[name]
