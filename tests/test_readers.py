"""Readers: every format on small files written here, the real benchmark archives, and bad input."""

from __future__ import annotations

import csv
import io
import json
import sys
import tarfile
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from conftest import without_the_fast_tar_reader
from hypothesis import given, settings
from hypothesis import strategies as st

from docattn.data import readers
from docattn.data.readers import detect_format, read_corpus, read_splits, read_texts
from docattn.errors import ConfigError, DataError


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def write_jsonl(path: Path, records: list[dict]) -> Path:
    return write(path, "".join(json.dumps(r) + "\n" for r in records))


# --------------------------------------------------------------------------- csv / tsv


def test_csv_with_header_defaults_to_text_and_label_columns(tmp_path):
    path = write(tmp_path / "d.csv", 'id,text,label\n1,"good, very good",1\n2,bad,0\n3,"multi\nline",1\n')
    corpus = read_corpus(path)
    assert corpus.texts == ["good, very good", "bad", "multi\nline"]
    assert corpus.labels == [1, 0, 1]  # all-integer labels become ints
    assert corpus.ids == ["2", "3", "4"]  # the line each record starts on
    assert detect_format(path) == "csv"
    assert read_splits(path).keys() == {"all"}


def test_csv_several_text_columns_by_name_are_joined_with_newlines(tmp_path):
    path = write(
        tmp_path / "news.csv", "title,description,topic\nRates up,The bank raised rates.,business\nCup final,,sport\n"
    )
    corpus = read_corpus(path, text_columns=["title", "description"], label_column="topic")
    assert corpus.texts == ["Rates up\nThe bank raised rates.", "Cup final"]
    assert corpus.labels == ["business", "sport"]


def test_csv_by_index_without_header(tmp_path):
    path = write(tmp_path / "d.csv", "pos,great film\nneg,dull film\npos,fine film\n")
    corpus = read_corpus(path, text_columns=[1], label_column=0, header=False)
    assert corpus.texts == ["great film", "dull film", "fine film"]
    assert corpus.labels == ["pos", "neg", "pos"]


def test_csv_by_index_sniffs_a_header_row(tmp_path):
    with_header = write(tmp_path / "h.csv", "stars,review\n5,great\n1,awful\n5,fine\n")
    without = write(tmp_path / "n.csv", "5,great\n1,awful\n5,fine\n")
    assert read_corpus(with_header, text_columns=[1], label_column=0).texts == ["great", "awful", "fine"]
    assert read_corpus(without, text_columns=[1], label_column=0).labels == [5, 1, 5]


def test_csv_text_column_only_gives_unlabelled_corpus(tmp_path):
    path = write(tmp_path / "d.csv", "text\nfirst\nsecond\n")
    assert read_corpus(path).labels is None


def test_tsv_and_custom_delimiter(tmp_path):
    tsv = write(tmp_path / "d.tsv", "label\ttext\nspam\tbuy now, cheap\nham\tsee you at 5\n")
    assert detect_format(tsv) == "tsv"
    corpus = read_corpus(tsv)
    assert corpus.texts == ["buy now, cheap", "see you at 5"] and corpus.labels == ["spam", "ham"]
    semicolon = write(tmp_path / "d.csv", "label;text\na;x, y\n")
    assert read_corpus(semicolon, delimiter=";").texts == ["x, y"]


def test_tsv_quoted_by_a_csv_writer_or_not_at_all(tmp_path, monkeypatch):
    """pandas quotes TSV fields holding quotes; GLUE-style files do not, and a text may start with a bare quote."""
    pandas_style = write(tmp_path / "p.tsv", 'text\tlabel\n"""Great"" film"\tpos\n"two\nlines"\tneg\n')
    assert read_corpus(pandas_style).texts == ['"Great" film', "two\nlines"]
    bare = 'text\tlabel\n"Hello world\tpos\nanother\tneg\n"quoted" start\tneg\n'
    corpus = read_corpus(write(tmp_path / "b.tsv", bare))
    assert corpus.texts == ['"Hello world', "another", '"quoted" start'] and corpus.labels == ["pos", "neg", "neg"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(bare.encode())))
    assert read_corpus("-", format="tsv").texts == corpus.texts  # stdin is read once, parsed twice
    with pytest.raises(DataError, match=r"b\.csv:2: malformed CSV record"):  # CSV keeps its quoting rules
        read_corpus(write(tmp_path / "b.csv", bare.replace("\t", ",")))


