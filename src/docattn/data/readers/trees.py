"""Trees of documents: a folder (linked folders followed once) or an archive read into memory in one pass,
its links resolved inside it."""

from __future__ import annotations

import io
import lzma
import os
import posixpath
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docattn.data.readers import plain_tar
from docattn.data.readers.archives import reading_limits, tar_members, zip_members
from docattn.data.readers.base import _open_file, _read_bytes
from docattn.data.readers.decoding import _shown
from docattn.errors import DataError


@dataclass
class _Tree:
    """Files of a directory or an archive by relative POSIX path; archive contents are held in memory."""

    name: str
    paths: list[str]
    folders: set[str] = field(default_factory=set)
    root: Path | None = None  # a directory: files are read on demand
    data: dict[str, bytes] = field(default_factory=dict)  # an archive: read in one pass
    skipped_links: list[str] = field(default_factory=list)  # archive links whose target is not in it: "name -> target"

    def read(self, member: str, limit: int = -1) -> bytes:
        """The member's bytes: on disk at most ``limit`` of them; from an archive all (already in memory)."""
        return _read_bytes(self.root / member, limit) if self.root is not None else self.data[member]

    def opener(self, member: str) -> Callable[[], AbstractContextManager[Any]]:
        if self.root is not None:
            path = self.root / member
            return lambda: _open_file(path)
        return lambda: io.BytesIO(self.data[member])

    def where(self, member: str) -> str:
        return str(self.root / member) if self.root is not None else f"{self.name}:{member}"


def _member_path(name: str) -> str | None:
    """Normalised member path, or None for hidden files and macOS resource forks."""
    parts = [p for p in name.replace("\\", "/").split("/") if p and p != "."]
    if not parts or any(p.startswith(".") or p == "__MACOSX" for p in parts):
        return None
    return _shown("/".join(parts))


def _open_tree(path: Path, keep_data: bool = True) -> _Tree:
    return _directory_tree(path) if path.is_dir() else _archive_tree(path, keep_data)


def file_tree(path: Path, beside: tuple[str, ...] = ()) -> _Tree:
    """One file as a tree of its folder, for the readers that read trees (Reuters, tables), with those of the
    files named in ``beside`` that are next to it (a saved dataset's dataset_info.json)."""
    paths = [path.name] + [name for name in beside if (path.parent / name).is_file()]
    return _Tree(str(path), paths, root=path.parent)


def walk(root: str | os.PathLike) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk`` that follows symbolic links to folders outside ``root`` (data often lives elsewhere:
    train/pos -> /scratch/pos), once per route and never into a folder already on the way down. A link
    to a folder inside ``root`` is not followed: its documents are read where they are, not a second
    time under another label. Prune ``subfolders`` in place as with os.walk."""
    top = os.path.realpath(root)
    chains = {os.fspath(root): frozenset([top])}  # real folders on the way down to each folder
    for folder, subfolders, files in os.walk(root, followlinks=True):
        chain = chains.pop(folder, frozenset())
        kept = []
        for d in subfolders:
            full = os.path.join(folder, d)
            real = os.path.realpath(full)
            inside = real == top or real.startswith(top.rstrip(os.sep) + os.sep)
            if real not in chain and not (inside and os.path.islink(full)):
                kept.append(d)
                chains[full] = chain | {real}
        subfolders[:] = kept
        yield folder, subfolders, files


def _directory_tree(root: Path) -> _Tree:
    """Files under ``root``, linked folders included (``walk``), hidden ones left out."""
    paths, folders = [], set()
    for folder, subfolders, files in walk(root):
        subfolders[:] = sorted(d for d in subfolders if _member_path(d) is not None)
        relative = Path(folder).relative_to(root).as_posix()
        prefix = "" if relative == "." else relative + "/"
        folders.update(prefix + d for d in subfolders)
        paths.extend(prefix + f for f in sorted(files) if _member_path(f) is not None)
    return _Tree(str(root), paths, folders, root=root)


def _archive_tree(path: Path, keep_data: bool = True) -> _Tree:
    """Every regular file of a tar or zip archive, read in one sequential pass in archive order;
    hard and symbolic links to files or folders inside the archive read as their targets."""
    found = _Members(keep_data)
    try:
        if path.name.lower().endswith(".zip"):
            _read_zip(path, found)
        else:
            _read_tar(path, found)
    except (
        tarfile.TarError,
        zipfile.BadZipFile,
        zlib.error,
        lzma.LZMAError,
        EOFError,
        OSError,
        RuntimeError,
        NotImplementedError,
        UnicodeDecodeError,
    ) as error:  # (a zip name flagged UTF-8 that is not)
        raise DataError(f"{path}: corrupt or unreadable archive at member {found.at!r} ({error})") from None
    skipped = _resolve_links(found.links, found.data, found.folders)
    return _Tree(
        str(path), sorted(found.data), found.folders, data=found.data if keep_data else {}, skipped_links=skipped
    )


@dataclass
class _Members:
    """What an archive read so far holds; ``at`` names the member being read, for error messages."""

    keep_data: bool
    data: dict[str, bytes] = field(default_factory=dict)
    folders: set[str] = field(default_factory=set)
    links: dict[str, str] = field(default_factory=dict)
    at: str = "(first member)"

    def add_tar(self, member: str, kind: bytes, content: bytes, target: str) -> None:
        """One tar member by its type flag: a folder, a file or a link; others (devices, fifos) are left out."""
        name = _member_path(member)
        if name is None:
            return
        if kind == b"5":
            self.folders.add(name)
        elif kind in (b"0", b"\0", b"7"):
            self.data[name] = content if self.keep_data else b""
        elif kind in (b"1", b"2"):
            self.links[name] = _link_target(name, target, symbolic=kind == b"2")


def _read_zip(path: Path, found: _Members) -> None:
    with zipfile.ZipFile(path) as archive:
        # the central directory gives every size before anything is read; reading stops at them
        counted = lambda info: _member_path(info.filename) is not None and not info.is_dir()
        for info in zip_members(archive, reading_limits(path), counted=counted):
            found.at = info.filename
            name = _member_path(info.filename)
            if name is None:
                continue
            if info.is_dir():
                found.folders.add(name)
            elif (info.external_attr >> 16) & 0o170000 == 0o120000:  # a symbolic link: its target is the content
                found.links[name] = _link_target(name, archive.read(info).decode("utf-8", "replace"), symbolic=True)
            else:
                found.data[name] = archive.read(info) if found.keep_data else b""


def _read_tar(path: Path, found: _Members) -> None:
    try:
        for member, kind, content, target in plain_tar.members(path):
            found.at = member
            found.add_tar(member, kind, content, target)
    except plain_tar.NotPlainTar:  # pax sizes, sparse files, base-256 numbers: tarfile's job
        found.data.clear()
        found.folders.clear()
        found.links.clear()
        # stream mode: one pass, no seeking
        with open(path, "rb") as raw, tarfile.open(fileobj=raw, mode="r|*") as archive:
            for info in tar_members(archive, reading_limits(path, raw.tell)):
                found.at = info.name
                kind = (
                    b"5"
                    if info.isdir()
                    else b"0"
                    if info.isfile()
                    else b"1"
                    if info.islnk()
                    else b"2"
                    if info.issym()
                    else b"?"
                )
                file = archive.extractfile(info) if kind == b"0" and found.keep_data else None
                found.add_tar(info.name, kind, file.read() if file else b"", info.linkname)


def _link_target(name: str, target: str, symbolic: bool) -> str:
    """A link's target as a member path: a hard link names a member, a symbolic one a path from the
    link's folder; "" when it leaves the archive (absolute, or above its root)."""
    if symbolic:
        if target.startswith("/"):
            return ""
        target = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
        if target == ".." or target.startswith("../"):
            return ""
    return _member_path(target) or ""


