"""Reuters-21578 SGML: the ModApte split of a small collection written here, bad files, and the real archive."""

from __future__ import annotations

from collections import Counter

import pytest
from reader_files import build_tar, build_tree, build_zip, write

from docattn.data.readers import detect_format, read_corpus, read_splits
from docattn.errors import DataError


def record(newid: int, split: str, topics: list[str], body: str, *, title: str = "", kind: str = "YES") -> str:
    """One <REUTERS> record as the collection writes it (tags alone on their lines, wire codes as entities)."""
    tags = "".join(f"<D>{t}</D>" for t in topics)
    title_tag = f"<TITLE>{title}</TITLE>\n" if title else ""
    body_tag = f"<BODY>{body}\n Reuter\n&#3;</BODY>" if body else ""
    return (
        f'<REUTERS TOPICS="{kind}" LEWISSPLIT="{split}" CGISPLIT="TRAINING-SET" OLDID="{9000 + newid}" '
        f'NEWID="{newid}">\n<DATE>26-FEB-1987 15:01:01.79</DATE>\n<TOPICS>{tags}</TOPICS>\n'
        f"<PLACES><D>usa</D></PLACES>\n<UNKNOWN> \n&#5;&#5;&#5;C T\n&#22;&#22;&#1;f0704&#31;reute</UNKNOWN>\n"
        f"<TEXT>&#2;\n{title_tag}<DATELINE>    NEW YORK, Feb 26 - </DATELINE>{body_tag}</TEXT>\n</REUTERS>\n"
    )


def sgml(*records: str) -> bytes:
    return ('<!DOCTYPE lewis SYSTEM "lewis.dtd">\n' + "".join(records)).encode("latin-1")


# acq and grain have training and test documents; earn (train) and rare (test) do not
FIRST = sgml(
    record(1, "TRAIN", ["acq", "earn"], "Profit &lt;up&gt; at AT&amp;T&#127;, said Jos\xe9.", title="DEAL DONE"),
    record(2, "TRAIN", ["grain"], "Wheat exports rose.", title="WHEAT"),
    record(3, "TRAIN", ["earn"], "Only a category seen in training.", title="EARNINGS"),
    record(4, "TRAIN", [], "No topics at all.", title="NOTHING"),
    record(5, "TRAIN", ["acq"], "Not indexed.", title="NO", kind="NO"),
)
SECOND = sgml(
    record(6, "TEST", ["grain", "rare", "acq"], "Corn and a rare topic.", title="CORN"),
    record(7, "TEST", ["acq"], "", title="BRIEF TAKEOVER NOTE"),
    record(8, "NOT-USED", ["acq"], "Unused.", title="UNUSED"),
    record(9, "TEST", ["rare"], "Only a category seen in test.", title="RARE"),
)


@pytest.fixture
def collection(tmp_path):
    return build_tar(
        tmp_path / "reuters21578.tar.gz",
        {
            "reuters21578/README.txt": "Reuters-21578 text categorization test collection",
            "reuters21578/reut2-000.sgm": FIRST,
            "reuters21578/reut2-001.sgm": SECOND,
            "reuters21578/lewis.dtd": "<!ELEMENT LEWIS - - (REUTERS*)>",
        },
    )


def test_modapte_splits_labels_and_classes(collection):
    assert detect_format(collection) == "reuters"
    splits = read_splits(collection)
    train, test = splits["train"], splits["test"]
    assert list(splits) == ["train", "test"]
    assert train.ids == ["1", "2"] and test.ids == ["6", "7"]  # NEWID; NO, NOT-USED and categoryless left out
    assert train.labels == [("acq",), ("grain",)] and test.labels == [("grain", "acq"), ("acq",)]
    assert train.multi_label and test.multi_label and train.classes == test.classes == ["acq", "grain"]
    assert train.stats["no_category"] == 2 and test.stats["no_category"] == 1


def test_text_is_title_and_body_with_entities_resolved_and_wire_codes_dropped(collection):
    train = read_corpus(collection, split="train")
    assert train.texts[0] == "DEAL DONE\nProfit <up> at AT&T, said Jos\xe9.\n Reuter"  # \xe9: a Latin-1 byte
    assert read_corpus(collection, split="test").texts[1] == "BRIEF TAKEOVER NOTE"  # a brief: title only