def test_tsv_quoted_field_with_a_line_break_and_a_tab_is_one_field_and_is_counted(tmp_path):
    """A csv writer's field "Title<TAB>subtitle<LF>body" and a bare quote whose partner sits before a
    tab look the same; both read as CSV quoting says, and the stats count them so it is not silent."""
    written = 'text\tlabel\n"Title\tsubtitle\nbody text"\tpos\n"He said ""hi"""\tneg\n'
    corpus = read_corpus(write(tmp_path / "w.tsv", written))
    assert corpus.texts == ["Title\tsubtitle\nbody text", 'He said "hi"'] and corpus.labels == ["pos", "neg"]
    assert corpus.stats["quoted_tab_breaks"] == 1 and corpus.stats["first_quoted_tab_break"].endswith("w.tsv:2-3")
    plain = read_corpus(write(tmp_path / "p.tsv", 'text\tlabel\n"two\nlines"\tneg\nplain\tpos\n'))
    assert "quoted_tab_breaks" not in plain.stats  # a line break alone is an ordinary quoted field
    commas = read_corpus(write(tmp_path / "c.csv", 'text,label\n"a,\nb\tc",pos\nd,neg\n'))
    assert "quoted_tab_breaks" not in commas.stats  # CSV files: only tabs inside TSV fields are in doubt


# --------------------------------------------------------------------------- jsonl


def test_jsonl_custom_fields_keep_json_label_types(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"body": "one", "y": 3}, {"body": "two", "y": 1}])
    corpus = read_corpus(path, text_field="body", label_field="y")
    assert corpus.texts == ["one", "two"] and corpus.labels == [3, 1]
    assert corpus.sentences is None and corpus.rationales is None


def test_jsonl_fields_from_the_cli_column_options(tmp_path):
    """--text-col/--label-col arrive as text_columns/label_column: on a JSONL file they name its fields."""
    from docattn.data.sources import reader_options

    path = write_jsonl(tmp_path / "d.jsonl", [{"body": "one", "y": 3}, {"body": "two", "y": 1}])
    corpus = read_corpus(path, **reader_options(None, "body", "y"))
    assert corpus.texts == ["one", "two"] and corpus.labels == [3, 1]
    with pytest.raises(ConfigError, match="reads one text field"):
        read_corpus(path, **reader_options(None, "body,y", None))
    with pytest.raises(
        DataError, match=r"no field 'text' \(fields: body, y\); pass text_field= \(on the command line --text-col\)"
    ):
        read_corpus(path)


def test_ignore_labels_reads_text_whatever_the_labels(tmp_path):
    csv_path = write(tmp_path / "d.csv", "text,label\none,\ntwo,b\n")
    with pytest.raises(DataError, match="missing or empty label"):
        read_corpus(csv_path)
    corpus = read_corpus(csv_path, ignore_labels=True)
    assert corpus.texts == ["one", "two"] and corpus.labels is None
    jsonl = write_jsonl(
        tmp_path / "d.jsonl", [{"text": "one", "label": "a"}, {"text": "two"}, {"text": "3", "label": ""}]
    )
    assert read_corpus(jsonl, ignore_labels=True).labels is None
    fasttext = write(tmp_path / "d.ft", "__label__a one\n__label__b two\n")
    assert read_corpus(fasttext, ignore_labels=True).labels is None


def test_jsonl_sentences_and_rationales(tmp_path):
    records = [
        {"text": "A b. C d.", "label": "x", "sentences": ["A b.", " ", "C d. "], "rationale": {"sentences": [1]}},
        {"sentences": ["E f."], "label": "y", "rationale": {"sentences": [0]}},
    ]
    corpus = read_corpus(write_jsonl(tmp_path / "d.ndjson", records))
    assert corpus.texts == ["A b. C d.", "E f."]
    assert corpus.sentences == [["A b.", "C d."], ["E f."]]
    assert corpus.rationales == [{"sentences": [1]}, {"sentences": [0]}]


