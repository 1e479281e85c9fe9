"""Issue 33 (docs/reliability.md), hostile archives: members that leave the archive, loop, or are devices are
skipped and counted when read, refused in one line when downloaded, and never written outside."""

from __future__ import annotations

import os
import re
import stat
import tarfile
from pathlib import Path

import pytest
from conftest import without_the_fast_tar_reader, write_tar

from docattn.data import readers, registry
from docattn.data.readers import read_corpus
from docattn.errors import DataError

_BBC = {
    f"bbc/{topic}/1.txt": f"a story about {topic}"
    for topic in ("business", "entertainment", "politics", "sport", "tech")
}


@pytest.mark.parametrize("fast", [True, False], ids=["fast-reader", "tarfile"])
def test_hostile_members_are_read_from_the_archive_only_or_skipped_and_counted(tmp_path, monkeypatch, fast):
    """'..' names are skipped (as hidden ones are); an absolute name is a path inside the archive, read from it, not
    from the disk; links that loop or leave the archive, hard links to nothing or to a device, are skipped and
    counted; devices and pipes are no documents."""
    hostile = {
        "../evil.txt": "above the archive",
        "bbc/sport/../../evil.txt": "above too",
        "/bbc/sport/2.txt": "the archive's own",
        "bbc/sport/loop1.txt": (tarfile.SYMTYPE, "loop2.txt"),
        "bbc/sport/loop2.txt": (tarfile.SYMTYPE, "loop1.txt"),
        "bbc/a": (tarfile.SYMTYPE, "b"),
        "bbc/b": (tarfile.SYMTYPE, "a"),
        "bbc/tech/passwd.txt": (tarfile.SYMTYPE, "../../../../../../etc/passwd"),
        "bbc/tech/up.txt": (tarfile.LNKTYPE, "../../etc/passwd"),
        "bbc/tech/abs.txt": (tarfile.LNKTYPE, "/etc/passwd"),
        "bbc/tech/gone.txt": (tarfile.LNKTYPE, "bbc/tech/missing.txt"),
        "bbc/tech/null.txt": (tarfile.CHRTYPE, ""),
        "bbc/tech/pipe.txt": (tarfile.FIFOTYPE, ""),
        "bbc/tech/device.txt": (tarfile.LNKTYPE, "bbc/tech/null.txt"),
    }
    path = write_tar(tmp_path / "hostile.tar.gz", {**_BBC, **hostile})
    if not fast:
        without_the_fast_tar_reader(monkeypatch)
    assert readers._archive_tree(path).skipped_links == [
        "bbc/a -> bbc/b",
        "bbc/b -> bbc/a",
        "bbc/sport/loop1.txt -> bbc/sport/loop2.txt",
        "bbc/sport/loop2.txt -> bbc/sport/loop1.txt",
        "bbc/tech/abs.txt -> etc/passwd",
        "bbc/tech/device.txt -> bbc/tech/null.txt",
        "bbc/tech/gone.txt -> bbc/tech/missing.txt",
        "bbc/tech/passwd.txt -> (outside the archive)",
        "bbc/tech/up.txt -> (outside the archive)",
    ]
    corpus = read_corpus(path)
    expected = {(p.split("/")[1], text) for p, text in _BBC.items()} | {("sport", "the archive's own")}
    assert set(zip(corpus.labels, corpus.texts)) == expected and len(corpus) == len(expected)
    assert corpus.stats["skipped_links"] == 9


def _unpack(archive: Path, tmp_path: Path):
    """``data download bbc`` of a local archive into ``tmp_path/cache``: its error, or the installed folder."""
    try:
        return registry.download("bbc", url=str(archive), dest=tmp_path / "cache", progress=False, verify=False)
    except DataError as error:
        return error


def _outside(tmp_path: Path) -> list[Path]:
    """What a download wrote outside its folder (an escaping member lands one or two levels up)."""
    return [p for p in (*tmp_path.iterdir(), *tmp_path.parent.glob("evil*")) if p.name not in ("cache", "a.tar.gz")]


