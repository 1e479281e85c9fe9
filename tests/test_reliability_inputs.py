"""Hostile or odd inputs from a reliability audit: each is refused in one line naming the file, or read as a
user expects (corrupt weights, looping archive links, nested label folders, devices, NaN labels, deep JSON)."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections import Counter
from pathlib import Path

import pytest
import torch
from conftest import fifo_writer, without_the_fast_tar_reader

from docattn.data import readers
from docattn.data.readers import detect_format, read_corpus, read_splits, read_texts
from docattn.errors import CheckpointError, DataError


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _tar(path: Path, members: dict[str, str | tuple]) -> Path:
    """Members in order; a (tarfile.SYMTYPE, target) value is a symbolic link."""
    with tarfile.open(path, "w") as archive:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                info.type, info.linkname = content
                archive.addfile(info)
            else:
                data = content.encode("utf-8")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return path


# ---------- 1. weights that are NaN/inf or integers


def _saved_run(tmp_path: Path, model=None) -> Path:
    from docattn.data.corpus import LabelMap
    from docattn.data.prepare import DataSettings
    from docattn.data.text import SPECIAL_TOKENS, TextConfig, Vocabulary
    from docattn.models import create_model
    from docattn.training.config import TrainConfig
    from docattn.training.run import save_run

    vocab = Vocabulary(SPECIAL_TOKENS + ["good", "bad"], TextConfig(), min_count=1)
    model = model or create_model(
        "han", vocab_size=len(vocab), num_classes=2, embedding_dim=8, hidden_size=4, context_dim=4
    )
    return save_run(tmp_path / "run", "han", model, vocab, LabelMap(["neg", "pos"]), DataSettings(), TrainConfig())


def _rewrite_weights(run: Path, change) -> None:
    from safetensors.torch import load_file, save_file

    state = load_file(run / "model.safetensors")
    save_file(
        {k: change(k, v).contiguous() for k, v in state.items()}, run / "model.safetensors", metadata={"model": "han"}
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_weights_with_nan_or_inf_are_refused(tmp_path, bad):
    from docattn.training.run import load_run

    run = _saved_run(tmp_path)
    assert load_run(run).model_name == "han"  # the untouched run loads
    first = None

    def poison(key, tensor):
        nonlocal first
        first = first or key
        return torch.full_like(tensor, bad) if key == first else tensor

    _rewrite_weights(run, poison)
    with pytest.raises(CheckpointError) as caught:
        load_run(run)
    message = str(caught.value)
    assert "model.safetensors" in message and repr(first) in message and "NaN or infinite" in message
    assert "retrain" in message and "restore" in message and "\n" not in message


def test_integer_weights_for_floating_parameters_are_refused(tmp_path):
    from docattn.training.run import load_run

    run = _saved_run(tmp_path)
    _rewrite_weights(run, lambda key, tensor: tensor.to(torch.int64))  # same shapes: load_state_dict would cast them
    with pytest.raises(
        CheckpointError,
        match=r"model\.safetensors: tensor '.+' is torch\.int64 where model 'han' "
        r"has torch\.float32; .*retrain.*restore",
    ):
        load_run(run)


def test_integer_buffers_of_the_model_itself_still_load(tmp_path, monkeypatch):
    """A model may keep integer buffers (a step counter): those are compared with the model, not refused."""
    import docattn.models
    from docattn.training.run import load_run

    real_create = docattn.models.create_model

    def with_counter(*args, **kwargs):
        model = real_create(*args, **kwargs)
        model.register_buffer("steps", torch.tensor([7, 8], dtype=torch.int64))
        return model

    monkeypatch.setattr(docattn.models, "create_model", with_counter)
    run = _saved_run(
        tmp_path, with_counter("han", vocab_size=5, num_classes=2, embedding_dim=8, hidden_size=4, context_dim=4)
    )
    assert load_run(run).model.steps.tolist() == [7, 8]


# ---------- 2. archive links to their own folder or above


@pytest.mark.parametrize("fast", [True, False], ids=["fast-reader", "tarfile"])
def test_archive_links_to_their_own_folder_or_an_ancestor_are_skipped(tmp_path, monkeypatch, fast):
    """bbc/loopdir -> . made every bbc document a second time under a new class; a folder on disk does not
    follow such links (walk), so the archive skips them too, counted in stats["skipped_links"]."""
    members = {
        "bbc/business/1.txt": "shares rose",
        "bbc/sport/1.txt": "a late goal",
        "bbc/sport/2.txt": "a draw",
        "bbc/README.TXT": "the BBC corpus",
    }
    plain = read_corpus(_tar(tmp_path / "plain.tar", members))
    path = _tar(
        tmp_path / "loops.tar",
        {
            **members,
            "bbc/loopdir": (tarfile.SYMTYPE, "."),  # its own folder
            "bbc/sport/up": (tarfile.SYMTYPE, ".."),  # the folder above
            "bbc/business/top": (tarfile.SYMTYPE, "../../bbc"),
            "bbc/alias": (tarfile.SYMTYPE, "sport"),  # a plain folder link: still read
            "bbc/sport/round": (tarfile.SYMTYPE, "../alias"),
        },
    )  # its own folder, via a link
    if not fast:
        without_the_fast_tar_reader(monkeypatch)
    tree = readers._archive_tree(path)
    assert tree.skipped_links == [
        "bbc/business/top -> bbc (a folder the link is in)",
        "bbc/loopdir -> bbc (a folder the link is in)",
        "bbc/sport/round -> bbc/alias (a folder the link is in)",
        "bbc/sport/up -> bbc (a folder the link is in)",
    ]
    corpus = read_corpus(path)
    expected = Counter(zip(plain.labels, plain.texts)) + Counter({("alias", "a late goal"): 1, ("alias", "a draw"): 1})
    assert Counter(zip(corpus.labels, corpus.texts)) == expected
    assert corpus.stats["skipped_links"] == 4 and sorted(corpus.classes) == ["alias", "business", "sport"]


# ---------- 3. a file nested deeper under a label folder


@pytest.mark.parametrize("top", ["train/", "", "data/"], ids=["split", "no-split", "shared-folder"])
@pytest.mark.parametrize("container", ["directory", "tar"])
def test_a_file_nested_under_a_label_folder_keeps_its_siblings_and_label(tmp_path, top, container):
    """train/pos/extra/x.txt beside 30 files in train/pos made 29 of the 30 disappear: every file under a
    label folder is a document of that label, at any depth."""
    files = {f"{top}pos/{i}.txt": f"good {i}" for i in range(30)}
    files |= {f"{top}neg/{i}.txt": f"bad {i}" for i in range(30)}
    files[f"{top}pos/extra/x.txt"] = "good too"
    files["README"] = "not a document"  # beside the label folders: never a document
    if top:
        files[f"{top}NOTES.txt"] = "not a document either"
    if container == "tar":
        path = _tar(tmp_path / "d.tar", files)
    else:
        for name, text in files.items():
            _write(tmp_path / "d" / name, text)
        path = tmp_path / "d"
    corpus = read_corpus(path)
    assert Counter(corpus.labels) == {"pos": 31, "neg": 30} and corpus.classes == ["neg", "pos"]
    assert "good too" in corpus.texts and "not a document" not in corpus.texts
    assert len(read_texts(path).texts) == 61


def test_an_empty_subfolder_does_not_hide_its_label_folders_files(tmp_path):
    for label in ("pos", "neg"):
        _write(tmp_path / "d" / label / "1.txt", f"{label} film")
    (tmp_path / "d" / "pos" / "empty").mkdir()
    assert sorted(read_corpus(tmp_path / "d").labels) == ["neg", "pos"]


def test_imdb_files_beside_label_folders_stay_out(tmp_path):
    """What the leaf-folder rule was for: aclImdb's labeledBow.feat, urls_*.txt and imdb.vocab are no documents."""
    files = {
        "aclImdb/imdb.vocab": "the\n",
        "aclImdb/README": "readme",
        "aclImdb/train/labeledBow.feat": "0:1\n",
        "aclImdb/train/urls_pos.txt": "http://x\n",
        "aclImdb/train/pos/0_9.txt": "superb",
        "aclImdb/train/neg/0_2.txt": "awful",
        "aclImdb/train/unsup/0_0.txt": "unlabelled",
        "aclImdb/test/pos/1_8.txt": "great",
        "aclImdb/test/neg/1_1.txt": "dull",
    }
    path = _tar(tmp_path / "aclImdb.tar", files)
    train = read_splits(path)["train"]
    assert sorted(train.texts) == ["awful", "superb"]
    assert sorted(read_texts(path).texts) == ["awful", "superb", "unlabelled"]