def test_jsonl_ids_and_text_as_a_list_of_sentences(tmp_path):
    """An "id" field names the document (predict writes it back); "text" may be a list of sentences, as in fit()."""
    records = [
        {"id": "r-17", "text": ["Good film.", "  ", "Loved it."], "label": "pos"},
        {"id": 42, "text": "Bad.", "label": "neg"},
        {"id": True, "text": "Fine.", "label": "pos"},
    ]
    corpus = read_corpus(write_jsonl(tmp_path / "d.jsonl", records))
    assert corpus.ids == ["r-17", "42", "3"]  # a bool is no id: the line number stands
    assert corpus.sentences == [["Good film.", "Loved it."], None, None] and corpus.texts[0] == "Good film.\nLoved it."
    both = read_corpus(write_jsonl(tmp_path / "d3.jsonl", [{"text": ["A b.", "C d."], "sentences": ["A b.", "C d."]}]))
    assert both.sentences == [["A b.", "C d."]]
    from docattn.data.text import TextConfig, documents_to_strings

    strings = documents_to_strings(corpus.texts, corpus.sentences, TextConfig())
    assert strings[0].count("\x1e") == 1  # the listed document keeps its two sentences beside text documents
    with pytest.raises(
        DataError, match=r"d2\.jsonl:1: field 'text' must be a string or a list of sentences, found dict"
    ):
        read_corpus(write_jsonl(tmp_path / "d2.jsonl", [{"text": {"a": 1}}]))


def test_jsonl_without_label_field_is_unlabelled(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"text": "one"}\n\n{"text": "two"}\n')
    corpus = read_corpus(path)
    assert corpus.labels is None and corpus.texts == ["one", "two"]


# --------------------------------------------------------------------------- zhang / tang


def test_zhang_directory_with_classes(tmp_path):
    write(tmp_path / "ag" / "classes.txt", "World\nSports\n")
    write(tmp_path / "ag" / "train.csv", '"1","Title one","Line\\nbreak ""quoted"""\n"2","Title two","Body"\n')
    write(tmp_path / "ag" / "test.csv", '"2","T","B"\n')
    assert detect_format(tmp_path / "ag") == "zhang"
    assert detect_format(tmp_path / "ag" / "test.csv") == "zhang"
    splits = read_splits(tmp_path / "ag")
    assert list(splits) == ["train", "test"]
    train = splits["train"]
    assert train.texts == ['Title one\n\nLine\nbreak "quoted"', "Title two\n\nBody"]
    assert train.labels == ["World", "Sports"] and train.classes == ["World", "Sports"]
    assert read_corpus(tmp_path / "ag" / "test.csv").labels == ["Sports"]


def test_zhang_folder_without_classes_file_is_detected(tmp_path):
    """Yelp and Amazon polarity/full ship train.csv and test.csv only."""
    write(tmp_path / "yelp" / "train.csv", '"2","great food"\n"1","cold soup"\n')
    write(tmp_path / "yelp" / "test.csv", '"1","rude staff"\n')
    write(tmp_path / "yelp" / "readme.txt", "Yelp review polarity")
    assert detect_format(tmp_path / "yelp") == "zhang"
    splits = read_splits(tmp_path / "yelp")
    assert splits["train"].labels == [2, 1] and splits["test"].texts == ["rude staff"]


def test_zhang_yahoo_three_text_columns_and_no_classes_file(tmp_path):
    path = write(tmp_path / "yahoo" / "test.csv", '"3","Why?","","Because."\n"1","Q","details","A"\n')
    corpus = read_corpus(path, format="zhang")
    assert corpus.texts == ["Why?\n\nBecause.", "Q\n\ndetails\n\nA"]
    assert corpus.labels == [3, 1] and corpus.classes is None


def test_zhang_ag_news_backslash_line_breaks_and_fields_as_sentences(tmp_path):
    """AG News marks a line break with runs of backslashes, so "worm\\network" is no "\\n" escape."""
    path = write(
        tmp_path / "ag.csv", '"4","Worms","a new worm\\network attack.\\\\The firm said"\n"1","T","one\\ntwo"\n'
    )
    corpus = read_corpus(path, format="zhang")
    assert corpus.texts == ["Worms\n\na new worm\nnetwork attack.\nThe firm said", "T\n\none\ntwo"]
    from docattn.data.text import split_sentences

    assert split_sentences(corpus.texts[1])[0] == "T"  # the title is a sentence of its own


