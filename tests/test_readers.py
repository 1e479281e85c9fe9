"""Readers: every file format on small files written here, and the real benchmark archives."""

from __future__ import annotations

import io
import sys
from collections import Counter

import pytest
from reader_files import build_tree, write, write_jsonl

from docattn.data.readers import detect_format, read_corpus, read_splits
from docattn.errors import ConfigError, DataError

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


# --------------------------------------------------------------------------- fasttext / lines / stdin


def test_fasttext_several_labels_make_a_multi_label_corpus(tmp_path):
    path = write(tmp_path / "cooking.txt", "__label__baking __label__bread How to knead?\n\n__label__tea  Green tea\n")
    assert detect_format(path) == "fasttext"
    corpus = read_corpus(path)
    assert corpus.texts == ["How to knead?", "Green tea"] and corpus.labels == [("baking", "bread"), ("tea",)]
    assert corpus.multi_label
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
