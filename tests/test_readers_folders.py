"""Readers of folder-per-label data: trees, tar and zip archives of them, links in either, splits read lazily."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from conftest import without_the_fast_tar_reader
from reader_files import build_tar, build_tree, build_zip, write

from docattn.data import readers
from docattn.data.readers import detect_format, read_corpus, read_splits, read_texts
from docattn.errors import DataError

IMDB_LIKE = {
    "aclImdb/README": "read me",
    "aclImdb/imdb.vocab": "the\nand\n",
    "aclImdb/train/labeledBow.feat": "0 0:1",
    "aclImdb/train/urls_pos.txt": "http://x",
    "aclImdb/train/pos/0_9.txt": "\ufeffgreat\r\nfilm",
    "aclImdb/train/pos/1_8.txt": "loved\x00it\x1e",
    "aclImdb/train/neg/0_2.txt": b"caf\xe9 was bad",  # latin-1: decoded as such, counted
    "aclImdb/train/neg/1_1.txt": "   ",  # empty: skipped
    "aclImdb/train/unsup/0_0.txt": "no label",
    "aclImdb/test/pos/0_10.txt": "superb",
    "aclImdb/test/neg/0_1.txt": "awful",
    "aclImdb/test/neg/.hidden.txt": "hidden",
    "__MACOSX/aclImdb/test/neg/._0_1.txt": "resource fork",
}


@pytest.fixture(params=["directory", "tar.gz", "zip"])
def imdb_like(request, tmp_path) -> Path:
    if request.param == "directory":
        return build_tree(tmp_path / "data", IMDB_LIKE)
    if request.param == "zip":
        return build_zip(tmp_path / "aclImdb.zip", IMDB_LIKE)
    return build_tar(tmp_path / "aclImdb.tar.gz", IMDB_LIKE)


def test_folder_layout_imdb_like(imdb_like):
    assert detect_format(imdb_like) == "folder"
    splits = read_splits(imdb_like)
    assert list(splits) == ["train", "test"]
    train, test = splits["train"], splits["test"]
    assert train.ids == ["aclImdb/train/neg/0_2.txt", "aclImdb/train/pos/0_9.txt", "aclImdb/train/pos/1_8.txt"]
    assert train.texts == ["caf\u00e9 was bad", "great\nfilm", "loved it "]
    assert train.labels == ["neg", "pos", "pos"]
    assert train.classes == ["neg", "pos"]
    assert train.stats == {"skipped_empty": 1, "decode_errors": 1}
    assert test.texts == ["awful", "superb"] and test.labels == ["neg", "pos"]


def test_read_texts_takes_training_text_with_unlabelled_folders_and_never_test(imdb_like):
    texts = read_texts(imdb_like)
    assert texts.labels is None
    assert texts.ids == [
        "aclImdb/train/neg/0_2.txt",
        "aclImdb/train/pos/0_9.txt",
        "aclImdb/train/pos/1_8.txt",
        "aclImdb/train/unsup/0_0.txt",
    ]
    assert "superb" not in texts.texts and "awful" not in texts.texts
    assert texts.stats["skipped_empty"] == 1


def test_read_texts_from_files_and_trees_without_splits(tmp_path):
    lines = write(tmp_path / "more.txt", "one review\n\nanother review\n")
    assert read_texts(lines).texts == ["one review", "another review"]
    csv_file = write(tmp_path / "l.csv", "text,label\ngood,pos\nbad,neg\n")
    assert read_texts(csv_file).texts == ["good", "bad"] and read_texts(csv_file).labels is None
    bbc = build_tree(tmp_path / "bbc", {"bbc/tech/001.txt": "chips", "bbc/sport/001.txt": "goal"})
    assert sorted(read_texts(bbc).texts) == ["chips", "goal"]
    only_test = build_tree(tmp_path / "t", {"d/test/pos/1.txt": "x", "d/test/neg/2.txt": "y"})
    with pytest.raises(DataError, match="no training split"):
        read_texts(only_test)
    with pytest.raises(DataError, match="not found|no such"):
        read_texts(tmp_path / "missing.txt")


def test_folder_newsgroups_and_bbc_like(tmp_path):
    news = build_tar(
        tmp_path / "news.tgz",
        {
            "20news-bydate-train/sci.space/1": "orbit",
            "20news-bydate-train/rec.autos/2": "engine",
            "20news-bydate-test/sci.space/3": "launch",
        },
    )
    splits = read_splits(news)
    assert {k: v.labels for k, v in splits.items()} == {"train": ["rec.autos", "sci.space"], "test": ["sci.space"]}
    bbc = build_tree(
        tmp_path / "bbc_dir", {"bbc/README.TXT": "about", "bbc/tech/001.txt": "chips", "bbc/sport/001.txt": "goal"}
    )
    assert list(read_splits(bbc)) == ["all"]
    assert read_corpus(bbc).labels == ["sport", "tech"]


@pytest.mark.parametrize(
    "mode, kwargs",
    [
        ("w:gz", {"format": tarfile.PAX_FORMAT}),
        ("w:bz2", {"format": tarfile.GNU_FORMAT}),
        ("w:xz", {"format": tarfile.USTAR_FORMAT}),
        ("w", {}),
    ],
)
def test_fast_tar_reader_matches_tarfile(tmp_path, monkeypatch, mode, kwargs):
    deep = "d" * 60 + "/" + "e" * 60  # names past 100 bytes need a prefix, a pax or a GNU header
    files = {
        f"{deep}/train/pos/{'f' * 30}.txt": "long name",
        "x/train/néga/1.txt": "unicode folder",
        "x/train/pos/empty.txt": "",
    }
    path = build_tar(
        tmp_path
        / f"a.{mode[2:] or 'tar'}".replace(".gz", ".tar.gz").replace(".bz2", ".tar.bz2").replace(".xz", ".tar.xz"),
        files,
        mode,
        **kwargs,
    )
    fast = readers._archive_tree(path)

    without_the_fast_tar_reader(monkeypatch)
    slow = readers._archive_tree(path)
    assert fast.paths == slow.paths == sorted(files) and fast.data == slow.data


def test_linked_label_folders_are_followed_without_looping(tmp_path):
    """data/train/pos -> elsewhere is read (it was silently dropped); a link to an ancestor does not loop."""
    write(tmp_path / "elsewhere" / "pos" / "1.txt", "superb")
    write(tmp_path / "data" / "train" / "neg" / "1.txt", "awful")
    (tmp_path / "data" / "train" / "pos").symlink_to(tmp_path / "elsewhere" / "pos", target_is_directory=True)
    (tmp_path / "data" / "train" / "neg" / "loop").symlink_to(tmp_path / "data", target_is_directory=True)
    write(tmp_path / "data" / "test" / "pos" / "2.txt", "great")
    corpus = read_corpus(tmp_path / "data", split="train")
    assert sorted(zip(corpus.labels, corpus.texts)) == [("neg", "awful"), ("pos", "superb")]
    for a, b in (("x", "y"), ("y", "z"), ("z", "x")):  # folders linking to each other inside the tree
        write(tmp_path / "ring" / a / "1.txt", a)
        (tmp_path / "ring" / a / "see_also").symlink_to(tmp_path / "ring" / b, target_is_directory=True)
    assert sorted(readers._directory_tree(tmp_path / "ring").paths) == ["x/1.txt", "y/1.txt", "z/1.txt"]
    for a, b in (("pos", "neg"), ("neg", "pos")):  # label folders linking to each other: read where they are
        write(tmp_path / "m" / "train" / a / f"{a}.txt", f"{a} film")
        (tmp_path / "m" / "train" / a / f"see_{b}").symlink_to(f"../{b}", target_is_directory=True)
    swapped = read_corpus(tmp_path / "m", split="train")
    assert sorted(zip(swapped.labels, swapped.texts)) == [("neg", "neg film"), ("pos", "pos film")]
    outside = tmp_path / "far"  # a cycle through folders outside the tree still ends
    write(outside / "a" / "1.txt", "a")
    (outside / "a" / "up").symlink_to(outside, target_is_directory=True)
    write(tmp_path / "near" / "all" / "keep.txt", "k")
    (tmp_path / "near" / "far").symlink_to(outside, target_is_directory=True)
    assert sorted(readers._directory_tree(tmp_path / "near").paths) == ["all/keep.txt", "far/a/1.txt"]
    from docattn.data.encoding import fingerprint_path

    before = fingerprint_path(tmp_path / "data")
    write(tmp_path / "elsewhere" / "pos" / "2.txt", "fine")  # a change behind the link changes the cache key
    assert fingerprint_path(tmp_path / "data") != before


@pytest.mark.parametrize("fast", [True, False], ids=["fast-reader", "tarfile"])
def test_archive_links_read_as_their_targets(tmp_path, monkeypatch, fast):
    """Hard links, and symbolic links to files or folders inside the archive, read as their targets;
    a link leaving the archive is counted in stats["skipped_links"], never silently dropped."""
    path = build_tar(
        tmp_path / "links.tar.gz",
        {
            "neg/1.txt": "awful",
            "neg/2.txt": (tarfile.LNKTYPE, "neg/1.txt"),  # hard links name an earlier member
            "pos/1.txt": (tarfile.SYMTYPE, "../shared/good.txt"),
            "more": (tarfile.SYMTYPE, "shared2"),  # a folder link: its files are read under its name
            "shared2/3.txt": "fine",
            "shared/good.txt": "superb",
            "pos/3.txt": (tarfile.SYMTYPE, "/etc/passwd"),  # outside: skipped, counted
        },
    )
    if not fast:
        without_the_fast_tar_reader(monkeypatch)
    tree = readers._archive_tree(path)
    assert tree.data["neg/2.txt"] == b"awful" and tree.data["pos/1.txt"] == b"superb"
    assert tree.data["more/3.txt"] == b"fine" and tree.skipped_links == ["pos/3.txt -> (outside the archive)"]
    corpus = read_corpus(path)
    assert sorted(zip(corpus.labels, corpus.texts)) == [
        ("more", "fine"),
        ("neg", "awful"),
        ("neg", "awful"),
        ("pos", "superb"),
        ("shared", "superb"),
        ("shared2", "fine"),
    ]
    assert corpus.stats["skipped_links"] == 1


def test_archive_folder_links_survive_broken_links_inside_and_long_targets(tmp_path):
    """A folder link is read even when its folder holds a broken link; a target past 100 bytes (pax linkpath) is
    whole."""
    long = "d" * 120 + "/real.txt"
    path = build_tar(
        tmp_path / "links.tar",
        {
            "data/train/pos/1.txt": "superb",
            "data/train/pos/broken.txt": (tarfile.SYMTYPE, "missing.txt"),
            "data/test": (tarfile.SYMTYPE, "train"),
            long: "far",
            "data/train/neg/1.txt": (tarfile.SYMTYPE, "../../../" + long),
            "a/l1": (
                tarfile.SYMTYPE,
                ".",
            ),  # two links to their own folder: not followed (a tree on disk is not either)
            "a/l2": (tarfile.SYMTYPE, "."),
            "a/x.txt": "x",
        },
        "w",
        format=tarfile.PAX_FORMAT,
    )
    tree = readers._archive_tree(path)
    assert tree.data["data/test/pos/1.txt"] == b"superb" and tree.data["data/train/neg/1.txt"] == b"far"
    assert sorted(tree.skipped_links) == [
        "a/l1 -> a (a folder the link is in)",
        "a/l2 -> a (a folder the link is in)",
        "data/train/pos/broken.txt -> data/train/pos/missing.txt",
    ]
    assert "a/l1/x.txt" not in tree.data and "a/l2/x.txt" not in tree.data and tree.data["a/x.txt"] == b"x"

    path = build_tar(
        tmp_path / "chain.tar",
        {  # a broken link elsewhere must not cost a folder link its files
            "d/a/g": "x",
            "d/c/f": "x",
            "d/b": (tarfile.SYMTYPE, "a"),
            "d/a/l": (tarfile.SYMTYPE, "../c"),
            "d/c/m": (tarfile.SYMTYPE, "../missing"),
        },
        "w",
        format=tarfile.USTAR_FORMAT,
    )
    tree = readers._archive_tree(path)
    assert "d/b/l/f" in tree.data and "d/a/l/f" in tree.data and tree.skipped_links == ["d/c/m -> d/missing"]


def test_many_broken_links_are_not_quadratic(tmp_path):
    import time

    members = {f"pos/{i}.txt": "x" for i in range(20000)} | {
        f"neg/{i}.txt": (tarfile.SYMTYPE, f"gone/{i}.txt") for i in range(1000)
    }
    path = build_tar(tmp_path / "many.tar", members, "w", format=tarfile.USTAR_FORMAT)
    start = time.perf_counter()
    tree = readers._archive_tree(path)
    assert len(tree.skipped_links) == 1000 and time.perf_counter() - start < 5


def test_folder_read_of_one_split_skips_decoding_the_others(tmp_path):
    path = build_tar(tmp_path / "a.tar", IMDB_LIKE, "w")
    assert read_corpus(path, split="test").texts == ["awful", "superb"]
    with pytest.raises(DataError, match=r"a\.tar holds several splits \(train, test\)"):
        read_corpus(path)
    with pytest.raises(DataError, match="a\\.tar has no split 'dev' \\(splits: train, test\\)"):
        read_corpus(path, split="dev")


def test_deeper_folder_trees_are_labelled_by_their_top_label_folders(tmp_path):
    """pos/batch1/*.txt and neg/batch1/*.txt: the labels are pos and neg, with or without a split folder."""
    for root in ("plain", "split/train"):
        for label in ("pos", "neg"):
            for batch in ("batch1", "batch2"):
                write(tmp_path / root / label / batch / "1.txt", f"a {label} document")
    plain = read_corpus(tmp_path / "plain")
    assert sorted(set(plain.labels)) == ["neg", "pos"] and len(plain) == 4
    train = read_splits(tmp_path / "split")["train"]
    assert sorted(set(train.labels)) == ["neg", "pos"] and all(
        t == f"a {y} document" for t, y in zip(train.texts, train.labels)
    )
    write(tmp_path / "one" / "top" / "pos" / "1.txt", "only one label folder")
    assert read_corpus(tmp_path / "one").labels == ["pos"]  # all in one folder: its own name