def test_tang_directory_gives_three_splits_with_sentences(tmp_path):
    line = "u1\t\tp1\t\t{}\t\tgood food . <sssss> nice staff ! <sssss>  \n"
    for name, rating in (("train", 4), ("dev", 2), ("test", 5)):
        write(tmp_path / "yelp" / f"yelp-2013.{name}.ss", line.format(rating))
    assert detect_format(tmp_path / "yelp") == "tang"
    splits = read_splits(tmp_path / "yelp")
    assert list(splits) == ["train", "valid", "test"]
    assert splits["valid"].labels == [2]
    assert splits["train"].sentences == [["good food .", "nice staff !"]]
    assert splits["train"].texts == ["good food .\nnice staff !"]
    assert read_corpus(tmp_path / "yelp", split="dev").labels == [2]


# --------------------------------------------------------------------------- folder-per-label


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


# --------------------------------------------------------------------------- fasttext / lines / stdin


def test_fasttext_takes_the_first_label(tmp_path):
    path = write(tmp_path / "cooking.txt", "__label__baking __label__bread How to knead?\n\n__label__tea  Green tea\n")
    assert detect_format(path) == "fasttext"
    corpus = read_corpus(path)
    assert corpus.texts == ["How to knead?", "Green tea"] and corpus.labels == ["baking", "tea"]
    assert read_corpus(write(tmp_path / "cooking.train", "__label__a x\n")).labels == ["a"]


def test_integer_labels_sort_as_numbers(tmp_path):
    """Ratings 1..10 as fastText or CSV labels become ints (classes 1, 2, 10), unless two spellings would merge."""
    from docattn.data.corpus import LabelMap

    ft = read_corpus(write(tmp_path / "r.txt", "__label__10 great\n__label__2 poor\n__label__1 awful\n"))
    assert ft.labels == [10, 2, 1] and LabelMap.from_labels(ft.labels).classes == [1, 2, 10]
    csv_ = read_corpus(write(tmp_path / "r.csv", "text,label\ngreat,10\npoor,2\n"))
    assert csv_.labels == [10, 2]
    kept = read_corpus(write(tmp_path / "k.txt", "__label__01 a\n__label__1 b\n"))
    assert kept.labels == ["01", "1"]
    for rating in (1, 2, 10):
        write(tmp_path / "stars" / str(rating) / "a.txt", f"review {rating}")
    assert read_splits(tmp_path / "stars")["all"].classes == ["1", "2", "10"]


def test_lines_one_unlabelled_document_per_line(tmp_path):
    path = write(tmp_path / "in.txt", "\ufefffirst doc\n\nsecond doc\r\n")
    assert detect_format(path) == "lines"
    corpus = read_corpus(path)
    assert corpus.texts == ["first doc", "second doc"] and corpus.labels is None
    assert corpus.ids == ["1", "3"] and corpus.stats["skipped_empty"] == 1


def test_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("alpha\nbeta\n"))
    assert read_corpus("-").texts == ["alpha", "beta"]
    assert detect_format("-") == "lines"
    latin1 = b'{"text": "caf\xe9", "label": 1}\n'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(latin1)))
    with pytest.raises(DataError, match=r"<stdin>:1: not UTF-8 \(byte 0xe9"):  # a real stdin: its bytes are decoded
        read_corpus("-", format="jsonl")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(latin1)))
    corpus = read_corpus("-", format="jsonl", errors="replace")
    assert corpus.texts == ["caf\ufffd"] and corpus.labels == [1] and corpus.stats["decode_errors"] == 1
    with pytest.raises(DataError, match="stdin"):
        read_corpus("-", format="folder")


def test_a_slow_pipe_is_sniffed_by_its_whole_first_line(monkeypatch):
    """peek() gives what one read of the pipe returned: a byte at a time, that is not a line."""

    class Trickle(io.RawIOBase):
        def __init__(self, data):
            self.data = data

        def readable(self):
            return True

        def readinto(self, b):
            if not self.data:
                return 0
            b[:1], self.data = self.data[:1], self.data[1:]
            return 1

    data = b'{"text": "good movie"}\n{"text": "bad movie"}\n'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Trickle(data))))
    assert detect_format("-") == "jsonl" and detect_format("-") == "jsonl"  # asking twice sees the same start
    assert read_corpus("-").texts == ["good movie", "bad movie"]  # nothing the sniffing read is lost
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Trickle(b'{"text": "stale"}'))))
    assert detect_format("-") == "jsonl"  # holds what it read of this stdin...
    monkeypatch.setattr(sys, "stdin", io.StringIO("fresh line\n"))
    assert read_corpus("-").texts == ["fresh line"]  # ...which never reaches another one