@pytest.mark.parametrize(
    "members, refusal",
    [
        (
            {"bbc/tech/h.txt": (tarfile.LNKTYPE, "../../etc/passwd")},
            r"holds a link 'bbc/tech/h.txt' -> '../../etc/passwd' pointing outside",
        ),
        (
            {"bbc/tech/h.txt": (tarfile.LNKTYPE, "/etc/passwd")},
            r"holds a link 'bbc/tech/h.txt' -> '/etc/passwd' pointing outside",
        ),
        (
            {"bbc/tech/s.txt": (tarfile.SYMTYPE, "/etc/passwd")},
            r"holds a link 'bbc/tech/s.txt' -> '/etc/passwd' pointing outside",
        ),
        (
            {"bbc/tech/h.txt": (tarfile.LNKTYPE, "bbc/tech/missing.txt")},
            r"holds a hard link 'bbc/tech/h.txt' -> 'bbc/tech/missing.txt' to no regular file before it",
        ),
        (
            {"bbc/tech/null": (tarfile.CHRTYPE, ""), "bbc/tech/h.txt": (tarfile.LNKTYPE, "bbc/tech/null")},
            r"holds a hard link 'bbc/tech/h.txt' -> 'bbc/tech/null' to no regular file before it",
        ),
        (
            {"bbc/l2": (tarfile.SYMTYPE, ".."), "bbc/l1": (tarfile.SYMTYPE, "l2/../.."), "bbc/l1/evil.txt": "escaped"},
            r"holds an unsafe member: 'bbc/l1' would link to .*outside the destination",
        ),
    ],
    ids=[
        "hard-link-up",
        "hard-link-absolute",
        "symlink-absolute",
        "hard-link-to-nothing",
        "hard-link-to-a-device",
        "symlink-through-symlink",
    ],
)
def test_download_refuses_hostile_links_in_one_line_and_writes_nothing_outside(tmp_path, members, refusal):
    """A hard link to nothing was a KeyError traceback; one to a skipped device member made tarfile extract that
    member for it: a device node in the data folder."""
    error = _unpack(write_tar(tmp_path / "a.tar.gz", {**_BBC, **members}), tmp_path)
    assert isinstance(error, DataError) and "\n" not in str(error), error
    assert str(error).startswith("bbc: ") and re.search(refusal, str(error)), error
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".downloads"] and _outside(tmp_path) == []


def test_download_leaves_devices_out_and_keeps_looping_links_inside(tmp_path):
    """A device or pipe member is not created; links looping inside the archive are unpacked as the links they are,
    and reading the folder names the first with one line (a folder on disk reads a link as its target)."""
    members = {
        **_BBC,
        "bbc/tech/null.txt": (tarfile.CHRTYPE, ""),
        "bbc/tech/pipe.txt": (tarfile.FIFOTYPE, ""),
        "bbc/sport/a.txt": (tarfile.SYMTYPE, "b.txt"),
        "bbc/sport/b.txt": (tarfile.SYMTYPE, "a.txt"),
    }
    root = _unpack(write_tar(tmp_path / "a.tar.gz", members), tmp_path)
    assert isinstance(root, Path), root
    installed = {
        p.relative_to(tmp_path / "cache").as_posix(): p.lstat().st_mode for p in (tmp_path / "cache").rglob("*")
    }
    assert not [
        p for p, mode in installed.items() if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))
    ]
    links = sorted(p for p, mode in installed.items() if stat.S_ISLNK(mode))
    assert links == ["bbc/bbc/sport/a.txt", "bbc/bbc/sport/b.txt"] and _outside(tmp_path) == []
    assert os.readlink(tmp_path / "cache" / links[0]) == "b.txt"
    with pytest.raises(DataError, match=r"cannot read .*bbc/sport/a\.txt: Too many levels of symbolic links"):
        read_corpus(root)
