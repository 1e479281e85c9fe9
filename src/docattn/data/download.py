"""Fetching the catalogue's data sets (data/datasets.py): where each lands, how it is fetched, verified, unpacked.

``docattn data download imdb`` fetches an archive once (resuming a partial download), checks its
size and sha256 where the registry knows them, unpacks it safely and atomically into
``cache_dir()/imdb/`` and returns the folder a reader takes (here ``.../imdb/aclImdb``). Nothing
is downloaded implicitly: :func:`resolve` only finds what :func:`download` put in the cache.

Without network, point docattn at a local copy instead: ``url`` (``--url``) takes a local archive,
a ``file://`` URL, an unpacked folder or a mirror, and ``$DOCATTN_MIRROR`` is a base URL (or
folder) to which the archive's file name is appended.

Unpacking is refused, before anything is extracted, when a member's header says it is larger than
``$DOCATTN_MAX_UNPACK_MEMBER_BYTES`` (default 8 GiB), when all members come to more than
``$DOCATTN_MAX_UNPACK_BYTES`` (default 32 GiB), or when they unpack to more than
``$DOCATTN_MAX_COMPRESSION_RATIO`` (default 100) times their compressed size (a compression bomb;
see docattn.data.readers, whose archive walk and checks, ``readers/archives.py``, unpacking shares). The largest
registered set, Amazon Review Polarity, unpacks 688 MB to 1.8 GB (2.6:1, its train.csv 1.6 GB).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import shutil
import stat
import tarfile
import urllib.error
import urllib.request
import zipfile
import zlib
from contextlib import nullcontext
from pathlib import Path
from urllib.parse import unquote, urlparse

from docattn.data.datasets import DATASETS, DatasetInfo, get_dataset
from docattn.data.limits import setting
from docattn.data.readers.archives import SizeCheck, link_leaves, tar_members, unsafe_name, zip_members
from docattn.errors import DataError

MAX_UNPACK_MEMBER_BYTES = 8 << 30  # $DOCATTN_MAX_UNPACK_MEMBER_BYTES: the largest file unpacked
MAX_UNPACK_BYTES = 32 << 30  # $DOCATTN_MAX_UNPACK_BYTES: all files of one archive
_CHUNK = 1 << 20
_USER_AGENT = "docattn (https://github.com/; dataset download)"
_SEVEN_ZIP_MAGIC = b"7z\xbc\xaf\x27\x1c"


class _BadArchive(DataError):
    """The archive itself is unusable (unsafe, corrupt, wrong layout): it is deleted, not kept for reuse."""


def cache_dir() -> Path:
    """Where downloaded data sets live: ``$DOCATTN_DATA`` if set, else ``~/.cache/docattn/datasets``."""
    env = os.environ.get("DOCATTN_DATA")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "docattn" / "datasets"


def source_url(name: str, url: str | os.PathLike | None = None) -> str:
    """Where ``download`` would fetch ``name`` from: ``url``, else ``$DOCATTN_MIRROR``/archive, else the registry."""
    info = get_dataset(name)
    if url:
        return os.fspath(url)
    mirror = os.environ.get("DOCATTN_MIRROR")
    if mirror:
        return mirror.rstrip("/") + "/" + info.archive
    return info.url


def archive_path(name: str, *, url: str | os.PathLike | None = None, dest: str | os.PathLike | None = None) -> Path:
    """Where ``download`` keeps the archive (``<this>.part`` while incomplete); one file per source URL."""
    info = get_dataset(name)
    source = source_url(info.name, url)
    file_name = info.archive
    if url:
        last = unquote(urlparse(source).path).replace("\\", "/").rsplit("/", 1)[-1]
        if "." in last:
            file_name = last
    tag = hashlib.sha1(source.encode()).hexdigest()[:8]  # a mirror's partial file never resumes another's
    return _base(dest) / ".downloads" / f"{info.name}-{tag}-{file_name}"


def local_path(name: str, *, dest: str | os.PathLike | None = None) -> Path | None:
    """The data root of ``name`` if it has been downloaded and unpacked, else None."""
    info = get_dataset(name)
    target = _base(dest) / info.name
    if not target.is_dir():
        return None
    root = _find_root(target, info)
    if root is None:
        raise DataError(
            f"{target} exists but holds none of {', '.join(info.files)}: delete it and run "
            f"`docattn data download {info.name}` again"
        )
    return root


def resolve(name_or_path: str | os.PathLike) -> Path:
    """An existing path as is; a registered name as its downloaded data root. Never downloads."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path
    text = os.fspath(name_or_path)
    try:
        info = get_dataset(text)
    except DataError:
        if any(sep in text for sep in ("/", "\\", ".")):
            raise DataError(f"no such file or folder: {text}") from None
        raise DataError(f"{text!r} is neither an existing path nor a known data set ({', '.join(DATASETS)})") from None
    root = local_path(info.name)
    if root is None:
        raise DataError(
            f"data set {info.name!r} is not downloaded yet: run `docattn data download {info.name}` "
            f"(it goes to {cache_dir() / info.name}), or pass the path of a local copy"
        )
    return root