@pytest.mark.parametrize(
    "raw, expected",
    [
        ('{ "text": "good movie" }\n{"text": "bad"}\n', "jsonl"),  # JSON spaced as json.dumps(indent) or jq write it
        ('\n\n{"text": "x"}\n', "jsonl"),
        ('{"text": "x"}\n'.encode("utf-16"), "jsonl"),  # with its BOM, as PowerShell pipes it
        ("__label__pos good\n", "fasttext"),
        ("{braces} in a review\n", "lines"),
        ("plain\n", "lines"),
    ],
    ids=["spaced-json", "blank-first", "utf16-json", "fasttext", "brace-text", "plain"],
)
def test_stdin_format_is_sniffed_without_consuming_it(monkeypatch, raw, expected):
    """A real stdin is peeked at (BufferedReader), so the reader still gets every byte."""
    data = raw if isinstance(raw, bytes) else raw.encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    assert detect_format("-") == expected
    corpus = read_corpus("-")
    if expected == "jsonl":
        assert corpus.texts[0] in ("good movie", "x")
    else:
        assert len(corpus.texts) == 1 and not corpus.texts[0].startswith("__label__")


# --------------------------------------------------------------------------- encodings


def test_a_line_that_is_not_utf8_is_an_error_unless_errors_says_otherwise(tmp_path):
    path = write(tmp_path / "d.csv", b"text,label\ngood,1\ncaf\xe9,2\n")
    with pytest.raises(DataError, match=r"d\.csv:3: not UTF-8 \(byte 0xe9 at offset 3\).*iconv -f latin1 -t utf-8"):
        read_corpus(path)
    latin1 = read_corpus(path, errors="latin-1")
    assert latin1.texts == ["good", "caf\u00e9"] and latin1.stats["decode_errors"] == 1
    assert read_corpus(path, errors="replace").texts == ["good", "caf\ufffd"]
    with pytest.raises(ConfigError, match="errors must be one of strict, replace, latin-1"):
        read_corpus(path, errors="ignore")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-16-be"])
def test_utf16_and_utf32_with_a_bom_are_decoded(tmp_path, encoding):
    text = "text,label\nna\u00efve \u4e2d\u6587,1\r\nplain,2\n"
    bom = b"\xfe\xff" if encoding == "utf-16-be" else b""  # Python writes the BOM for utf-16/utf-32 only
    corpus = read_corpus(write(tmp_path / "d.csv", bom + text.encode(encoding)))
    assert corpus.texts == ["na\u00efve \u4e2d\u6587", "plain"] and corpus.labels == [1, 2]
    fasttext = write(tmp_path / "d.txt", "__label__a one\n__label__b two\n".encode(encoding.replace("-be", "")))
    assert detect_format(fasttext) == "fasttext" and read_corpus(fasttext).labels == ["a", "b"]
    folder = build_tree(tmp_path / "tree", {"pos/1.txt": bom + "gr\u00fc\u00df".encode(encoding), "neg/1.txt": "bad"})
    assert read_corpus(folder).texts == ["bad", "gr\u00fc\u00df"]


@pytest.mark.parametrize(
    "encoding, name", [("utf-16-le", "UTF-16LE"), ("utf-16-be", "UTF-16BE"), ("utf-32-le", "UTF-32LE")]
)
def test_utf16_and_utf32_without_a_bom_are_errors(tmp_path, encoding, name):
    path = write(tmp_path / "d.csv", "text,label\nhello,1\n".encode(encoding))
    with pytest.raises(DataError, match=rf"d\.csv: looks like {name} text without a byte-order mark.*iconv -f {name}"):
        read_corpus(path)
    folder = build_tree(tmp_path / "tree", {"pos/1.txt": "good film".encode(encoding), "neg/1.txt": "bad"})
    with pytest.raises(DataError, match=rf"pos/1\.txt: looks like {name}"):
        read_corpus(folder)


