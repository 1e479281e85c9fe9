"""Atomic file writes: a crash leaves the old file or the new one, never half of one, and a failed write
(a full disk, a read-only folder) is one line naming the file, with no temporary file left behind."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

from docattn.errors import WriteError


def temporary_name(path: Path) -> Path:
    """The hidden temporary beside ``path`` that a write goes through (per process: writers never share one)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


@contextmanager
def replacing(path: str | Path):
    """Yield a temporary path to write; on success it replaces ``path``, on any failure it is removed and an
    ``OSError`` becomes one ``WriteError`` line."""
    path = Path(path)
    tmp = temporary_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as err:
        raise WriteError(
            f"cannot write {path}: {err.strerror or err}; nothing was replaced "
            f"({'free some space' if err.errno == 28 else 'check the folder'} or write elsewhere)"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write(path: str | Path, payload: bytes | str) -> Path:
    path = Path(path)
    with replacing(path) as tmp:
        if isinstance(payload, str):
            tmp.write_text(payload, encoding="utf-8")
        else:
            tmp.write_bytes(payload)
    return path


def write_json(path: str | Path, data) -> None:
    """Write JSON so that a crash leaves either the old file or the new one, never half of one."""
    atomic_write(path, json.dumps(data, ensure_ascii=False, indent=1))