def test_folder_zip_and_single_file(tmp_path):
    folder = build_tree(tmp_path / "r", {"reut2-000.sgm": FIRST, "reut2-001.sgm": SECOND, "lewis.dtd": "x"})
    assert detect_format(folder) == "reuters" and len(read_corpus(folder, split="test")) == 2
    archive = build_zip(tmp_path / "r.zip", {"reut2-000.sgm": FIRST, "reut2-001.sgm": SECOND})
    assert read_splits(archive)["train"].texts == read_splits(folder)["train"].texts
    both = write(tmp_path / "sample.sgm", FIRST + SECOND)
    assert detect_format(both) == "reuters" and read_splits(both, format="reuters")["test"].ids == ["6", "7"]


def test_unprocessed_story_without_title_or_body_is_its_whole_text(tmp_path):
    unproc = record(10, "TEST", ["acq"], "x").replace(
        "<TEXT>&#2;\n<DATELINE>    NEW YORK, Feb 26 - </DATELINE><BODY>x\n Reuter\n&#3;</BODY></TEXT>",
        '<TEXT TYPE="UNPROC">&#2;\nWEEKLY REPORT\n&\\t Net reserves....644 vs 1,337\n&#3;</TEXT>',
    )
    path = write(tmp_path / "reut2-000.sgm", FIRST + sgml(unproc))
    assert read_corpus(path, split="test").texts == ["WEEKLY REPORT\n     Net reserves....644 vs 1,337"]


@pytest.mark.parametrize(
    "content, message",
    [
        (FIRST[:-12], r"reut2-000\.sgm:\d+: <REUTERS> record never closed"),
        (FIRST.replace(b"</REUTERS>\n<REUTERS", b"<REUTERS", 1), r"reut2-000\.sgm:2: <REUTERS> record not closed"),
        (FIRST.replace(b' NEWID="2"', b""), r"reut2-000\.sgm:\d+: malformed <REUTERS> tag .*\(no NEWID\)"),
        (b"<!DOCTYPE lewis>\nplain text\n", r"reut2-000\.sgm: no <REUTERS> records"),
    ],
)
def test_malformed_files_are_one_line_errors(tmp_path, content, message):
    folder = build_tree(tmp_path / "r", {"reut2-000.sgm": content, "reut2-001.sgm": SECOND})
    with pytest.raises(DataError, match=message) as raised:
        read_splits(folder)
    assert "\n" not in str(raised.value)


def test_no_shared_category_is_an_error(tmp_path):
    folder = build_tree(tmp_path / "r", {"reut2-000.sgm": FIRST})
    with pytest.raises(DataError, match="no TOPICS category has both a training and a test document"):
        read_splits(folder)


def test_a_record_over_the_length_limit_is_refused(tmp_path, monkeypatch):
    """A missing </REUTERS> must not take the rest of the file into memory: records stop at 8 x
    DOCATTN_MAX_DOCUMENT_CHARS characters, or 1 MiB, whichever is more."""
    monkeypatch.setenv("DOCATTN_MAX_DOCUMENT_CHARS", "1000")
    long = record(11, "TRAIN", ["acq"], "more words\n" * 100_000, title="LONG")
    folder = build_tree(tmp_path / "r", {"reut2-000.sgm": sgml(long), "reut2-001.sgm": SECOND})
    with pytest.raises(DataError, match=r"reut2-000\.sgm:2: <REUTERS> record over"):
        read_splits(folder)


def test_real_reuters21578(shared_data):
    archive = shared_data / "reuters21578" / "reuters21578.tar.gz"
    if not archive.is_file():
        pytest.skip(f"Reuters-21578 archive not found at {archive}")
    splits = read_splits(archive)
    train, test = splits["train"], splits["test"]
    assert len(train) in (7_769, 7_770) and len(test) == 3_019  # the README: 7,770 / 3,019
    assert len(train.classes) == 90 and train.classes == test.classes == sorted(train.classes)
    assert train.multi_label and all(isinstance(y, tuple) and y for y in train.labels + test.labels)
    assert Counter(y for labels in train.labels for y in labels).most_common(2) == [("earn", 2877), ("acq", 1650)]
    assert train.ids[0] == "1" and train.texts[0].startswith("BAHIA COCOA REVIEW\nShowers continued")
    assert not any(c < " " and c not in "\n\t" for text in train.texts for c in text)  # wire codes dropped
