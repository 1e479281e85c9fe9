"""docattn.data.registry: entries, download (resume, verify, offline), safe unpacking, resolve.

Every download goes to a loopback HTTP server serving ../shared/data (with Range support) or to
local files; a guard fails any test that would open a URL on another host.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import socket
import tarfile
import threading
import urllib.request
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest

from docattn.data import registry
from docattn.data.registry import DATASETS, LAYOUTS, download, get_dataset, resolve
from docattn.errors import DataError

BBC_TOPICS = {"business": 510, "entertainment": 386, "politics": 417, "sport": 511, "tech": 401}


# ---------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own cache, no mirror, and may open loopback URLs only."""
    monkeypatch.setenv("DOCATTN_DATA", str(tmp_path / "cache"))
    monkeypatch.delenv("DOCATTN_MIRROR", raising=False)
    real_urlopen = urllib.request.urlopen

    def loopback_only(request, *args, **kwargs):
        url = request.full_url if isinstance(request, urllib.request.Request) else request
        host = urlparse(url).hostname
        assert host == "127.0.0.1", f"test tried to open {url}"
        return real_urlopen(request, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", loopback_only)
    return tmp_path / "cache"


class RangeHandler(SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler plus ``Range: bytes=N-M`` (206), and switches the tests flip."""

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        server = self.server
        server.seen.append((self.path, self.headers.get("Range")))
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            self.send_error(404, "not found")
            return
        data = Path(path).read_bytes()
        size = len(data)
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
        if match is None or server.ignore_range:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            body = data if server.truncate_at is None else data[: server.truncate_at]
            self.wfile.write(body)  # a short body with the full length = a dropped connection
            return
        start = int(match[1])
        end = min(int(match[2]) if match[2] else size - 1, size - 1)
        if start >= size:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        self.wfile.write(data[start : end + 1])


@pytest.fixture
def serve():
    """``serve(folder) -> (base_url, server)``: a loopback server on a free port, stopped after the test."""
    servers = []

    def start(folder: Path):
        server = ThreadingHTTPServer(("127.0.0.1", 0), partial(RangeHandler, directory=str(folder)))
        server.seen, server.ignore_range, server.truncate_at = [], False, None
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def bbc_archive(shared_data) -> Path:
    return shared_data / "bbc" / "bbc.tar.gz"


@pytest.fixture
def bbc_sha256(shared_data) -> str:
    for line in (shared_data / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        if name.strip() == "bbc/bbc.tar.gz":
            return digest
    raise AssertionError("bbc/bbc.tar.gz missing from SHA256SUMS")


@pytest.fixture
def bbc_entry(monkeypatch, serve, shared_data, bbc_archive, bbc_sha256):
    """A registry entry for the local BBC archive on a loopback server, with its known size and sha256."""
    base, server = serve(shared_data)
    info = dataclasses.replace(
        DATASETS["bbc"],
        name="bbc_local",
        url=f"{base}/bbc/bbc.tar.gz",
        archive="bbc.tar.gz",
        size=bbc_archive.stat().st_size,
        sha256=bbc_sha256,
    )
    monkeypatch.setitem(DATASETS, info.name, info)
    return info, server


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_bbc_layout(root: Path) -> None:
    assert root.name == "bbc"
    for topic, count in BBC_TOPICS.items():
        assert len(list((root / topic).glob("*.txt"))) == count


def leftovers(cache: Path) -> list[str]:
    """Files in the download folder and half-built temp folders left in the cache."""
    downloads = cache / ".downloads"
    files = [p.name for p in downloads.iterdir()] if downloads.exists() else []
    return files + [p.name for p in cache.glob(".*.tmp")] if cache.exists() else files


# ---------------------------------------------------------------------------------------------
# the registry


def test_every_entry_is_well_formed():
    names = [info.name for info in DATASETS.values()]
    assert len(names) == len(set(names))
    assert {
        "ag_news",
        "dbpedia",
        "yahoo_answers",
        "yelp_polarity",
        "yelp_full",
        "amazon_polarity",
        "amazon_full",
        "imdb",
        "20news",
        "yelp2013",
        "yelp2014",
        "imdb10",
    } <= set(DATASETS)
    for key, info in DATASETS.items():
        assert key == info.name
        assert info.layout in LAYOUTS
        assert info.num_classes == len(info.class_names) >= 2
        assert len(set(info.class_names)) == info.num_classes
        assert info.url.startswith(("http://", "https://"))
        assert info.archive and "/" not in info.archive
        assert info.papers and info.description and info.title and info.files
        assert info.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", info.sha256)
        assert info.size is None or info.size > 0
        assert info.total is None or info.total > 0
        for split in (info.train, info.dev, info.test):
            assert split is None or split > 0
        if info.layout == "tang":
            assert "no stable public url" in info.description.lower()
            assert all(f.endswith(".ss") for f in info.files)


def test_known_checksums():
    assert DATASETS["imdb"].size == 84_125_825 and DATASETS["imdb"].sha256
    assert DATASETS["20news"].sha256 and DATASETS["20news"].train == 11_314


def test_entry_validation_rejects_bad_layout_and_class_count():
    with pytest.raises(ValueError, match="layout"):
        dataclasses.replace(DATASETS["imdb"], layout="csv")
    with pytest.raises(ValueError, match="class names"):
        dataclasses.replace(DATASETS["imdb"], num_classes=3)


def test_get_dataset_normalises_and_lists_names_when_unknown():
    assert get_dataset("AG-News").name == "ag_news"
    assert get_dataset("yelp_2013").name == "yelp2013"
    with pytest.raises(DataError, match="unknown data set 'nope'.*ag_news.*imdb"):
        get_dataset("nope")


def test_cache_dir_env_and_default(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCATTN_DATA", str(tmp_path / "x"))
    assert registry.cache_dir() == tmp_path / "x"
    monkeypatch.delenv("DOCATTN_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert registry.cache_dir() == tmp_path / "home" / ".cache" / "docattn" / "datasets"


# ---------------------------------------------------------------------------------------------
# downloading


def test_download_verifies_unpacks_and_is_idempotent(bbc_entry, isolated_cache):
    info, server = bbc_entry
    root = download(info.name, progress=True)
    assert root == isolated_cache / info.name / "bbc"
    assert_bbc_layout(root)
    assert leftovers(isolated_cache) == []  # archive removed after unpacking, no temp folders
    assert server.seen == [("/bbc/bbc.tar.gz", None)]

    assert download(info.name) == root  # second call: no request at all
    assert len(server.seen) == 1
    assert resolve(info.name) == root


def test_url_override_on_a_registered_entry(serve, shared_data, isolated_cache):
    base, server = serve(shared_data)
    root = download("bbc", url=f"{base}/bbc/bbc.tar.gz", progress=False)  # the zip's address, a tar.gz mirror
    assert root == isolated_cache / "bbc" / "bbc"
    assert_bbc_layout(root)


def test_dest_replaces_the_cache(bbc_entry, tmp_path, isolated_cache):
    info, _ = bbc_entry
    root = download(info.name, dest=tmp_path / "elsewhere", progress=False)
    assert root == tmp_path / "elsewhere" / info.name / "bbc"
    assert not (isolated_cache / info.name).exists()


def test_resume_from_truncated_part(bbc_entry, bbc_archive):
    info, server = bbc_entry
    part = Path(str(registry.archive_path(info.name)) + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(bbc_archive.read_bytes()[:1_000_000])
    root = download(info.name, progress=False)  # sha256 checked: only a correct resume passes
    assert server.seen == [("/bbc/bbc.tar.gz", "bytes=1000000-")]
    assert_bbc_layout(root)


def test_interrupted_download_then_resume(bbc_entry, bbc_archive):
    info, server = bbc_entry
    server.truncate_at = 700_000
    with pytest.raises(DataError, match="again to resume") as err:
        download(info.name, progress=False)
    assert "\n" not in str(err.value)
    part = Path(str(registry.archive_path(info.name)) + ".part")
    assert part.stat().st_size == 700_000
    assert not (registry.cache_dir() / info.name).exists()

    server.truncate_at = None
    assert_bbc_layout(download(info.name, progress=False))
    assert server.seen[-1] == ("/bbc/bbc.tar.gz", "bytes=700000-")


def test_server_ignoring_range_restarts_from_scratch(bbc_entry):
    info, server = bbc_entry
    server.ignore_range = True
    part = Path(str(registry.archive_path(info.name)) + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(b"garbage that must not stay in front of the archive")
    assert_bbc_layout(download(info.name, progress=False))
    assert server.seen[0][1] is not None  # it asked for a range, got 200, rewrote the file


def test_sha256_mismatch_deletes_the_file(bbc_entry, monkeypatch, isolated_cache, bbc_sha256):
    info, _ = bbc_entry
    wrong = dataclasses.replace(info, sha256="0" * 64)
    monkeypatch.setitem(DATASETS, info.name, wrong)
    with pytest.raises(DataError) as err:
        download(info.name, progress=False)
    message = str(err.value)
    assert "expected " + "0" * 64 in message and bbc_sha256 in message and "\n" not in message
    assert leftovers(isolated_cache) == []
    assert not (isolated_cache / info.name).exists()


def test_size_mismatch_deletes_the_file(bbc_entry, monkeypatch, isolated_cache):
    info, _ = bbc_entry
    monkeypatch.setitem(DATASETS, info.name, dataclasses.replace(info, size=info.size + 1))
    with pytest.raises(DataError, match=f"expected {info.size + 1:,}"):
        download(info.name, progress=False)
    assert leftovers(isolated_cache) == []


def test_verify_false_accepts_a_differently_packed_copy(bbc_entry, monkeypatch):
    info, _ = bbc_entry
    monkeypatch.setitem(DATASETS, info.name, dataclasses.replace(info, sha256="0" * 64))
    assert_bbc_layout(download(info.name, progress=False, verify=False))


def test_connection_refused_gives_the_offline_hint(monkeypatch, isolated_cache):
    url = f"http://127.0.0.1:{closed_port()}/aclImdb_v1.tar.gz"
    with pytest.raises(DataError) as err:
        download("imdb", url=url, progress=False, timeout=5)
    message = str(err.value)
    assert message.startswith(f"could not download imdb from {url}")
    assert "docattn data download imdb --url" in message and "docattn train --train" in message
    assert "\n" not in message
    assert not (isolated_cache / "imdb").exists()


def test_http_error_is_reported(serve, shared_data):
    base, _ = serve(shared_data)
    with pytest.raises(DataError, match="HTTP 404"):
        download("bbc", url=f"{base}/bbc/missing.tar.gz", progress=False)


def test_mirror_env_appends_the_archive_name(bbc_entry, serve, shared_data, monkeypatch):
    info, _ = bbc_entry
    unreachable = f"http://127.0.0.1:{closed_port()}/x.tar.gz"
    monkeypatch.setitem(DATASETS, info.name, dataclasses.replace(info, url=unreachable))
    base, mirror = serve(shared_data / "bbc")
    monkeypatch.setenv("DOCATTN_MIRROR", base + "/")
    assert_bbc_layout(download(info.name, progress=False))
    assert mirror.seen == [("/bbc.tar.gz", None)]


@pytest.mark.parametrize("as_uri", [False, True])
def test_local_file_is_copied_not_moved(bbc_entry, bbc_archive, as_uri):
    info, server = bbc_entry
    url = bbc_archive.as_uri() if as_uri else str(bbc_archive)
    assert_bbc_layout(download(info.name, url=url, progress=False))
    assert bbc_archive.exists() and server.seen == []


def test_missing_local_file(isolated_cache, tmp_path):
    with pytest.raises(DataError, match="no such file or folder"):
        download("imdb", url=str(tmp_path / "nothing.tar.gz"))


def test_unpacked_tang_folder_keeps_only_this_sets_files(monkeypatch, shared_data, isolated_cache):
    info = dataclasses.replace(
        DATASETS["yelp2013"],
        name="tang_demo",
        files=tuple(f"demo.yelp-2013-seg-20-20.{s}.ss" for s in ("train", "dev", "test")),
    )
    monkeypatch.setitem(DATASETS, info.name, info)
    root = download(info.name, url=str(shared_data / "tang2015-sample"), progress=False)
    assert root == isolated_cache / info.name
    assert sorted(p.name for p in root.iterdir()) == sorted(info.files)
    assert resolve(info.name) == root


def test_7z_archive_is_explained_and_kept(tmp_path, isolated_cache):
    fake = tmp_path / "emnlp-2015-data.7z"
    fake.write_bytes(b"7z\xbc\xaf\x27\x1c" + bytes(100))
    with pytest.raises(DataError, match=r"7z archive.*7z x.*--url"):
        download("yelp2013", url=str(fake), progress=False)
    assert registry.archive_path("yelp2013", url=str(fake)).exists()  # for the user to unpack
    assert not (isolated_cache / "yelp2013").exists()


def test_not_an_archive(tmp_path, isolated_cache):
    junk = tmp_path / "bbc.tar.gz"
    junk.write_bytes(b"this is not an archive" * 100)
    with pytest.raises(DataError, match="not a tar or zip archive"):
        download("bbc", url=str(junk), progress=False)
    assert leftovers(isolated_cache) == []


def test_archive_without_the_expected_layout(tmp_path, isolated_cache):
    archive = tmp_path / "other.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("something/else.txt", "hello")
    with pytest.raises(DataError, match="holds no folder with"):
        download("bbc", url=str(archive), progress=False)
    assert leftovers(isolated_cache) == [] and not (isolated_cache / "bbc").exists()


# ---------------------------------------------------------------------------------------------
# unsafe archives


def _tar_with(path: Path, member: tarfile.TarInfo, data: bytes = b"x") -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for topic in BBC_TOPICS:  # an otherwise valid bbc layout
            info = tarfile.TarInfo(f"bbc/{topic}/001.txt")
            info.size = 1
            tf.addfile(info, io.BytesIO(b"x"))
        tf.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return path


@pytest.mark.parametrize("name", ["../evil.txt", "bbc/../../evil.txt", "/tmp/docattn-evil.txt", "..\\evil.txt"])
def test_tar_member_escaping_the_folder_is_rejected(tmp_path, isolated_cache, name):
    member = tarfile.TarInfo(name)
    member.size = 1
    archive = _tar_with(tmp_path / "evil.tar.gz", member)
    with pytest.raises(DataError, match="unsafe member"):
        download("bbc", url=str(archive), progress=False)
    assert not (isolated_cache / "evil.txt").exists() and not (tmp_path / "evil.txt").exists()
    assert not (isolated_cache / "bbc").exists()
    assert leftovers(isolated_cache) == []


def test_tar_symlink_escaping_the_folder_is_rejected(tmp_path, isolated_cache):
    member = tarfile.TarInfo("bbc/tech/link")
    member.type, member.linkname = tarfile.SYMTYPE, "../../../../etc/passwd"
    archive = _tar_with(tmp_path / "link.tar.gz", member)
    with pytest.raises(DataError, match="outside the archive"):
        download("bbc", url=str(archive), progress=False)
    assert not (isolated_cache / "bbc").exists()


def test_zip_member_escaping_the_folder_is_rejected(tmp_path, isolated_cache):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("bbc/tech/001.txt", "fine")
        zf.writestr("../evil.txt", "bad")
    with pytest.raises(DataError, match=r"unsafe member '\.\./evil\.txt'"):
        download("bbc", url=str(archive), progress=False)
    assert not (isolated_cache / "evil.txt").exists() and not (isolated_cache / "bbc").exists()


# ---------------------------------------------------------------------------------------------
# resolve


def test_resolve_returns_existing_paths_as_is(tmp_path, bbc_archive):
    assert resolve(bbc_archive) == bbc_archive
    assert resolve(str(tmp_path)) == tmp_path


def test_resolve_never_downloads(isolated_cache):
    with pytest.raises(DataError, match=r"not downloaded yet: run `docattn data download imdb`"):
        resolve("imdb")
    assert not isolated_cache.exists() or not any(isolated_cache.iterdir())


def test_resolve_unknown_name_and_missing_path():
    with pytest.raises(DataError, match="neither an existing path nor a known data set"):
        resolve("no_such_set")
    with pytest.raises(DataError, match="no such file or folder"):
        resolve("data/missing.csv")


def test_a_damaged_cache_folder_is_reported(isolated_cache):
    (isolated_cache / "imdb").mkdir(parents=True)
    with pytest.raises(DataError, match="delete it"):
        resolve("imdb")


def test_checksum_mismatch_never_touches_a_local_source(bbc_entry, bbc_archive, monkeypatch, isolated_cache):
    info, _ = bbc_entry
    monkeypatch.setitem(DATASETS, info.name, dataclasses.replace(info, sha256="0" * 64))
    with pytest.raises(DataError, match="cached copy was deleted"):
        download(info.name, url=str(bbc_archive), progress=False)
    assert bbc_archive.exists() and leftovers(isolated_cache) == []


def test_zhang_set_without_classes_file_gets_the_registrys_names(tmp_path, isolated_cache):
    """Yelp and Amazon ship no classes.txt: the install writes the registry's, so labels are names."""
    from docattn.data.readers import read_splits

    src = tmp_path / "yelp_review_polarity_csv"
    src.mkdir()
    (src / "train.csv").write_text('"2","great food"\n"1","cold soup"\n')
    (src / "test.csv").write_text('"1","rude staff"\n')
    root = download("yelp_polarity", url=str(src), progress=False)
    assert (root / "classes.txt").read_text().split() == ["negative", "positive"]
    assert read_splits(root)["train"].labels == ["positive", "negative"]