def test_folder_documents_fall_back_to_latin1_per_file_unless_strict(tmp_path):
    folder = build_tree(tmp_path / "tree", {"pos/1.txt": b"caf\xe9", "neg/1.txt": "na\u00efve"})
    corpus = read_corpus(folder)
    assert corpus.texts == ["na\u00efve", "caf\u00e9"] and corpus.stats["decode_errors"] == 1
    with pytest.raises(DataError, match=r"pos/1\.txt: not UTF-8 \(byte 0xe9"):
        read_corpus(folder, errors="strict")


# --------------------------------------------------------------------------- real data


@pytest.fixture(scope="module")
def imdb(shared_data):
    return read_splits(shared_data / "imdb" / "aclImdb.tar.gz")


@pytest.fixture(scope="module")
def newsgroups(shared_data):
    return read_splits(shared_data / "20news" / "20news-bydate.tar.gz")


def test_real_imdb(imdb):
    assert list(imdb) == ["train", "test"]
    for corpus in imdb.values():
        assert len(corpus) == 25_000 and Counter(corpus.labels) == {"pos": 12_500, "neg": 12_500}
        assert corpus.classes == ["neg", "pos"]
    assert all(i.startswith("aclImdb/train/") for i in imdb["train"].ids)


def test_real_20newsgroups(newsgroups):
    assert {k: len(v) for k, v in newsgroups.items()} == {"train": 11_314, "test": 7_532}
    for corpus in newsgroups.values():
        assert len(set(corpus.labels)) == 20 and len(corpus.classes) == 20
    assert newsgroups["train"].stats["decode_errors"] > 0  # latin-1 posts, decoded as latin-1 and counted
    assert not any("\ufffd" in text for corpus in newsgroups.values() for text in corpus.texts)


def test_real_bbc(shared_data):
    corpus = read_corpus(shared_data / "bbc" / "bbc.tar.gz")
    assert Counter(corpus.labels) == {"business": 510, "entertainment": 386, "politics": 417, "sport": 511, "tech": 401}
    assert corpus.classes == ["business", "entertainment", "politics", "sport", "tech"]


def test_real_ag_news(shared_data):
    classes = ["World", "Sports", "Business", "Sci/Tech"]
    corpus = read_corpus(shared_data / "ag_news" / "test.csv")
    assert len(corpus) == 7_600 and Counter(corpus.labels) == {c: 1_900 for c in classes}
    assert corpus.classes == classes
    assert read_splits(shared_data / "ag_news")["test"].texts == corpus.texts


def test_real_tang_sample(shared_data):
    splits = read_splits(shared_data / "tang2015-sample")
    assert {k: len(v) for k, v in splits.items()} == {"train": 10, "valid": 10, "test": 10}
    for corpus in splits.values():
        assert all(isinstance(label, int) and 1 <= label <= 5 for label in corpus.labels)
        assert all(len(s) >= 1 and all(x.strip() == x and x for x in s) for s in corpus.sentences)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "content, options, message",
    [
        ("title,label\nx,1\n", {}, r"d\.csv:1: no column 'text' in the header \(columns: title, label\)"),
        ("text,label\nx,1\n", {"label_column": "stars"}, r"d\.csv:1: no column 'stars'.*columns: text, label"),
        ("a,b\nx,1\n", {}, r"d\.csv:1: no header row with a 'text' column"),
        ("text,label\ngood,1\nbad\n", {}, r"d\.csv:3: expected at least 2 fields, found 1"),
        ("text,label\ngood,1\nbad, \n", {}, r"d\.csv:3: missing or empty label"),
        ('text,label\ngood,1\n"unterminated,1\n', {}, r"d\.csv:3: malformed CSV record"),
        ("x,1\n", {"text_columns": [3], "label_column": 1, "header": False}, r"d\.csv:1: expected at least 4 fields"),
    ],
)
def test_bad_csv(tmp_path, content, options, message):
    with pytest.raises(DataError, match=message):
        read_corpus(write(tmp_path / "d.csv", content), **options)


