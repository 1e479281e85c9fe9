"""The papers' standard benchmarks by name: where each lives, how to fetch it, where it lands.

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
see docattn.data.readers). The largest registered set, Amazon Review Polarity, unpacks 688 MB to
1.8 GB (2.6:1, its train.csv 1.6 GB).
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
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from docattn.data.limits import MAX_COMPRESSION_RATIO, RATIO_FLOOR, setting
from docattn.data.readers import check_ratio
from docattn.errors import DataError

LAYOUTS = ("zhang", "folder", "tang")  # the reader formats in docattn.data
MAX_UNPACK_MEMBER_BYTES = 8 << 30  # $DOCATTN_MAX_UNPACK_MEMBER_BYTES: the largest file unpacked
MAX_UNPACK_BYTES = 32 << 30  # $DOCATTN_MAX_UNPACK_BYTES: all files of one archive
_CHUNK = 1 << 20
_USER_AGENT = "docattn (https://github.com/; dataset download)"
_SEVEN_ZIP_MAGIC = b"7z\xbc\xaf\x27\x1c"


class _BadArchive(DataError):
    """The archive itself is unusable (unsafe, corrupt, wrong layout): it is deleted, not kept for reuse."""


@dataclass(frozen=True)
class DatasetInfo:
    """One benchmark: its source, archive, the layout its reader expects, classes and split sizes.

    ``root`` is the data root's path inside the unpacked archive ("" = the top) and ``files``
    the names that root must hold; together they find the data root even when a mirror packs
    the archive a little differently. ``size`` and ``sha256`` are None where unknown: then
    verification checks only what is known. Split sizes are for documentation; None = unknown.
    """

    name: str
    title: str
    description: str
    papers: tuple[str, ...]
    url: str
    archive: str
    layout: str
    root: str
    files: tuple[str, ...]
    num_classes: int
    class_names: tuple[str, ...]
    train: int | None
    test: int | None
    dev: int | None = None
    documents: int | None = None  # total, where the split sizes are not known
    size: int | None = None
    sha256: str | None = None
    homepage: str = ""

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"{self.name}: layout {self.layout!r} is not one of {LAYOUTS}")
        if len(self.class_names) != self.num_classes:
            raise ValueError(f"{self.name}: {self.num_classes} classes but {len(self.class_names)} class names")
        if self.sha256 is not None and not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise ValueError(f"{self.name}: sha256 must be 64 lowercase hex digits")
        if not self.files:
            raise ValueError(f"{self.name}: `files` must name what the data root holds")

    @property
    def total(self) -> int | None:
        """Documents over all splits, where known."""
        if self.documents is not None:
            return self.documents
        parts = [self.train, self.dev, self.test]
        return None if self.train is None or self.test is None else sum(p or 0 for p in parts)


_ZHANG_PAPER = "Zhang et al. 2015 (character-level CNNs)"
_ZHANG_HOME = "https://github.com/zhangxiangxiao/Crepe"
_FASTAI = "https://s3.amazonaws.com/fast-ai-nlp/"
_ZHANG_NOTE = (
    " Zhang's originals sit in a Google Drive folder without stable file links; the address is "
    "the fast.ai public S3 copy (same train.csv/test.csv), whose checksum is not recorded here."
)
_TANG_URL = "http://ir.hit.edu.cn/~dytang/paper/emnlp2015/emnlp-2015-data.7z"
_TANG_NOTE = (
    " No stable public URL: the address is the best-known one (Tang's page at HIT, often offline), "
    "a 7z archive holding all four Tang sets, which docattn cannot unpack itself: unpack it "
    "(7z x) and pass the folder with --url. The file names are those of the commonly shared copies."
)
_STARS5 = ("1", "2", "3", "4", "5")


def _zhang(name, title, what, archive, classes, train, test, papers, classes_file=True):
    files = ("train.csv", "test.csv") + (("classes.txt",) if classes_file else ())
    return DatasetInfo(
        name=name,
        title=title,
        description=what + _ZHANG_NOTE,
        papers=(_ZHANG_PAPER,) + papers,
        url=_FASTAI + archive,
        archive=archive,
        layout="zhang",
        root=archive.removesuffix(".tgz"),
        files=files,
        num_classes=len(classes),
        class_names=tuple(classes),
        train=train,
        test=test,
        homepage=_ZHANG_HOME,
    )


def _tang(name, title, what, prefix, classes, documents):
    return DatasetInfo(
        name=name,
        title=title,
        description=what + _TANG_NOTE,
        papers=("Tang et al. 2015 (EMNLP, gated RNN)", "Yang et al. 2016 (HAN)"),
        url=_TANG_URL,
        archive="emnlp-2015-data.7z",
        layout="tang",
        root="",
        files=tuple(prefix.format(split=s) for s in ("train", "dev", "test")),
        num_classes=len(classes),
        class_names=tuple(classes),
        train=None,
        test=None,
        documents=documents,
        homepage="http://ir.hit.edu.cn/~dytang/",
    )


_SANET = "Letarte et al. 2018 (SANet)"
_CSPAN = "Jiang et al. (CSPAN)"
_HAN = "Yang et al. 2016 (HAN)"

_ENTRIES = [
    _zhang(
        "ag_news", "AG News",
        "News topic classification, 4 classes; rows \"class\",\"title\",\"description\".",
        "ag_news_csv.tgz", ("World", "Sports", "Business", "Sci/Tech"), 120_000, 7_600, (_SANET, _CSPAN),
    ),
    _zhang(
        "dbpedia", "DBPedia ontology",
        "Wikipedia abstracts, 14 ontology classes; rows \"class\",\"title\",\"abstract\".",
        "dbpedia_csv.tgz",
        ("Company", "EducationalInstitution", "Artist", "Athlete", "OfficeHolder", "MeanOfTransportation",
         "Building", "NaturalPlace", "Village", "Animal", "Plant", "Album", "Film", "WrittenWork"),
        560_000, 70_000, (_SANET,),
    ),
    _zhang(
        "yahoo_answers", "Yahoo! Answers",
        "Question topic classification, 10 classes; rows class, question title, question content, best answer.",
        "yahoo_answers_csv.tgz",
        ("Society & Culture", "Science & Mathematics", "Health", "Education & Reference",
         "Computers & Internet", "Sports", "Business & Finance", "Entertainment & Music",
         "Family & Relationships", "Politics & Government"),
        1_400_000, 60_000, (_HAN, _SANET, _CSPAN),
    ),
    _zhang(
        "yelp_polarity", "Yelp Review Polarity",
        "Yelp 2015 challenge reviews, 1-2 stars negative (class 1), 3-4 positive (class 2).",
        "yelp_review_polarity_csv.tgz", ("negative", "positive"), 560_000, 38_000, (_SANET, _CSPAN),
        classes_file=False,
    ),
    _zhang(
        "yelp_full", "Yelp Review Full",
        "Yelp 2015 challenge reviews, 1-5 stars (class = stars).",
        "yelp_review_full_csv.tgz", _STARS5, 650_000, 50_000, (_SANET, _CSPAN), classes_file=False,
    ),
    _zhang(
        "amazon_polarity", "Amazon Review Polarity",
        "SNAP Amazon reviews, 1-2 stars negative (class 1), 4-5 positive (class 2).",
        "amazon_review_polarity_csv.tgz", ("negative", "positive"), 3_600_000, 400_000, (_SANET,),
        classes_file=False,
    ),
    _zhang(
        "amazon_full", "Amazon Review Full",
        "SNAP Amazon reviews, 1-5 stars (class = stars).",
        "amazon_review_full_csv.tgz", _STARS5, 3_000_000, 650_000, (_HAN, _SANET), classes_file=False,
    ),
    DatasetInfo(
        name="imdb",
        title="IMDB Large Movie Review",
        description=(
            "Binary movie-review sentiment, aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt "
            "(plus 50,000 unlabelled reviews in train/unsup, which readers skip)."
        ),
        papers=("Maas et al. 2011", "Ribeiro et al. (HPAN/HSAN)"),
        url="https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
        archive="aclImdb_v1.tar.gz",
        layout="folder",
        root="aclImdb",
        files=("train", "test"),
        num_classes=2,
        class_names=("neg", "pos"),
        train=25_000,
        test=25_000,
        size=84_125_825,
        sha256="c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
        homepage="https://ai.stanford.edu/~amaas/data/sentiment/",
    ),
    DatasetInfo(
        name="20news",
        title="20 Newsgroups (bydate)",
        description=(
            "Usenet posts with headers, 20 newsgroups, split by date into 20news-bydate-train/ and "
            "20news-bydate-test/. The address is scikit-learn's figshare copy (checksum known); the "
            "original is http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz."
        ),
        papers=("Lang 1995", "docattn topic check (not in the five papers)"),
        url="https://ndownloader.figshare.com/files/5975967",
        archive="20news-bydate.tar.gz",
        layout="folder",
        root="",
        files=("20news-bydate-train", "20news-bydate-test"),
        num_classes=20,
        class_names=(
            "alt.atheism", "comp.graphics", "comp.os.ms-windows.misc", "comp.sys.ibm.pc.hardware",
            "comp.sys.mac.hardware", "comp.windows.x", "misc.forsale", "rec.autos", "rec.motorcycles",
            "rec.sport.baseball", "rec.sport.hockey", "sci.crypt", "sci.electronics", "sci.med",
            "sci.space", "soc.religion.christian", "talk.politics.guns", "talk.politics.mideast",
            "talk.politics.misc", "talk.religion.misc",
        ),
        train=11_314,
        test=7_532,
        sha256="8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610",
        homepage="http://qwone.com/~jason/20Newsgroups/",
    ),
    DatasetInfo(
        name="bbc",
        title="BBC News",
        description=(
            "2,225 BBC news articles in 5 topic folders, bbc/<topic>/<nnn>.txt (first line = title); "
            "no official train/test split."
        ),
        papers=("Greene & Cunningham 2006", "docattn topic check (not in the five papers)"),
        url="http://mlg.ucd.ie/files/datasets/bbc-fulltext.zip",
        archive="bbc-fulltext.zip",
        layout="folder",
        root="bbc",
        files=("business", "entertainment", "politics", "sport", "tech"),
        num_classes=5,
        class_names=("business", "entertainment", "politics", "sport", "tech"),
        train=None,
        test=None,
        documents=2_225,
        homepage="http://mlg.ucd.ie/datasets/bbc.html",
    ),
    _tang(
        "yelp2013", "Yelp 2013 (Tang et al. 2015)",
        "Yelp 2013 challenge reviews, 1-5 stars, 80/10/10 split; .ss lines user, product, rating, text "
        "with sentences split by <sssss>.",
        "yelp-2013-seg-20-20.{split}.ss", _STARS5, 335_018,
    ),
    _tang(
        "yelp2014", "Yelp 2014 (Tang et al. 2015)",
        "Yelp 2014 challenge reviews, 1-5 stars, 80/10/10 split; .ss format as yelp2013.",
        "yelp-2014-seg-20-20.{split}.ss", _STARS5, 1_125_457,
    ),
    _tang(
        "yelp2015", "Yelp 2015 (Tang et al. 2015)",
        "Yelp 2015 challenge reviews, 1-5 stars, 80/10/10 split; .ss format as yelp2013.",
        "yelp-2015-seg-20-20.{split}.ss", _STARS5, 1_569_264,
    ),
    _tang(
        "imdb10", "IMDB-10 (Diao et al. 2014, via Tang et al. 2015)",
        "IMDB reviews rated 1-10, 80/10/10 split; .ss format as yelp2013.",
        "imdb.{split}.txt.ss", tuple(str(i) for i in range(1, 11)), 348_415,
    ),
]

DATASETS: dict[str, DatasetInfo] = {info.name: info for info in _ENTRIES}


def _normal(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name.lower())


def get_dataset(name: str) -> DatasetInfo:
    """The registry entry for ``name`` (case, '-' and '_' are ignored: "AG-News" is "ag_news")."""
    if name in DATASETS:
        return DATASETS[name]
    for key, info in DATASETS.items():
        if _normal(key) == _normal(str(name)):
            return info
    raise DataError(f"unknown data set {name!r}: known data sets are {', '.join(DATASETS)}")


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
        raise DataError(
            f"{text!r} is neither an existing path nor a known data set ({', '.join(DATASETS)})"
        ) from None
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
        BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
        TransferSpeedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
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
                label = f"{info.name} {archive.name[len(info.name) + 10:]}"  # drop "<name>-<tag>-"
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
            raise DataError(
                f"{info.name}: the file from {source} has {got:,} bytes, expected {info.size:,} ({why})"
            )
    if info.sha256 is not None:
        got = _sha256(archive)
        if got != info.sha256:
            archive.unlink(missing_ok=True)
            raise DataError(
                f"{info.name}: the file from {source} has sha256 {got}, expected {info.sha256} ({why})"
            )


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


def _unsafe_member(name: str) -> bool:
    parts = re.split(r"[\\/]+", name)
    return name.startswith(("/", "\\")) or bool(re.match(r"[A-Za-z]:", name)) or ".." in parts


def _unsafe_message(info: DatasetInfo, archive: Path, member: str) -> str:
    return f"{info.name}: {archive.name} holds an unsafe member {member!r} (absolute or '..'): refusing to unpack it"


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


class _SizeCheck:
    """Refuses an archive from its members' headers, before anything is extracted (limits: module docstring)."""

    def __init__(self, archive: Path, info: DatasetInfo):
        self.archive, self.info = archive, info
        self.packed = archive.stat().st_size
        self.unpacked = 0
        self.most = setting("DOCATTN_MAX_UNPACK_MEMBER_BYTES", MAX_UNPACK_MEMBER_BYTES)
        self.total = setting("DOCATTN_MAX_UNPACK_BYTES", MAX_UNPACK_BYTES)
        self.ratio = setting("DOCATTN_MAX_COMPRESSION_RATIO", MAX_COMPRESSION_RATIO)

    def add(self, member: str, size: int, packed: int | None = None) -> None:
        """``member`` unpacks to ``size`` bytes, from ``packed`` (zip: its own; tar: unknown, the archive's)."""
        where = f"{self.info.name}: {self.archive.name}"
        self.unpacked += size
        if packed is not None and size > RATIO_FLOOR:
            check_ratio(f"{where} member {member!r}", size, packed, self.ratio)
        if self.unpacked > RATIO_FLOOR:
            check_ratio(f"{where} (up to member {member!r})", self.unpacked, self.packed, self.ratio)
        if size > self.most:
            raise DataError(f"{where} member {member!r} is {size:,} bytes, over the {self.most:,}-byte limit for one "
                            "file; nothing was unpacked. If the archive is trusted, raise "
                            "DOCATTN_MAX_UNPACK_MEMBER_BYTES and run again")
        if self.unpacked > self.total:
            raise DataError(f"{where} unpacks to more than {self.total:,} bytes (up to member {member!r}: "
                            f"{self.unpacked:,}); nothing was unpacked. If the archive is trusted, raise "
                            "DOCATTN_MAX_UNPACK_BYTES and run again")


def _unpack_zip(archive: Path, into: Path, info: DatasetInfo) -> None:
    with zipfile.ZipFile(archive) as zf:
        sizes = _SizeCheck(archive, info)
        for member in zf.infolist():
            if _unsafe_member(member.filename):
                raise _BadArchive(_unsafe_message(info, archive, member.filename))
            sizes.add(member.filename, member.file_size, member.compress_size)  # extracting stops at file_size
        zf.extractall(into)


def _unpack_tar(archive: Path, into: Path, info: DatasetInfo) -> None:
    with tarfile.open(archive, "r:*") as tf:
        members = []
        files = set()  # regular files kept so far: what a hard link may name
        sizes = _SizeCheck(archive, info)
        for member in tf:  # header by header: a bomb's first header refuses it before its content is inflated
            if _unsafe_member(member.name):
                raise _BadArchive(_unsafe_message(info, archive, member.name))
            sizes.add(member.name, member.size)
            if member.issym() or member.islnk():
                # a hard link names an archive path, a symbolic link a path relative to its folder
                target = os.path.join("" if member.islnk() else os.path.dirname(member.name), member.linkname)
                if member.linkname.startswith(("/", "\\")) or _unsafe_member(os.path.normpath(target)):
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
