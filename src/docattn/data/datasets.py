"""The catalogue: the papers' standard benchmarks by name, each row where the data set lives, the layout its
reader expects, its classes and split sizes. ``docattn data download`` (data/download.py) fetches them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from docattn.errors import DataError

LAYOUTS = ("zhang", "folder", "tang")  # the reader formats in docattn.data


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

# fmt: off
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
# fmt: on

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
