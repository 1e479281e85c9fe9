"""Small data files for the reader tests: text or bytes at a path, JSON lines, folder trees, tar and zip archives."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    return write(path, "".join(json.dumps(r) + "\n" for r in records))


def build_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        write(root / name, content)
    return root


def build_tar(path: Path, files: dict[str, str | bytes | tuple], mode: str = "w:gz", **kwargs) -> Path:
    """Members in order; a (tarfile.SYMTYPE or LNKTYPE, target) value is a symbolic or hard link."""
    with tarfile.open(path, mode, **kwargs) as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                info.type, info.linkname = content
                archive.addfile(info)
                continue
            data = content.encode("utf-8") if isinstance(content, str) else content
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def build_zip(path: Path, files: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return path