# ---------- 4. devices and pipes as input


def test_dev_null_is_named_a_character_device(tmp_path):
    for call in (lambda p: read_corpus(p), lambda p: read_corpus(p, format="lines"), detect_format, read_texts):
        with pytest.raises(DataError, match=r"^/dev/null: not a regular file or folder \(a character device\)"):
            call("/dev/null")
    with pytest.raises(DataError, match=r"no such file or directory"):
        read_corpus(tmp_path / "missing.txt")


def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "in.txt"
    os.mkfifo(fifo)  # opening it to read waits for a writer: one comes after a while, so a failure is no hang
    with fifo_writer(fifo), pytest.raises(DataError, match=r"in\.txt: not a regular file or folder \(a named pipe\)"):
        read_corpus(fifo)


# ---------- 5. NaN and Infinity labels in JSON Lines


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_jsonl_nan_or_infinite_label_names_the_line(tmp_path, constant):
    path = _write(tmp_path / "d.jsonl", f'{{"text": "fine", "label": "pos"}}\n{{"text": "x", "label": {constant}}}\n')
    with pytest.raises(DataError) as caught:
        read_corpus(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2: label {constant} ") and "labels must be strings or integers" in message
    assert "\n" not in message
    other = _write(tmp_path / "e.jsonl", f'{{"text": "x", "label": "pos", "score": {constant}}}\n')
    assert read_corpus(other).labels == ["pos"]  # only the label is a class: other fields may hold anything


# ---------- 6. a deeply nested vocab.json


def test_deeply_nested_vocabulary_is_a_checkpoint_error(tmp_path):
    from docattn.data.text import Vocabulary

    path = _write(tmp_path / "vocab.json", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(CheckpointError, match=r"vocab\.json: .*nested too deeply"):
        Vocabulary.load(path)
    path.write_text(json.dumps({"tokens": {"a": [[[[1]]]]}}), encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"vocab\.json: "):
        Vocabulary.load(path)
    good = {"tokens": ["<pad>", "<unk>", "\x1e", "a"], "min_count": 1, "max_size": None}
    path.write_text(json.dumps({**good, "text_config": {"lowercase": [[["maybe"]]]}}), encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"vocab\.json: lowercase must be true or false"):
        Vocabulary.load(path)
