"""Tables: Parquet, Arrow IPC (file and stream) and Hugging Face save_to_disk folders, written here with pyarrow."""

from __future__ import annotations

import json
import sys

import pytest
from reader_files import build_zip, write

from docattn.data.readers import detect_format, read_corpus, read_splits
from docattn.errors import ConfigError, DataError

pa = pytest.importorskip("pyarrow", reason="pyarrow reads Parquet and Arrow (pip install 'docattn[parquet]')")
pq = pytest.importorskip("pyarrow.parquet")
feather = pytest.importorskip("pyarrow.feather")

REVIEWS = {
    "title": ["Great", "Awful", "Fine"],
    "text": ["good film", "bad film", "ok film"],
    "label": ["pos", "neg", "pos"],
}


def write_stream(path, table):
    """An Arrow IPC stream, as Hugging Face ``save_to_disk`` writes its data-*.arrow files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=2)  # several record batches
    return path


def saved_split(folder, table, features):
    """One split of a saved dataset: data-00000-of-00001.arrow, dataset_info.json and state.json."""
    write_stream(folder / "data-00000-of-00001.arrow", table)
    write(folder / "dataset_info.json", json.dumps({"features": features, "splits": {}}))
    state = {"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": folder.name}
    write(folder / "state.json", json.dumps(state))


SENTIMENT = {"text": {"dtype": "string", "_type": "Value"}, "label": {"names": ["neg", "pos"], "_type": "ClassLabel"}}


def test_parquet_round_trip(tmp_path):
    path = tmp_path / "reviews.parquet"
    pq.write_table(pa.table(REVIEWS), path, row_group_size=2)
    assert detect_format(path) == "parquet"
    corpus = read_corpus(path)
    assert corpus.texts == REVIEWS["text"] and corpus.labels == REVIEWS["label"] and not corpus.multi_label
    assert corpus.ids == ["0", "1", "2"] and corpus.source == str(path)  # rows numbered as dataset[i] is
    both = read_corpus(path, text_columns=["title", 1], label_column="label")  # names or 0-based indexes
    assert both.texts[0] == "Great\ngood film"


def test_feather_and_arrow_stream_files(tmp_path):
    table = pa.table(REVIEWS)
    feather.write_feather(table, tmp_path / "reviews.feather")
    write_stream(tmp_path / "reviews.arrow", table)
    for name in ("reviews.feather", "reviews.arrow"):
        assert detect_format(tmp_path / name) == "arrow"
        assert read_corpus(tmp_path / name).labels == REVIEWS["label"]


def test_list_label_column_is_multi_label_and_id_column_gives_ids(tmp_path):
    table = pa.table({"id": ["a1", "a2"], "text": ["rates and jobs", "weather"], "label": [["economy", "jobs"], []]})
    pq.write_table(table, tmp_path / "news.parquet")
    corpus = read_corpus(tmp_path / "news.parquet")
    assert corpus.multi_label and corpus.labels == [("economy", "jobs"), ()] and corpus.ids == ["a1", "a2"]


def test_label_sep_and_forced_multi_label(tmp_path):
    pq.write_table(pa.table({"text": ["a", "b"], "topics": ["x, y", "y"]}), tmp_path / "t.parquet")
    assert read_corpus(tmp_path / "t.parquet", label_column="topics", label_sep=",").labels == [("x", "y"), ("y",)]
    assert read_corpus(tmp_path / "t.parquet", label_column="topics", multi_label=True).labels == [("x, y",), ("y",)]


def test_hugging_face_dataset_dict_folder(tmp_path):
    root = tmp_path / "imdb"
    saved_split(root / "train", pa.table({"text": ["good", "bad", "great"], "label": [1, 0, 1]}), SENTIMENT)
    saved_split(root / "validation", pa.table({"text": ["fine"], "label": [1]}), SENTIMENT)
    saved_split(root / "test", pa.table({"text": ["unknown", "unseen"], "label": [-1, -1]}), SENTIMENT)
    write(root / "dataset_dict.json", json.dumps({"splits": ["train", "validation", "test"]}))
    assert detect_format(root) == "arrow"
    splits = read_splits(root)
    assert list(splits) == ["train", "valid", "test"]
    assert splits["train"].labels == ["pos", "neg", "pos"] and splits["train"].classes == ["neg", "pos"]
    assert splits["test"].labels is None  # ClassLabel -1 throughout: an unlabelled split (a benchmark's test)
    archive = build_zip(
        tmp_path / "imdb.zip", {str(p.relative_to(tmp_path)): p.read_bytes() for p in root.rglob("*.*")}
    )
    assert read_splits(archive)["train"].labels == ["pos", "neg", "pos"]


def test_saved_dataset_with_sequence_of_class_labels(tmp_path):
    features = {
        "text": {"dtype": "string", "_type": "Value"},
        "labels": {"feature": {"names": ["econ", "jobs", "sport"], "_type": "ClassLabel"}, "_type": "Sequence"},
    }
    saved_split(tmp_path / "ds", pa.table({"text": ["a", "b"], "labels": [[0, 1], [2]]}), features)
    corpus = read_corpus(tmp_path / "ds", label_column="labels")
    assert corpus.multi_label and corpus.labels == [("econ", "jobs"), ("sport",)]
    assert corpus.classes == ["econ", "jobs", "sport"]
    # the data file alone finds dataset_info.json beside it
    single = read_corpus(tmp_path / "ds" / "data-00000-of-00001.arrow", label_column="labels")
    assert single.labels == corpus.labels


def test_class_names_from_the_schema_metadata(tmp_path):
    info = {"info": {"features": SENTIMENT}}
    table = pa.table({"text": ["good", "bad"], "label": [1, 0]}).replace_schema_metadata(
        {"huggingface": json.dumps(info)}
    )
    pq.write_table(table, tmp_path / "train-00000-of-00001.parquet")
    pq.write_table(table, tmp_path / "test-00000-of-00001.parquet")
    write(tmp_path / "README.md", "# a data set card")
    assert detect_format(tmp_path) == "parquet"
    splits = read_splits(tmp_path)
    assert list(splits) == ["train", "test"] and splits["test"].labels == ["pos", "neg"]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"text_columns": ["body"]}, r"t\.parquet: no column 'body' \(columns: text, label\); pass text_columns="),
        ({"label_column": "stars"}, r"t\.parquet: no column 'stars' \(columns: text, label\)"),
        ({"text_columns": [5]}, r"t\.parquet: column 5 out of range: the table has 2 \(text, label\)"),
        ({"text_columns": ["label"]}, r"t\.parquet: column 'label' holds int64, not text"),
    ],
)
def test_missing_or_wrong_columns_name_the_file_and_the_columns(tmp_path, options, message):
    pq.write_table(pa.table({"text": ["a"], "label": [3]}), tmp_path / "t.parquet")
    with pytest.raises(DataError, match=message):
        read_corpus(tmp_path / "t.parquet", **options)


def test_bad_tables_are_one_line_errors(tmp_path):
    pq.write_table(pa.table(REVIEWS), tmp_path / "whole.parquet")
    data = (tmp_path / "whole.parquet").read_bytes()
    truncated = write(tmp_path / "cut.parquet", data[: len(data) // 2])
    with pytest.raises(DataError, match=r"cut\.parquet: not a readable Parquet file \(") as raised:
        read_corpus(truncated)
    assert "\n" not in str(raised.value)
    with pytest.raises(DataError, match=r"junk\.arrow: not a readable Arrow file"):
        read_corpus(write(tmp_path / "junk.arrow", b"not arrow at all"))
    saved_split(tmp_path / "ds", pa.table({"text": ["a"], "label": [7]}), SENTIMENT)
    with pytest.raises(DataError, match=r"row 0: label 7 is outside the 2 ClassLabel names"):
        read_corpus(tmp_path / "ds")
    pq.write_table(pa.table({"text": ["a", "b"], "label": ["x", None]}), tmp_path / "gap.parquet")
    with pytest.raises(DataError, match=r"gap\.parquet: row 1: missing or empty label"):
        read_corpus(tmp_path / "gap.parquet")


def test_without_pyarrow_the_error_says_what_to_install(tmp_path, monkeypatch):
    path = write(tmp_path / "t.parquet", b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'docattn\[parquet\]'"):
        read_corpus(path)


def test_table_options_are_checked(tmp_path):
    pq.write_table(pa.table(REVIEWS), tmp_path / "t.parquet")
    with pytest.raises(ConfigError, match=r"option\(s\) delimiter do not apply to format 'parquet'"):
        read_corpus(tmp_path / "t.parquet", delimiter=";")
    assert read_corpus(tmp_path / "t.parquet", ignore_labels=True).labels is None
