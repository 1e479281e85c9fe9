"""Archive members walked one way, whether the readers take them into memory or ``docattn data download``
unpacks them onto disk: each member is checked from its header before its content is inflated (sizes,
compression bombs), and names or links that would leave the archive are told apart the same way."""

from __future__ import annotations

import os
import re
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from docattn.data.limits import MAX_COMPRESSION_RATIO, MAX_MEMBER_BYTES, RATIO_FLOOR, setting
from docattn.errors import DataError


class SizeCheck:
    """The size checks on one archive, each member's from its header before it is read.

    ``where`` names the archive in messages, ``member_where`` a member of it; ``too_big`` and ``too_much``
    end the messages for a member over ``member_limit`` and for all members over ``total_limit`` (None: none).
    """

    def __init__(
        self,
        path: Path,
        *,
        member_limit: int,
        too_big: str,
        where: str | None = None,
        member_where: str | None = None,
        total_limit: int | None = None,
        too_much: str = "",
        position: Callable[[], int] | None = None,
    ):
        self.path, self.position = path, position  # position: compressed bytes consumed so far
        self.where = where if where is not None else str(path)
        self.member_where = member_where if member_where is not None else f"{path}:"
        self.packed = path.stat().st_size
        self.unpacked = 0
        self.most, self.total = member_limit, total_limit
        self.too_big, self.too_much = too_big, too_much
        self.ratio = setting("DOCATTN_MAX_COMPRESSION_RATIO", MAX_COMPRESSION_RATIO)

    def before(self, member: str, size: int, packed: int | None = None) -> None:
        """Refuse ``member`` (``size`` bytes unpacked; ``packed``: compressed, when known) unread."""
        self.unpacked += size
        # messages are built only to be raised: IMDB has 50k members
        if packed is not None and size > RATIO_FLOOR and size > self.ratio * packed:
            check_ratio(f"{self.member_where} member {member!r}", size, packed, self.ratio)
        # no member takes more of the archive than all of it
        if self.unpacked > RATIO_FLOOR and self.unpacked > self.ratio * self.packed:
            check_ratio(f"{self.where} (up to member {member!r})", self.unpacked, self.packed, self.ratio)
        if size > self.most:
            raise DataError(
                f"{self.member_where} member {member!r} is {size:,} bytes, over the {self.most:,}-byte "
                f"limit {self.too_big}"
            )
        if self.total is not None and self.unpacked > self.total:
            raise DataError(
                f"{self.where} unpacks to more than {self.total:,} bytes (up to member {member!r}: "
                f"{self.unpacked:,}); {self.too_much}"
            )

    def after(self, member: str) -> None:
        """Refuse the rest when what was read so far unpacked from too few compressed bytes (many small bombs)."""
        if self.position is not None and self.unpacked > RATIO_FLOOR and self.unpacked > self.ratio * self.position():
            check_ratio(f"{self.where} (up to member {member!r})", self.unpacked, self.position(), self.ratio)


def reading_limits(path: Path, position: Callable[[], int] | None = None) -> SizeCheck:
    """The checks on an archive the readers hold in memory: $DOCATTN_MAX_MEMBER_BYTES a member."""
    return SizeCheck(
        path,
        member_limit=setting("DOCATTN_MAX_MEMBER_BYTES", MAX_MEMBER_BYTES),
        too_big="for an archive member read into memory; unpack the archive and read the folder "
        "(files on disk are read in bounded memory), or raise DOCATTN_MAX_MEMBER_BYTES",
        position=position,
    )


def check_ratio(what: str, unpacked: int, packed: int, ratio: int | None = None) -> None:
    """A DataError when ``unpacked`` bytes over RATIO_FLOOR came from ``packed`` compressed ones at more than
    ``ratio`` ($DOCATTN_MAX_COMPRESSION_RATIO) to one: text compresses about 3:1, a compression bomb about 1000:1."""
    if unpacked <= RATIO_FLOOR:
        return
    ratio = ratio or setting("DOCATTN_MAX_COMPRESSION_RATIO", MAX_COMPRESSION_RATIO)
    if unpacked > ratio * max(packed, 1):
        raise DataError(
            f"{what} unpacks to {unpacked:,} bytes from {packed:,} ({unpacked // max(packed, 1):,}:1), "
            f"over the {ratio}:1 limit: a compression bomb? Refused unread; if the archive is trusted, "
            "raise DOCATTN_MAX_COMPRESSION_RATIO"
        )


def tar_members(
    archive: tarfile.TarFile, sizes: SizeCheck, screen: Callable[[tarfile.TarInfo], None] | None = None
) -> Iterator[tarfile.TarInfo]:
    """The members of ``archive`` header by header, each screened, then size-checked before its content is read:
    a bomb's first header refuses it before anything is inflated."""
    for info in archive:
        if screen is not None:
            screen(info)
        sizes.before(info.name, info.size)
        yield info
        sizes.after(info.name)


def zip_members(
    archive: zipfile.ZipFile,
    sizes: SizeCheck,
    counted: Callable[[zipfile.ZipInfo], bool] | None = None,
    screen: Callable[[zipfile.ZipInfo], None] | None = None,
) -> list[zipfile.ZipInfo]:
    """Every entry of the central directory, screened and (those ``counted``) size-checked before any is read:
    the central directory gives every size up front, and reading a member stops at its size."""
    infos = archive.infolist()
    for info in infos:
        if screen is not None:
            screen(info)
        if counted is None or counted(info):
            sizes.before(info.filename, info.file_size, info.compress_size)
    return infos


def unsafe_name(name: str) -> bool:
    """Whether a member's name would land outside the folder it is unpacked into (absolute, or with '..')."""
    parts = re.split(r"[\\/]+", name)
    return name.startswith(("/", "\\")) or bool(re.match(r"[A-Za-z]:", name)) or ".." in parts


def link_leaves(name: str, target: str, hard: bool) -> bool:
    """Whether a link's target lies outside the archive: a hard link names an archive path, a symbolic link
    a path relative to its folder."""
    path = os.path.join("" if hard else os.path.dirname(name), target)
    return target.startswith(("/", "\\")) or unsafe_name(os.path.normpath(path))
