"""Where a table source's rows lie: the Arrow files of each split of a Hugging Face ``save_to_disk`` folder
(``dataset_dict.json`` over one folder per split, or one ``state.json`` folder), else the Parquet or Arrow files
of a folder or archive, split by their names; and the ClassLabel names its ``dataset_info.json`` gives."""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

from docattn.data.readers.base import _SPLIT_ALIASES, _split_name
from docattn.data.readers.trees import _Tree
from docattn.errors import DataError

TABLE_SUFFIXES = {"parquet": (".parquet",), "arrow": (".arrow", ".feather")}
_SIDE_FILES = (".md", ".json", ".lock", "license")  # beside the tables of a download, never rows
_JSON_BYTES = 16 << 20  # a dataset_info.json with thousands of class names is well under this


def table_format(paths: list[str]) -> str | None:
    """ "arrow" or "parquet" when ``paths`` are a saved Hugging Face dataset or tables (with a README, say)."""
    names = {posixpath.basename(p) for p in paths}
    if "dataset_dict.json" in names or ("state.json" in names and any(p.endswith(".arrow") for p in paths)):
        return "arrow"
    data = [p.lower() for p in paths if not p.lower().endswith(_SIDE_FILES)]
    for format, suffixes in TABLE_SUFFIXES.items():
        if data and all(p.endswith(suffixes) for p in data):
            return format
    return None


def table_layout(tree: _Tree, format: str) -> dict[str, list[str]]:
    """Split -> its data files in row order: a DatasetDict's splits ("validation" is "valid"), one saved
    Dataset ("all"), or tables named for their split (train-00000-of-00002.parquet, train/0000.parquet)."""
    dicts = sorted((p for p in tree.paths if posixpath.basename(p) == "dataset_dict.json"), key=lambda p: p.count("/"))
    if dicts:
        return _dataset_dict(tree, dicts[0])
    states = [posixpath.dirname(p) for p in tree.paths if posixpath.basename(p) == "state.json"]
    if len(states) == 1:
        return {"all": _dataset_files(tree, states[0])}
    if states:  # Datasets saved one by one: ds["train"].save_to_disk("d/train"), ...
        layout: dict[str, list[str]] = {}
        for folder in sorted(states):
            base = posixpath.basename(folder)
            _add_split(layout, _split_name(base) or base, _dataset_files(tree, folder), tree)
        return layout
    layout = {}
    for member in sorted(p for p in tree.paths if p.lower().endswith(TABLE_SUFFIXES[format])):
        layout.setdefault(_file_split(member), []).append(member)
    if not layout:
        kinds = " or ".join(TABLE_SUFFIXES[format])
        raise DataError(f"{tree.name}: no {kinds} files, dataset_dict.json or state.json (format {format!r})")
    return layout


def class_names(tree: _Tree, member: str, column: str, metadata: dict[bytes, bytes] | None) -> list[str] | None:
    """The ClassLabel names of ``column``: from the ``dataset_info.json`` beside ``member``, else from the
    "huggingface" schema metadata that ``datasets`` writes into its Arrow and Parquet files."""
    info = posixpath.join(posixpath.dirname(member), "dataset_info.json")
    features = None
    if info in tree.paths:
        features = _json(tree, info).get("features")
    elif metadata and b"huggingface" in metadata:
        try:
            features = json.loads(metadata[b"huggingface"]).get("info", {}).get("features")
        except (ValueError, AttributeError):
            features = None  # metadata of some other tool: no class names, the labels as they are
    return _names(features.get(column)) if isinstance(features, dict) else None


def _names(feature: Any) -> list[str] | None:
    """ClassLabel names of a feature, or of the ClassLabel a Sequence/List feature (or [ClassLabel]) holds."""
    if isinstance(feature, list) and len(feature) == 1:
        feature = feature[0]
    if isinstance(feature, dict) and feature.get("_type") in ("Sequence", "List", "LargeList"):
        feature = feature.get("feature")
    if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" and isinstance(feature.get("names"), list):
        return [str(name) for name in feature["names"]]
    return None


def _dataset_dict(tree: _Tree, member: str) -> dict[str, list[str]]:
    splits = _json(tree, member).get("splits")
    if not isinstance(splits, list) or not splits or not all(isinstance(s, str) for s in splits):
        raise DataError(
            f'{tree.where(member)}: expected {{"splits": ["train", ...]}}, as DatasetDict.save_to_disk writes'
        )
    layout: dict[str, list[str]] = {}
    for split in splits:
        folder = posixpath.join(posixpath.dirname(member), split)
        _add_split(layout, _SPLIT_ALIASES.get(split.lower(), split), _dataset_files(tree, folder), tree)
    return layout


def _add_split(layout: dict[str, list[str]], name: str, files: list[str], tree: _Tree) -> None:
    if name in layout:
        raise DataError(f"{tree.name}: two splits read as {name!r}; read one folder at a time")
    layout[name] = files


def _dataset_files(tree: _Tree, folder: str) -> list[str]:
    """A saved Dataset's Arrow files, in the order its ``state.json`` lists them."""
    state_member = posixpath.join(folder, "state.json")
    prefix = folder + "/" if folder else ""
    if state_member not in tree.paths:
        found = sorted(
            p for p in tree.paths if p.startswith(prefix) and re.fullmatch(r"data-.*\.arrow", p[len(prefix) :])
        )
        if not found:
            raise DataError(f"{tree.where(folder or '.')}: no state.json or data-*.arrow files (a saved dataset split)")
        return found
    state = _json(tree, state_member)
    if state.get("_indices_data_files"):
        raise DataError(
            f"{tree.where(state_member)}: the dataset was saved with an indices mapping; "
            "save it again after dataset.flatten_indices()"
        )
    listed = state.get("_data_files")
    if not isinstance(listed, list) or not all(
        isinstance(f, dict) and isinstance(f.get("filename"), str) for f in listed
    ):
        raise DataError(f'{tree.where(state_member)}: expected "_data_files": [{{"filename": ...}}, ...]')
    files = [prefix + f["filename"] for f in listed]
    missing = [f for f in files if f not in tree.paths]
    if missing:
        raise DataError(f"{tree.where(state_member)} lists {missing[0]}, which is not there")
    return files


def _file_split(member: str) -> str:
    """The split a table file's name (train-00000-of-00001, imdb-test) or folder (train/0000) names, else "all"."""
    stem = posixpath.basename(member).rsplit(".", 1)[0]
    for word in re.split(r"[-_.]", stem):
        if word.lower() in _SPLIT_ALIASES:
            return _SPLIT_ALIASES[word.lower()]
    return _split_name(posixpath.basename(posixpath.dirname(member))) or "all"


def _json(tree: _Tree, member: str) -> dict:
    raw = tree.read(member, _JSON_BYTES + 1)
    if len(raw) > _JSON_BYTES:
        raise DataError(f"{tree.where(member)}: over {_JSON_BYTES:,} bytes; not a dataset description")
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise DataError(f"{tree.where(member)}: malformed JSON ({error})") from None
    if not isinstance(value, dict):
        raise DataError(f"{tree.where(member)}: expected a JSON object, found {type(value).__name__}")
    return value