@pytest.mark.parametrize(
    "content, options, message",
    [
        ('{"text": "a", "label": 1}\n{"text": "b", "label": 2,\n', {}, r"d\.jsonl:2: malformed JSON"),
        ('{"text": "a", "label": 1}\n[1, 2]\n', {}, r"d\.jsonl:2: expected a JSON object per line, found list"),
        ('{"body": "a", "label": 1}\n', {}, r"d\.jsonl:1: no field 'text' \(fields: body, label\)"),
        ('{"text": "a"}\n', {"label_field": "y"}, r"d\.jsonl:1: no field 'y'"),
        ('{"text": "a", "label": 1}\n{"text": "b"}\n', {}, r"d\.jsonl:2: missing or empty label"),
        ('{"text": "a", "label": " "}\n', {}, r"d\.jsonl:1: missing or empty label"),
        ('{"text": "a", "label": null}\n', {}, r"d\.jsonl:1: missing or empty label"),
        ('{"text": 3, "label": 1}\n', {}, r"d\.jsonl:1: field 'text' must be a string"),
        ('{"text": "a", "label": [1]}\n', {}, r"d\.jsonl:1: label must be a string or a number"),
        ('{"text": "a", "label": 1, "sentences": "a"}\n', {}, r"d\.jsonl:1: field 'sentences' must be a list"),
    ],
)
def test_bad_jsonl(tmp_path, content, options, message):
    with pytest.raises(DataError, match=message):
        read_corpus(write(tmp_path / "d.jsonl", content), **options)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("d.txt", "__label__a fine\nno label here\n", r"d\.txt:2: expected the line to start with __label__"),
        ("d.ft", "__label__ text\n", r"d\.ft:1: missing or empty label"),
        ("d.ss", "u\t\tp\t\t5\t\tgood\nu\t\tp\t\tbad\n", r"d\.ss:2: expected 4 fields separated by two tabs"),
        ("d.ss", "u\t\tp\t\tfive\t\tgood\n", r"d\.ss:1: expected an integer rating"),
        ("d.ss", "u\t\tp\t\t \t\tgood\n", r"d\.ss:1: missing or empty label"),
    ],
)
def test_bad_line_formats(tmp_path, name, content, message):
    with pytest.raises(DataError, match=message):
        read_corpus(write(tmp_path / name, content))


def test_bad_zhang(tmp_path):
    write(tmp_path / "z" / "classes.txt", "A\nB\n")
    with pytest.raises(DataError, match=r"train\.csv:2: class 3 is outside 1-2"):
        read_corpus(write(tmp_path / "z" / "train.csv", '"1","t","x"\n"3","t","y"\n'))
    with pytest.raises(DataError, match=r"train\.csv:1: expected a 1-based class number"):
        read_corpus(write(tmp_path / "z" / "train.csv", '"World","t","x"\n'))
    with pytest.raises(DataError, match=r"train\.csv:1: expected a class and at least one text field"):
        read_corpus(write(tmp_path / "z" / "train.csv", '"1"\n'))


def test_empty_documents_are_skipped_and_counted_or_an_error(tmp_path):
    path = write(tmp_path / "d.csv", "text,label\ngood,1\n  ,0\n,0\nbad,0\n")
    corpus = read_corpus(path)
    assert corpus.texts == ["good", "bad"] and corpus.stats["skipped_empty"] == 2
    with pytest.raises(DataError, match=r"d\.csv:3: empty document"):
        read_corpus(path, on_empty="error")
    folder = build_tree(tmp_path / "f", {"pos/1.txt": "ok", "neg/2.txt": "\n"})
    with pytest.raises(DataError, match=r"neg/2\.txt: empty document"):
        read_corpus(folder, on_empty="error")


@pytest.mark.parametrize(
    "name, content",
    [
        ("e.csv", "text,label\n ,1\n"),
        ("e.jsonl", "\n\n"),
        ("e.txt", ""),
        ("e.ss", "\n"),
    ],
)
def test_no_documents(tmp_path, name, content):
    with pytest.raises(DataError, match=r"no documents in .*e\.(csv|jsonl|txt|ss)"):
        read_corpus(write(tmp_path / name, content))


def test_no_documents_in_folder(tmp_path):
    with pytest.raises(DataError, match=r"no documents in .*flat .*label folders"):
        read_corpus(build_tree(tmp_path / "flat", {"a.txt": "x", "train/b.txt": "y"}))


