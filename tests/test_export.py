"""ONNX export and the torch-free ``OnnxPredictor``: every registered model, parity with PyTorch, no torch import."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("onnx", reason="ONNX export needs the onnx extra: pip install 'docattn[onnx]'")
pytest.importorskip("onnxruntime", reason="ONNX export needs the onnx extra: pip install 'docattn[onnx]'")

from tiny_runs import train_tiny_run  # noqa: E402

from docattn.data.encoding import EncodedCorpus, encode_ids  # noqa: E402
from docattn.export import EXPORT_FILES, ExportError, export_onnx  # noqa: E402
from docattn.export.arrays import batch_arrays  # noqa: E402
from docattn.models import create_model, get_spec, list_models  # noqa: E402

SMALL = {"embedding_dim": 16, "hidden_size": 8, "context_dim": 8, "d_model": 16, "heads": 2, "queries": 4}
NEURAL = [n for n in list_models() if get_spec(n).layout in ("hierarchical", "flat")]
PARITY = ["han", "hpan", "hsan", "hcan", "sanet", "cspan"]


def _random_corpus(seed: int, n_docs: int = 9, vocab: int = 40) -> EncodedCorpus:
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n_docs):
        ids: list[int] = []
        for _ in range(int(rng.integers(1, 7))):
            ids += rng.integers(3, vocab, int(rng.integers(1, 15))).tolist() + [2]
        docs.append(ids)
    return EncodedCorpus(*encode_ids(docs), np.full(n_docs, -1))


@pytest.mark.parametrize(
    "limits",
    [
        {},
        {"max_sentences": 2, "max_words": 4},
        {"max_tokens": 5},
        {"max_batch_words": 12},
        {"max_batch_pairs": 50, "max_sentences": 3},
    ],
)
def test_numpy_batches_equal_the_torch_batches(limits):
    from docattn.training.inference import make_batch

    enc = _random_corpus(1)
    docs = np.array([4, 0, 7, 2])
    for layout in ("hierarchical", "flat"):
        batch = make_batch(enc, docs, layout, limits)
        arrays = batch_arrays(enc, docs, layout, limits)
        for name, value in arrays.items():
            assert np.array_equal(getattr(batch, name).numpy(), value), (layout, name)


def test_graph_batches_group_documents_by_their_longest_sentence():
    """A hierarchical graph pads every sentence of a call to the longest one: documents go in that order."""
    from docattn.export.arrays import length_batches

    enc = _random_corpus(3, n_docs=40)
    batches = length_batches(enc, "hierarchical", 6)
    order = np.concatenate(batches)
    assert sorted(order.tolist()) == list(range(40)) and max(len(b) for b in batches) == 6
    assert (np.diff(enc.max_sentence_lengths[order]) >= 0).all()
    flat = np.concatenate(length_batches(enc, "flat", 6))
    assert (np.diff(enc.token_counts[flat]) >= 0).all()


def _untrained_run(name: str, folder):
    """A run folder of ``name`` at tiny sizes with random weights (the export needs no training)."""
    import torch

    from docattn.data.corpus import LabelMap
    from docattn.data.prepare import DataSettings
    from docattn.data.text import SPECIAL_TOKENS, TextConfig, Vocabulary
    from docattn.training.config import TrainConfig
    from docattn.training.run import save_run

    torch.manual_seed(0)
    known = set(create_model(name, vocab_size=8, num_classes=2).hparams())
    vocab = Vocabulary(SPECIAL_TOKENS + [f"w{i}" for i in range(37)], TextConfig())
    model = create_model(name, vocab_size=len(vocab), num_classes=3, **{k: v for k, v in SMALL.items() if k in known})
    return save_run(folder, name, model.eval(), vocab, LabelMap(["a", "b", "c"]), DataSettings(), TrainConfig())


@pytest.mark.parametrize("name", NEURAL)
def test_every_registered_neural_model_exports(name, tmp_path):
    try:
        out = export_onnx(_untrained_run(name, tmp_path / "run"), tmp_path / "onnx")
    except ExportError as err:  # allowed, if it says which model and why in one line
        assert name in str(err) and "\n" not in str(err)
        return
    config = json.loads((out / "config.json").read_text())
    assert sorted(p.name for p in out.iterdir()) == sorted(EXPORT_FILES)
    assert config["model"] == name and config["max_abs_difference"]["probabilities"] <= 1e-5
    assert config["outputs"][0] == "probabilities"


@pytest.mark.parametrize("name", [n for n in list_models() if get_spec(n).layout == "bag" and n != "fasttext-lib"])
def test_bag_of_words_baselines_are_refused_with_the_reason(name, tmp_path):
    run = train_tiny_run(name, tmp_path / "run")
    with pytest.raises(ExportError, match="not a neural network"):
        export_onnx(run, tmp_path / "onnx")
    assert not (tmp_path / "onnx").exists()


def test_the_output_folder_is_checked_before_anything_is_written(tmp_path):
    run = _untrained_run("han", tmp_path / "run")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="holds other files"):
        export_onnx(run, tmp_path / "busy")
    with pytest.raises(ExportError, match="run folder itself"):
        export_onnx(run, run)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportError, match="is a file"):
        export_onnx(run, tmp_path / "file")
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["notes.txt"]
    export_onnx(run, tmp_path / "again")
    export_onnx(run, tmp_path / "again")  # a former export is replaced


@pytest.fixture(scope="module")
def texts():
    from docattn.data import synthetic

    test = synthetic.make_splits(n_train=8, n_test=40, seed=11)["test"]
    return [" ".join(s) for s in test.sentences]


@pytest.mark.parametrize("name", PARITY)
def test_onnx_probabilities_match_pytorch(name, texts, tmp_path):
    from docattn.classifier import DocumentClassifier
    from docattn.onnx import OnnxPredictor

    run = train_tiny_run(name, tmp_path / "run")
    clf = DocumentClassifier.load(run)
    predictor = OnnxPredictor(export_onnx(run, tmp_path / "onnx"))
    enc_torch, enc_onnx = clf.encode(texts), predictor.encode(texts)
    assert np.array_equal(enc_torch.tokens, enc_onnx.tokens)  # the same tokenizer and encoding
    assert np.array_equal(enc_torch.sentence_offsets, enc_onnx.sentence_offsets)
    assert predictor.classes_ == clf.classes_
    assert np.abs(predictor.predict_proba(texts, batch_size=7) - clf.predict_proba(texts)).max() < 1e-5
    assert predictor.predict(texts) == clf.predict(texts)


def test_the_predictor_runs_without_torch(tmp_path, texts):
    from docattn.classifier import DocumentClassifier

    run = _untrained_run("han", tmp_path / "run")
    out = export_onnx(run, tmp_path / "onnx")
    want = DocumentClassifier.load(run).predict_proba(texts[:5])
    script = textwrap.dedent(f"""
        import json, sys
        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is blocked in this test")
        sys.meta_path.insert(0, NoTorch())
        from docattn.onnx import OnnxPredictor
        p = OnnxPredictor({str(out)!r})
        print(json.dumps({{"probs": p.predict_proba({texts[:5]!r}).tolist(),
                          "torch": [m for m in sys.modules if m == "torch" or m.startswith("torch.")]}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["torch"] == []
    assert np.abs(np.array(result["probs"]) - want).max() < 1e-5


def test_predictor_errors_are_one_line(tmp_path):
    from docattn.errors import CheckpointError
    from docattn.onnx import OnnxPredictor

    with pytest.raises(CheckpointError, match="no such folder"):
        OnnxPredictor(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="config.json: missing"):
        OnnxPredictor(tmp_path / "empty")
    out = export_onnx(_untrained_run("han", tmp_path / "run"), tmp_path / "onnx")
    (out / "model.onnx").write_bytes(b"not a graph")
    with pytest.raises(CheckpointError, match="onnxruntime cannot load it"):
        OnnxPredictor(out)