def _resolve_links(links: dict[str, str], data: dict[str, bytes], folders: set[str]) -> list[str]:
    """Give each link its target's content (a file) or files (a folder); returns "name -> target" of
    those whose target is not in the archive. Links to links resolve in later rounds; a folder link
    waits while resolvable links inside its target are pending, and links waiting on each other go
    one at a time. A link to its own folder or one above it is skipped, as ``walk`` skips it on disk:
    following it would read the folder's documents a second time under a new label."""
    looping = {
        n for n, t in links.items() if t and _encloses(_real_path(t, links), _real_path(posixpath.dirname(n), links))
    }
    pending = {n: t for n, t in links.items() if n not in looping}
    while pending:
        present = set(folders) | {posixpath.dirname(p) for p in data}
        for folder in list(present):
            while folder:
                folder = posixpath.dirname(folder)
                present.add(folder)
        resolvable = {n for n, t in pending.items() if t and (t in data or t in present)}
        done: dict[str, dict[str, bytes]] = {}
        waiting = []
        for name in sorted(resolvable):
            target = pending[name]
            if target in data:
                done[name] = {name: data[target]}
            elif any(other != name and other.startswith(target + "/") for other in resolvable):
                waiting.append(name)  # files may still arrive in that folder through other links
            else:
                done[name] = _folder_files(name, target, data)
        if not done and waiting:  # links waiting on each other: release one, then look again
            done = {waiting[0]: _folder_files(waiting[0], pending[waiting[0]], data)}
        if not done:
            break
        for name, files in done.items():
            if name not in files:  # a folder link, not a file
                folders.add(name)
            data.update(files)
            del pending[name]
    return sorted(
        [f"{name} -> {links[name] or '(outside the archive)'}" for name in pending]
        + [f"{name} -> {links[name]} (a folder the link is in)" for name in looping]
    )


def _real_path(path: str, links: dict[str, str]) -> str | None:
    """``path`` with every link on its way replaced by its target (None: links in a cycle, or leaving the archive)."""
    for _ in range(len(links) + 1):
        prefix = path
        while prefix and prefix not in links:
            prefix = posixpath.dirname(prefix)
        if not prefix:
            return path
        if not links[prefix]:
            return None
        path = links[prefix] + path[len(prefix) :]
    return None


def _encloses(folder: str | None, path: str | None) -> bool:
    """Whether ``folder`` is ``path`` or one of its ancestors."""
    return folder is not None and path is not None and (folder == path or path.startswith(folder + "/"))


def _folder_files(name: str, target: str, data: dict[str, bytes]) -> dict[str, bytes]:
    """The files under folder ``target``, as seen under link ``name``."""
    return {name + p[len(target) :]: v for p, v in data.items() if p.startswith(target + "/")}
