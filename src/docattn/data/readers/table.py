"""Tables: Parquet files, Arrow IPC files (.arrow, .feather) and Hugging Face datasets saved with
``save_to_disk``, read with pyarrow (the ``docattn[parquet]`` extra), never with the ``datasets`` package.

Rows are read a record batch at a time, so memory follows the batch, not the file. Columns are chosen as in
a CSV (``text_columns``, default "text"; ``label_column``, default "label"; names or 0-based indexes). A label
column of lists makes a multi-label corpus; an int column with ClassLabel names (dataset_info.json, or the
schema's "huggingface" metadata) gives the names. pyarrow is imported when a table is read, never before:
``docattn --help`` stays fast.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from docattn.data.corpus import Corpus
from docattn.data.readers.base import (
    _Documents,
    _label_set,
    _missing_label,
    _opened,
    _ordered_splits,
    _select_splits,
    _Source,
)
from docattn.data.readers.decoding import _clean
from docattn.data.readers.table_layout import class_names, table_layout
from docattn.data.readers.trees import _Tree
from docattn.errors import ConfigError, DataError

_BATCH_ROWS = 256  # Parquet rows decoded at a time; Arrow files keep the batches they were written with
_KINDS = {"parquet": "Parquet", "arrow": "Arrow"}


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet  # noqa: F401 (pyarrow.parquet.ParquetFile below)
    except ImportError:
        raise ConfigError("reading Parquet or Arrow files needs pyarrow: pip install 'docattn[parquet]'") from None
    return pyarrow


def read_table_splits(tree: _Tree, format: str, split: str | None, single: bool, options: dict) -> dict[str, Corpus]:
    """Every split (or the one asked for) of the tables in ``tree``, each split's files read in order."""
    pa = _pyarrow()
    layout = table_layout(tree, format)
    selected = _select_splits(_ordered_splits(layout), split, single, tree.name)
    return {name: _read_split(pa, tree, layout[name], options) for name in selected}


@dataclass
class _Columns:
    """The columns read from one file: text(s), the label and the id."""

    texts: list[str]
    label: str | None
    id: str | None


class _Labels:
    """Labels as rows give them; counts those given and remembers the first row without one."""

    def __init__(self, label_sep: str | None):
        self.sep = label_sep
        self.names: list[str] | None = None
        self.given = 0
        self.first_missing: str | None = None
        self.multi = label_sep is not None

    def value(self, raw: Any, where: str) -> Hashable:
        if isinstance(raw, list):  # a list column: the document's labels, [] for none
            self.given, self.multi = self.given + 1, True
            return _label_set(self._one(x, where) for x in raw)
        missing = raw is None or (isinstance(raw, float) and math.isnan(raw)) or (self.names and raw == -1)
        if missing or (isinstance(raw, str) and not raw.strip() and self.sep is None):
            self.first_missing = self.first_missing or where  # ClassLabel's -1: no label (a test split's)
            return None
        self.given += 1
        if isinstance(raw, str) and self.sep is not None:
            return _label_set(raw.split(self.sep))
        return self._one(raw, where)

    def _one(self, raw: Any, where: str) -> Hashable:
        if raw is None or (isinstance(raw, float) and not math.isfinite(raw)):
            raise DataError(f"{where}: a label list holds {raw!r}; give each label as a string or a number")
        if self.names is not None and isinstance(raw, int) and not isinstance(raw, bool):
            if not 0 <= raw < len(self.names):
                raise DataError(f"{where}: label {raw} is outside the {len(self.names)} ClassLabel names")
            return self.names[raw]
        return raw.strip() if isinstance(raw, str) else raw


def _read_split(pa: Any, tree: _Tree, members: list[str], options: dict) -> Corpus:
    docs = _Documents(tree.where(members[0]) if len(members) == 1 else tree.name, options.get("on_empty", "skip"))
    labels = _Labels(options.get("label_sep"))
    label_column, done = None, 0  # done: rows of the split's earlier files
    for member in members:
        where = tree.where(member)
        kind = _KINDS["parquet" if member.lower().endswith(".parquet") else "arrow"]
        try:
            with _opened(_Source(where, tree.opener(member), options)) as stream:
                schema, batches = _open_table(pa, stream, where)
                columns = _columns(pa, schema, options, where)
                names = class_names(tree, member, columns.label, schema.metadata) if columns.label else None
                if member != members[0] and names != labels.names:
                    raise DataError(f"{where}: ClassLabel names differ from those of {tree.where(members[0])}")
                labels.names, label_column = names, columns.label
                wanted = list(dict.fromkeys([*columns.texts, *filter(None, [columns.label, columns.id])]))
                row = 0
                for batch in batches(wanted):
                    _add_rows(docs, batch, columns, labels, where, row, done + row)
                    row += batch.num_rows
                done += row
        except (pa.lib.ArrowException, OSError) as error:
            raise DataError(f"{where}: not a readable {kind} file ({_first_line(error)})") from None
    if labels.given and labels.first_missing:
        raise _missing_label(labels.first_missing, f"column {label_column!r}, given in other rows")
    classes = list(labels.names) if labels.names is not None and labels.given else None
    return docs.corpus(labeled=labels.given > 0, classes=classes, multi_label=labels.multi and labels.given > 0)


