"""Options several commands share: how documents are read (defined once, added by ``@reads_documents``),
``--set KEY=VALUE``, model names and output folders."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from docattn.data.sources import parse_value, read_evaluation_corpus, reader_options
from docattn.errors import ConfigError, DocattnError


@dataclass(frozen=True)
class Reader:
    """The ``--split/--format/--text-col/--label-col/--label-sep/--multi-label`` a command was given."""

    split: str | None = None
    fmt: str | None = None
    text_col: str | None = None
    label_col: str | None = None
    label_sep: str | None = None
    multi_label: bool = False

    @property
    def options(self) -> dict:
        """The readers' keyword arguments (the split is chosen after reading)."""
        return reader_options(self.fmt, self.text_col, self.label_col, self.label_sep, self.multi_label)

    def corpus(self, data: str, ignore_labels: bool = False):
        """One split of ``data``: ``--split``, else its test split, else all of it (never its train split unasked)."""
        return read_evaluation_corpus(
            data, self.split, self.fmt, self.text_col, self.label_col, ignore_labels, self.label_sep, self.multi_label
        )


_READER_OPTIONS = {
    "split": typer.Option(
        "--split",
        help="Which split of a source that has several: train, valid (or dev) or test.",
        show_default="test, else the whole source",
    ),
    "fmt": typer.Option(
        "--format",
        help="Reader format: csv, tsv, jsonl, zhang, tang, folder, fasttext, lines, parquet, arrow or reuters.",
        show_default="detected from the path and the first lines",
    ),
    "text_col": typer.Option(
        "--text-col",
        help="CSV/TSV/Parquet text column(s), names or 0-based indexes, comma separated; or the JSONL text field.",
        show_default="text",
    ),
    "label_col": typer.Option(
        "--label-col",
        help="CSV/TSV/Parquet label column (name or 0-based index), or the JSONL label field.",
        show_default="label",
    ),
    "label_sep": typer.Option(
        "--label-sep",
        help="Separator of several labels in one CSV/TSV label cell (e.g. ','): multi-label documents.",
        show_default="one label per cell",
    ),
    "multi_label": typer.Option(
        "--multi-label",
        help="Read every document as a set of labels (multi-label), even where each has one.",
        show_default="multi-label when the data gives a document several labels",
    ),
}


_FLAGS = {"multi_label"}  # reader options that are on/off flags; the others take a value


def reads_documents(split: bool = True):
    """Add the reader options to a command, which receives them as ``reader: Reader``; ``split=False``
    for commands that read every split of a source (train, tune, benchmark, data stats)."""
    names = [name for name in _READER_OPTIONS if split or name != "split"]

    def wrap(command):
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "reader"]
        added = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=False if name in _FLAGS else None,
                annotation=Annotated[bool if name in _FLAGS else str | None, _READER_OPTIONS[name]],
            )
            for name in names
        ]

        @functools.wraps(command)
        def with_reader(*args, **kwargs):
            given = {name: kwargs.pop(name) for name in names if name in kwargs}
            return command(*args, reader=Reader(**given), **kwargs)

        with_reader.__signature__ = signature.replace(parameters=[*own, *added])  # what Typer reads
        return with_reader

    return wrap


def option(flag: str, help: str, default: str, kind=str | None):
    """An option whose unset value (None) stands for a default that depends on the model, recipe or data,
    which ``default`` says in the help."""
    return Annotated[kind, typer.Option(flag, help=help, show_default=default)]


SETS_HELP = "Any other training option, data option or model hyper-parameter, KEY=VALUE (repeatable)."


def parse_sets(items: list[str] | None) -> dict:
    """``--set KEY=VALUE`` items as options: values parsed as JSON where they parse, keys with _ for -."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise DocattnError(f"--set expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip().replace("-", "_")] = parse_value(value)
    return out


def model_name(name: str) -> str:
    """A registered model's name as typed in any case (``HAN``: ``han``); an unknown one names the closest."""
    from difflib import get_close_matches

    from docattn.models import list_models

    names = list_models()
    typed = name.strip().lower()
    if typed in names:
        return typed
    close = get_close_matches(typed, names, n=1, cutoff=0.6)
    raise ConfigError(
        f"unknown model {name!r}"
        + (f"; did you mean {close[0]!r}?" if close else "")
        + " (docattn models lists them all)"
    )


def check_out(out: Path) -> None:
    """--out is a folder (a run, a benchmark): a file there is an error before any work is done."""
    if out.exists() and not out.is_dir():
        raise DocattnError(f"--out {out} is a file; give a folder to write into")