def download(
    name: str,
    *,
    url: str | os.PathLike | None = None,
    dest: str | os.PathLike | None = None,
    progress: bool = True,
    timeout: float = 30,
    verify: bool = True,
) -> Path:
    """Fetch, verify and unpack data set ``name``; return its data root (what the readers take).

    ``url`` overrides the registry's address: an http(s) URL, a local archive, a ``file://`` URL
    or an already unpacked folder; ``$DOCATTN_MIRROR`` is a base URL the archive name is appended
    to. ``dest`` replaces :func:`cache_dir` as the folder that holds the data sets' folders.
    A data set already unpacked there returns at once. A partial download (``<archive>.part``)
    resumes with an HTTP Range request. ``verify=False`` skips the size and sha256 checks (for a
    copy you trust that was packed differently).
    """
    info = get_dataset(name)
    target = _base(dest) / info.name
    if target.is_dir():
        return local_path(info.name, dest=dest)  # type: ignore[return-value]
    source = source_url(info.name, url)
    target.parent.mkdir(parents=True, exist_ok=True)

    local = _local_source(source, info)
    if local is not None and local.is_dir():
        _install(target, info, lambda tmp: _copy_folder(local, tmp, info))
        return local_path(info.name, dest=dest)  # type: ignore[return-value]

    archive = archive_path(info.name, url=url, dest=dest)
    if not archive.exists():
        archive.parent.mkdir(parents=True, exist_ok=True)
        if local is not None:
            _copy_file(local, archive, info)
        else:
            _http_download(source, archive, info, progress=progress, timeout=timeout)
    if verify:
        _verify(archive, info, source)
    try:
        _install(target, info, lambda tmp: _unpack(archive, tmp, info))
    except _BadArchive:
        archive.unlink(missing_ok=True)
        raise
    archive.unlink(missing_ok=True)
    return local_path(info.name, dest=dest)  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# fetching


def _base(dest: str | os.PathLike | None) -> Path:
    return Path(dest).expanduser() if dest is not None else cache_dir()


def _offline_hint(info: DatasetInfo) -> str:
    return (
        f"to use a local copy instead, run `docattn data download {info.name} --url /path/to/{info.archive}` "
        f"(a file, file:// URL, unpacked folder or mirror URL; or set DOCATTN_MIRROR), "
        f"or pass the data directly, e.g. `docattn train --train /path/to/{info.archive}`"
    )


def _local_source(source: str, info: DatasetInfo) -> Path | None:
    """The local file or folder ``source`` names, or None for a network URL."""
    parsed = urlparse(source)
    if parsed.scheme == "file":
        path = Path(urllib.request.url2pathname(parsed.path))
    elif parsed.scheme in ("http", "https", "ftp"):
        return None
    elif len(parsed.scheme) <= 1:  # no scheme, or a Windows drive letter
        path = Path(source).expanduser()
    else:
        raise DataError(f"{info.name}: cannot download from {source}: use an http(s) URL, a file:// URL or a path")
    if not path.exists():
        raise DataError(f"{info.name}: no such file or folder: {path}")
    return path


def _copy_file(src: Path, archive: Path, info: DatasetInfo) -> None:
    tmp = archive.with_name(archive.name + ".copy")
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, archive)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise DataError(f"{info.name}: cannot copy {src} into the cache: {e}") from None


def _progress_bar(enabled: bool):
    if not enabled:
        return nullcontext(None)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )


def _content_range_start(value: str | None) -> tuple[int, int | None] | None:
    """(start, total) from ``Content-Range: bytes START-END/TOTAL`` (total None for '*')."""
    m = re.fullmatch(r"\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*", value or "")
    if not m:
        return None
    return int(m[1]), None if m[3] == "*" else int(m[3])


