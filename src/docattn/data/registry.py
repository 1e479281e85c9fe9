"""The data set registry as other modules name it: the catalogue (data/datasets.py) and its download,
verification and unpacking (data/download.py), under one name."""

from __future__ import annotations

from docattn.data.datasets import DATASETS, LAYOUTS, DatasetInfo, get_dataset
from docattn.data.download import (
    MAX_UNPACK_BYTES,
    MAX_UNPACK_MEMBER_BYTES,
    _unpack,
    archive_path,
    cache_dir,
    download,
    local_path,
    resolve,
    source_url,
)

__all__ = [
    "DATASETS",
    "LAYOUTS",
    "MAX_UNPACK_BYTES",
    "MAX_UNPACK_MEMBER_BYTES",
    "DatasetInfo",
    "_unpack",
    "archive_path",
    "cache_dir",
    "download",
    "get_dataset",
    "local_path",
    "resolve",
    "source_url",
]