def _open_table(pa: Any, stream: Any, where: str) -> tuple[Any, Callable[[list[str]], Iterator[Any]]]:
    """The schema, and the record batches of the columns asked for, by the file's magic bytes: Parquet,
    an Arrow IPC file (Feather 2), else an Arrow IPC stream (what ``save_to_disk`` writes)."""
    head = stream.read(6)
    stream.seek(0)
    if head[:4] == b"PAR1":
        parquet = pa.parquet.ParquetFile(stream)
        return parquet.schema_arrow, lambda columns: parquet.iter_batches(batch_size=_BATCH_ROWS, columns=columns)
    if head[:4] == b"FEA1":
        raise DataError(
            f"{where}: a Feather version 1 file; save it again as Feather 2 (pyarrow.feather.write_feather)"
        )
    if head == b"ARROW1":
        file = pa.ipc.open_file(stream)
        return file.schema, lambda columns: (file.get_batch(i).select(columns) for i in range(file.num_record_batches))
    reader = pa.ipc.open_stream(stream)
    return reader.schema, lambda columns: (batch.select(columns) for batch in reader)


def _columns(pa: Any, schema: Any, options: dict, where: str) -> _Columns:
    """Names of the columns to read, checked against the schema: a missing one names those there are."""
    names = list(schema.names)
    shown = ", ".join(names)
    text_columns = options.get("text_columns") or ["text"]
    if not isinstance(text_columns, (list, tuple)):
        text_columns = [text_columns]

    def name_of(column: Any, hint: str) -> str:
        if isinstance(column, str):
            if column not in names:
                raise DataError(f"{where}: no column {column!r} (columns: {shown}); pass {hint}")
            return column
        if isinstance(column, bool) or not isinstance(column, int) or column < 0:
            raise ConfigError(f"a column is a name or a 0-based index, not {column!r}")
        if column >= len(names):
            raise DataError(f"{where}: column {column} out of range: the table has {len(names)} ({shown})")
        return names[column]

    texts = [name_of(c, "text_columns= (on the command line --text-col)") for c in text_columns]
    label = options.get("label_column")
    if options.get("ignore_labels"):
        label = None
    elif label is None:
        label = "label" if "label" in names else None  # no label column: unlabelled rows
    else:
        label = name_of(label, "label_column= (on the command line --label-col)")
    for name in texts:
        if not _is_text(pa, schema.field(name).type, lists=True):
            raise DataError(f"{where}: column {name!r} holds {schema.field(name).type}, not text; pass text_columns=")
    if label is not None and not _is_label(pa, schema.field(label).type):
        raise DataError(
            f"{where}: label column {label!r} holds {schema.field(label).type}; "
            "expected strings, integers or booleans, or lists of them"
        )
    id_column = "id" if "id" in names and "id" not in (*texts, label) and _is_id(pa, schema.field("id").type) else None
    return _Columns(texts, label, id_column)


def _is_text(pa: Any, kind: Any, lists: bool = False) -> bool:
    """Strings (plain, large, views or dictionary-encoded), or with ``lists`` lists of them (sentences)."""
    types = pa.types
    if types.is_dictionary(kind):
        kind = kind.value_type
    if types.is_string(kind) or types.is_large_string(kind) or types.is_string_view(kind):
        return True
    return lists and _is_list(pa, kind) and _is_text(pa, kind.value_type)


def _is_label(pa: Any, kind: Any, lists: bool = True) -> bool:
    types = pa.types
    if lists and _is_list(pa, kind):
        return _is_label(pa, kind.value_type, lists=False)
    if types.is_dictionary(kind):
        kind = kind.value_type
    return _is_text(pa, kind) or types.is_integer(kind) or types.is_boolean(kind) or types.is_floating(kind)


def _is_list(pa: Any, kind: Any) -> bool:
    types = pa.types
    return types.is_list(kind) or types.is_large_list(kind) or types.is_fixed_size_list(kind)


def _is_id(pa: Any, kind: Any) -> bool:
    return _is_text(pa, kind) or pa.types.is_integer(kind)


def _add_rows(
    docs: _Documents, batch: Any, columns: _Columns, labels: _Labels, where: str, first_row: int, first_index: int
) -> None:
    """The documents of one record batch, its first row ``first_row`` of its file and ``first_index`` of its
    split; ids are the "id" column's, else the row's index in the split (as ``dataset[i]`` counts)."""
    texts = [batch.column(name).to_pylist() for name in columns.texts]
    label_values = batch.column(columns.label).to_pylist() if columns.label else None
    ids = batch.column(columns.id).to_pylist() if columns.id else None
    for row in range(batch.num_rows):
        here = f"{where}: row {first_row + row}"
        text, sentences = _row_text([column[row] for column in texts])
        label = labels.value(label_values[row], here) if label_values is not None else None
        doc_id = ids[row] if ids is not None and ids[row] not in (None, "") else first_index + row
        docs.add(here, str(doc_id), text, label, sentences)


def _row_text(values: list[Any]) -> tuple[str, list[str] | None]:
    """A row's text: its text cells joined by line breaks; a single cell holding a list is the sentences."""
    if len(values) == 1 and isinstance(values[0], list):
        sentences = [s for x in values[0] if isinstance(x, str) and (s := _clean(x).strip())]
        return "\n".join(sentences), sentences
    parts = []
    for value in values:
        if isinstance(value, list):
            value = "\n".join(x for x in value if isinstance(x, str))
        if value and not value.isspace():
            parts.append(_clean(value))
    return "\n".join(parts), None


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