def test_missing_path_and_unknown_format(tmp_path):
    with pytest.raises(DataError, match=r"nope\.csv: no such file"):
        read_corpus(tmp_path / "nope.csv")
    with pytest.raises(DataError, match=r"data\.bin: cannot tell the format.*csv, tsv, jsonl"):
        read_corpus(write(tmp_path / "data.bin", "hello\n"))
    with pytest.raises(DataError, match=r"format 'folder' reads a directory"):
        read_corpus(write(tmp_path / "x.csv", "text\na\n"), format="folder")


def test_corrupt_archives(tmp_path):
    garbage = write(tmp_path / "garbage.tar.gz", b"\x1f\x8b" + b"not really gzip" * 10)
    with pytest.raises(DataError, match=r"garbage\.tar\.gz: corrupt or unreadable archive"):
        read_splits(garbage)
    whole = build_tar(tmp_path / "whole.tar.gz", {f"pos/{i}.txt": f"document {i} " * 200 for i in range(50)})
    truncated = write(tmp_path / "cut.tar.gz", whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(DataError, match=r"cut\.tar\.gz: corrupt or unreadable archive at member 'pos/"):
        read_splits(truncated)
    with pytest.raises(DataError, match=r"bad\.zip: corrupt or unreadable archive"):
        read_splits(write(tmp_path / "bad.zip", b"PK\x03\x04 broken"))
    with pytest.raises(DataError, match=r"plain\.tar: corrupt or unreadable archive"):
        read_splits(write(tmp_path / "plain.tar", b"x" * 2048))


def test_bad_options_are_config_errors(tmp_path):
    path = write(tmp_path / "d.csv", "text,label\na,1\n")
    with pytest.raises(ConfigError, match="text_field"):
        read_corpus(path, text_field="body")
    with pytest.raises(ConfigError, match="on_empty"):
        read_corpus(path, on_empty="ignore")
    with pytest.raises(ConfigError, match="unknown format"):
        read_corpus(path, format="xml")


def test_control_characters_and_bom_never_reach_the_text(tmp_path):
    path = write(tmp_path / "d.csv", '\ufefftext,label\n"a\x00b\x1ec",1\n')
    assert read_corpus(path).texts == ["a b c"]
    escaped = write(tmp_path / "d.jsonl", '{"text": "a\\u0000b\\u001ec", "label": 1}\n')
    assert read_corpus(escaped).texts == ["a b c"]


# --------------------------------------------------------------------------- property: arbitrary text round-trips


def expected_text(text: str) -> str | None:
    cleaned = text.replace("\x00", " ").replace("\x1e", " ")
    return None if not cleaned or cleaned.isspace() else cleaned


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(), min_size=1, max_size=5), ensure_ascii=st.booleans())
def test_arbitrary_text_round_trips_through_jsonl(texts, ensure_ascii):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "d.jsonl"
        rows = [{"text": t, "label": i} for i, t in enumerate(texts)] + [{"text": "anchor", "label": -1}]
        write(path, "".join(json.dumps(r, ensure_ascii=ensure_ascii) + "\n" for r in rows))
        corpus = read_corpus(path)
    kept = [(expected_text(t), i) for i, t in enumerate(texts) if expected_text(t) is not None]
    assert list(zip(corpus.texts, corpus.labels)) == [*kept, ("anchor", -1)]
    assert corpus.stats["skipped_empty"] == len(texts) - len(kept)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(), min_size=1, max_size=5))
def test_arbitrary_text_round_trips_through_csv(texts):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "d.csv"
        with open(path, "w", encoding="utf-8", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow(["label", "text"])
            writer.writerows([[f"c{i}", t] for i, t in enumerate(texts)] + [["anchor", "anchor"]])
        corpus = read_corpus(path)
    kept = [(expected_text(t), f"c{i}") for i, t in enumerate(texts) if expected_text(t) is not None]
    assert list(zip(corpus.texts, corpus.labels)) == [*kept, ("anchor", "anchor")]


def test_a_run_directory_is_not_read_as_data(tmp_path):
    """A trained model's folder (config.json + vocab.json) would otherwise read as one document per file."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    for name in ("config.json", "vocab.json"):
        (run / name).write_text("{}")
    (run / "checkpoints" / "last.ckpt").write_bytes(b"\x80\x02binary")
    with pytest.raises(DataError, match="is a docattn run directory"):
        read_splits(run)


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