def _http_download(url: str, archive: Path, info: DatasetInfo, *, progress: bool, timeout: float) -> None:
    """Download ``url`` into ``archive``, appending to ``archive.part`` when one is left over."""
    part = archive.with_name(archive.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    if info.size is not None and have > info.size:  # not a prefix of the file we want
        part.unlink()
        have = 0
    if info.size is not None and have == info.size:  # finished before, renamed never
        os.replace(part, archive)
        return

    headers = {"User-Agent": _USER_AGENT, "Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # the part already holds everything the server has
            os.replace(part, archive)
            return
        raise DataError(
            f"could not download {info.name} from {url}: the server answered HTTP {e.code} {e.reason}; "
            + _offline_hint(info)
        ) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", None) or e
        raise DataError(f"could not download {info.name} from {url} ({reason}); " + _offline_hint(info)) from None

    with response:
        status = getattr(response, "status", None) or response.getcode()
        length = response.headers.get("Content-Length")
        length = int(length) if length and length.isdigit() else None
        content_range = _content_range_start(response.headers.get("Content-Range"))
        if have and status == 206 and content_range is not None and content_range[0] <= have:
            start, total = content_range
            if start < have:  # the server resumes earlier than asked: drop the overlap
                with open(part, "r+b") as f:
                    f.truncate(start)
            have = start
            if total is None and length is not None:
                total = start + length
            mode = "ab"
        elif have and status == 206:  # a range we cannot use: start again from scratch
            response.close()
            part.unlink()
            _http_download(url, archive, info, progress=progress, timeout=timeout)
            return
        else:  # 200: the server ignored Range (or there was nothing to resume)
            have, total, mode = 0, length, "wb"

        written = have
        try:
            with open(part, mode) as f, _progress_bar(progress) as bar:
                label = f"{info.name} {archive.name[len(info.name) + 10 :]}"  # drop "<name>-<tag>-"
                task = bar.add_task(label, total=total, completed=have) if bar is not None else None
                while True:
                    chunk = response.read(_CHUNK)
                    if not chunk:
                        break
                    f.write(chunk)
                    written += len(chunk)
                    if bar is not None:
                        bar.update(task, completed=written)
        except (OSError, http.client.HTTPException) as e:
            raise DataError(
                f"download of {info.name} from {url} was interrupted after {written:,} bytes ({e}); "
                f"run the same command again to resume"
            ) from None
    if total is not None and written != total:
        raise DataError(
            f"download of {info.name} from {url} stopped at {written:,} of {total:,} bytes; "
            f"run the same command again to resume"
        )
    os.replace(part, archive)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verify(archive: Path, info: DatasetInfo, source: str) -> None:
    """Check size and sha256 where known; a mismatching file is deleted, never unpacked."""
    why = "the cached copy was deleted: the download was corrupt, or the source holds a different file"
    if info.size is not None:
        got = archive.stat().st_size
        if got != info.size:
            archive.unlink(missing_ok=True)
            raise DataError(f"{info.name}: the file from {source} has {got:,} bytes, expected {info.size:,} ({why})")
    if info.sha256 is not None:
        got = _sha256(archive)
        if got != info.sha256:
            archive.unlink(missing_ok=True)
            raise DataError(f"{info.name}: the file from {source} has sha256 {got}, expected {info.sha256} ({why})")


# ---------------------------------------------------------------------------------------------
# unpacking


def _install(target: Path, info: DatasetInfo, fill) -> None:
    """Fill a temporary folder beside ``target``, then rename it into place (all or nothing)."""
    from docattn.data.encoding import temp_dir

    tmp = temp_dir(target.parent, prefix=f".{info.name}.", suffix=".tmp")
    try:
        fill(tmp)
        _make_dirs_writable(tmp)
        root = _find_root(tmp, info)
        if root is None:
            raise _BadArchive(
                f"{info.name}: the archive holds no folder with {', '.join(info.files)} "
                f"(expected the {info.layout!r} layout)"
            )
        if info.layout == "zhang" and not (root / "classes.txt").exists() and info.class_names:
            # Yelp and Amazon ship no classes.txt: write the registry's names, so labels read as names, not 1, 2
            (root / "classes.txt").write_text("\n".join(info.class_names) + "\n", encoding="utf-8")
        if info.layout == "tang":  # keep just this set's .ss files: the archive holds all four sets
            flat = temp_dir(target.parent, prefix=f".{info.name}.", suffix=".tmp")
            for file_name in info.files:
                os.replace(root / file_name, flat / file_name)
            shutil.rmtree(tmp)
            tmp = flat
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process finished first: keep its copy
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _make_dirs_writable(folder: Path) -> None:
    # archives and read-only shares carry 0555 folders; the cache must stay deletable
    for dirpath, _, _ in os.walk(folder):
        mode = os.stat(dirpath).st_mode
        if mode & stat.S_IRWXU != stat.S_IRWXU:
            os.chmod(dirpath, mode | stat.S_IRWXU)


def _has_files(folder: Path, files: tuple[str, ...]) -> bool:
    return all((folder / f).exists() for f in files)


def _find_root(folder: Path, info: DatasetInfo, max_depth: int = 3) -> Path | None:
    """The folder under ``folder`` holding ``info.files``: ``info.root`` first, then a shallow search."""
    first = folder / info.root if info.root else folder
    if _has_files(first, info.files):
        return first
    for dirpath, dirnames, _ in os.walk(folder):
        here = Path(dirpath)
        if _has_files(here, info.files):
            return here
        if len(here.relative_to(folder).parts) >= max_depth:
            dirnames[:] = []
        dirnames.sort()
    return None


def _copy_folder(src: Path, tmp: Path, info: DatasetInfo) -> None:
    root = _find_root(src, info)
    if root is None:
        raise DataError(f"{info.name}: {src} holds no folder with {', '.join(info.files)}")
    if info.layout == "tang":
        for file_name in info.files:
            shutil.copyfile(root / file_name, tmp / file_name)
        return
    into = tmp / info.root if info.root else tmp
    shutil.copytree(root, into, dirs_exist_ok=True, copy_function=shutil.copyfile)


def _unpack(archive: Path, into: Path, info: DatasetInfo) -> None:
    with open(archive, "rb") as f:
        head = f.read(8)
    if head.startswith(_SEVEN_ZIP_MAGIC):
        raise DataError(
            f"{info.name}: {archive} is a 7z archive, which docattn cannot unpack: run `7z x {archive}` "
            f"and then `docattn data download {info.name} --url /path/to/the/unpacked/folder`"
        )
    try:
        if zipfile.is_zipfile(archive):
            _unpack_zip(archive, into, info)
        elif tarfile.is_tarfile(archive):
            _unpack_tar(archive, into, info)
        else:
            raise _BadArchive(f"{info.name}: {archive.name} is not a tar or zip archive")
    except DataError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, ValueError, zlib.error) as e:
        raise _BadArchive(f"{info.name}: cannot unpack {archive.name}: {e}") from None
    except OSError as e:  # the disk, not the archive: keep the archive for the next try
        raise DataError(f"{info.name}: cannot unpack {archive.name} into {into.parent}: {e}") from None


def _unpack_limits(archive: Path, info: DatasetInfo) -> SizeCheck:
    """The checks on an archive unpacked onto disk (limits: module docstring)."""
    where = f"{info.name}: {archive.name}"
    return SizeCheck(
        archive,
        where=where,
        member_where=where,
        member_limit=setting("DOCATTN_MAX_UNPACK_MEMBER_BYTES", MAX_UNPACK_MEMBER_BYTES),
        too_big="for one file; nothing was unpacked. If the archive is trusted, raise "
        "DOCATTN_MAX_UNPACK_MEMBER_BYTES and run again",
        total_limit=setting("DOCATTN_MAX_UNPACK_BYTES", MAX_UNPACK_BYTES),
        too_much="nothing was unpacked. If the archive is trusted, raise DOCATTN_MAX_UNPACK_BYTES and run again",
    )


def _refuse_unsafe(info: DatasetInfo, archive: Path, member: str) -> None:
    if unsafe_name(member):
        raise _BadArchive(
            f"{info.name}: {archive.name} holds an unsafe member {member!r} (absolute or '..'): refusing to unpack it"
        )


def _unpack_zip(archive: Path, into: Path, info: DatasetInfo) -> None:
    with zipfile.ZipFile(archive) as zf:
        # extracting stops at each member's file_size
        zip_members(zf, _unpack_limits(archive, info), screen=lambda m: _refuse_unsafe(info, archive, m.filename))
        zf.extractall(into)


def _unpack_tar(archive: Path, into: Path, info: DatasetInfo) -> None:
    with tarfile.open(archive, "r:*") as tf:
        members = []
        files = set()  # regular files kept so far: what a hard link may name
        screen = lambda m: _refuse_unsafe(info, archive, m.name)
        for member in tar_members(tf, _unpack_limits(archive, info), screen):
            if member.issym() or member.islnk():
                if link_leaves(member.name, member.linkname, hard=member.islnk()):
                    raise _BadArchive(
                        f"{info.name}: {archive.name} holds a link {member.name!r} -> {member.linkname!r} "
                        f"pointing outside the archive"
                    )
                # tarfile extracts a hard link to a missing file by extracting its target member again: a
                # skipped device came back as a device node, and a missing one was a KeyError
                if member.islnk() and os.path.normpath(member.linkname) not in files:
                    raise _BadArchive(
                        f"{info.name}: {archive.name} holds a hard link {member.name!r} -> {member.linkname!r} "
                        "to no regular file before it in the archive: refusing to unpack it"
                    )
            elif not (member.isfile() or member.isdir()):
                continue  # devices and fifos have no place in a data set
            if member.isfile() or member.islnk():
                files.add(os.path.normpath(member.name))
            members.append(member)
        if hasattr(tarfile, "data_filter"):
            try:
                tf.extractall(into, members=members, filter="data")
            except tarfile.FilterError as e:
                raise _BadArchive(f"{info.name}: {archive.name} holds an unsafe member: {e}") from None
        else:  # Python < 3.11.4: the checks above stand in for the data filter
            tf.extractall(into, members=members)
