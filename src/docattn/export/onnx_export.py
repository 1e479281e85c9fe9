"""A run's model as an ONNX graph, traced from an export-friendly copy and checked against PyTorch.

run folder -> load_run -> copy made traceable (``export_friendly``) -> ``_Graph`` (plain tensors in and out)
           -> torch.onnx.export (TorchScript tracer, dynamic batch and length axes)
           -> onnxruntime on a batch of another shape, compared with the unmodified model -> files written

The TorchScript exporter is used: the torch.export-based one bakes some padded shapes into Expand
nodes and then fails on other batch shapes (measured on HAN with torch 2.13).
"""

from __future__ import annotations

import copy
import json
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from docattn.data.encoding import EncodedCorpus
from docattn.export import (
    CONFIG_FILE,
    EXPORT_FILES,
    EXPORT_FORMAT,
    FORMAT_VERSION,
    LABELS_FILE,
    MODEL_FILE,
    VOCAB_FILE,
    ExportError,
)
from docattn.export.arrays import FLAT_INPUTS, HIERARCHICAL_INPUTS, batch_arrays
from docattn.models.contract import is_hierarchical

ATTENTION_KEYS = ("word", "sentence", "token")  # what explanations read; self-attention matrices stay out
TOLERANCE = 1e-5  # largest difference in a probability allowed between the graph and PyTorch


def _never(_device) -> bool:
    return False


def export_friendly(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` whose forward traces to one graph for every batch shape.

    The CPU GRU recurrence writes into preallocated tensors (``out=``), which a tracer cannot follow:
    PyTorch's GRU with the same weights runs instead. Hierarchical models cut their sentences into
    length groups sized on the host per batch; the copy runs one padded group, the same numbers.
    """
    from docattn.models.gru import PaddedBiRNN

    m = copy.deepcopy(model).eval()
    for module in m.modules():
        if isinstance(module, PaddedBiRNN):
            module.fused_on = _never  # nn.GRU's path, its weights unchanged
    if is_hierarchical(m):
        m.encode_sentences = m.encode_words  # the reference path: one group padded to the longest sentence
    return m


def batch_of(layout: str, inputs: tuple[torch.Tensor, ...]):
    """The model's batch type around the graph's input tensors (labels and document numbers: zeros, never read)."""
    from docattn.data.batching import FlatBatch, HierarchicalBatch

    if layout == "hierarchical":
        words, word_mask, sentence_index, sentence_mask = inputs
        zeros = sentence_index[:, 0] * 0  # (B,), traced from an input so the batch axis stays dynamic
        return HierarchicalBatch(
            words=words,
            word_mask=word_mask,
            sentence_index=sentence_index,
            sentence_mask=sentence_mask,
            sentence_doc=words[:, 0] * 0,
            labels=zeros,
            documents=zeros,
        )
    tokens, mask = inputs
    return FlatBatch(tokens=tokens, mask=mask, labels=tokens[:, 0] * 0, documents=tokens[:, 0] * 0)


def _conv_window3(conv: torch.nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
    """HCAN's window-3 convolution with shifted slices instead of ``unfold``, which the ONNX exporter cannot size:
    x (N, T, C) -> (N, T, C_out), the same (channel, offset) order of the filters."""
    N, T, C = x.shape
    padded = torch.nn.functional.pad(x, (0, 0, 1, 1))  # (N, T + 2, C)
    windows = torch.stack([padded[:, :-2], padded[:, 1:-1], padded[:, 2:]], dim=-1).reshape(N, T, C * 3)
    return torch.nn.functional.linear(windows, conv.weight.reshape(conv.out_channels, C * 3), conv.bias)


@contextmanager
def traceable_layers():
    """While tracing, layers that use operators the exporter cannot size run their slicing equivalents."""
    from docattn.models import hcan

    saved, hcan.conv_window3 = hcan.conv_window3, _conv_window3
    try:
        yield
    finally:
        hcan.conv_window3 = saved


class _Graph(torch.nn.Module):
    """The model as a function of the batch's tensors: probabilities first, then the chosen attention weights."""

    def __init__(self, model: torch.nn.Module, attention_keys: tuple[str, ...], multi_label: bool = False):
        super().__init__()
        self.model = model
        self.attention_keys = attention_keys
        self.multi_label = multi_label

    def forward(self, *inputs: torch.Tensor):
        out = self.model(batch_of(self.model.layout, inputs), return_attention=bool(self.attention_keys))
        probabilities = _probabilities(out.logits.float(), self.multi_label)  # (B, C)
        return (probabilities, *[out.attentions[k].float() for k in self.attention_keys])


def sample_corpus(
    vocab_size: int, documents: int, seed: int, max_sentences: int = 4, max_words: int = 9
) -> EncodedCorpus:
    """Random word ids shaped like documents: sentences and lengths vary so that padding is exercised."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(2, max_sentences + 1, documents)
    lengths = rng.integers(1, max_words + 1, int(counts.sum()))
    lengths[0] = max_words  # one full-width sentence: every batch has padded rows beside it
    tokens = rng.integers(3, max(vocab_size, 4), int(lengths.sum())).astype(np.int32)  # past PAD, UNK, SEP
    return EncodedCorpus(
        tokens=tokens,
        sentence_offsets=np.concatenate([[0], np.cumsum(lengths)]),
        document_offsets=np.concatenate([[0], np.cumsum(counts)]),
        labels=np.full(documents, -1, dtype=np.int64),
    )


def _tensors(arrays: dict[str, np.ndarray], names: tuple[str, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(torch.from_numpy(arrays[n]) for n in names)


def input_names(layout: str) -> tuple[str, ...]:
    return HIERARCHICAL_INPUTS if layout == "hierarchical" else FLAT_INPUTS


def _attention_keys(model, inputs: tuple[torch.Tensor, ...]) -> tuple[str, ...]:
    """The explanation weights this model returns ("word" and "sentence", or "token"), in a fixed order."""
    with torch.no_grad():
        att = model(batch_of(model.layout, inputs), return_attention=True).attentions or {}
    return tuple(k for k in ATTENTION_KEYS if torch.is_tensor(att.get(k)))


def _dynamic_axes(layout: str, keys: tuple[str, ...]) -> dict[str, dict[int, str]]:
    if layout == "hierarchical":
        axes = {
            "words": {0: "rows", 1: "width"},
            "word_mask": {0: "rows", 1: "width"},
            "sentence_index": {0: "batch", 1: "sentences"},
            "sentence_mask": {0: "batch", 1: "sentences"},
        }
    else:
        axes = {"tokens": {0: "batch", 1: "length"}, "mask": {0: "batch", 1: "length"}}
    outputs = {
        "word": {0: "batch", 1: "sentences", 2: "width"},
        "sentence": {0: "batch", 1: "sentences"},
        "token": {0: "batch", 1: "length"},
    }
    return {**axes, "probabilities": {0: "batch"}, **{k: outputs[k] for k in keys}}


def _probabilities(logits: torch.Tensor, multi_label: bool) -> torch.Tensor:
    """A softmax over classes, or for a multi-label model each class's own sigmoid."""
    return torch.sigmoid(logits) if multi_label else torch.softmax(logits, dim=-1)


def trace(
    model, path: Path, vocab_size: int, attention: bool = True, opset: int = 17, multi_label: bool = False
) -> tuple[str, ...]:
    """Write ``model``'s graph to ``path``; returns the attention outputs it has (after "probabilities")."""
    names = input_names(model.layout)
    inputs = _tensors(batch_arrays(sample_corpus(vocab_size, 3, seed=0), np.arange(3), model.layout, {}), names)
    keys = _attention_keys(model, inputs) if attention else ()
    graph = _Graph(export_friendly(model), keys, multi_label).eval()
    with warnings.catch_warnings(), torch.no_grad(), traceable_layers():
        warnings.simplefilter("ignore")  # the tracer's notes on Python values it records as constants
        torch.onnx.export(
            graph,
            inputs,
            str(path),
            input_names=list(names),
            output_names=["probabilities", *keys],
            dynamic_axes=_dynamic_axes(model.layout, keys),
            opset_version=opset,
            dynamo=False,
        )
    return keys


def differences(
    model, path: Path, keys: tuple[str, ...], vocab_size: int, multi_label: bool = False
) -> dict[str, float]:
    """Largest |graph - PyTorch| of the probabilities and of the attention weights, on batches of other shapes
    than the traced one (five longer documents, then a single one), PyTorch running the unmodified model."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = input_names(model.layout)
    worst = {"probabilities": 0.0, "attention": 0.0}
    for seed, n in ((1, 5), (2, 1)):
        arrays = batch_arrays(
            sample_corpus(vocab_size, n, seed, max_sentences=6, max_words=13), np.arange(n), model.layout, {}
        )
        with torch.no_grad():
            out = model(batch_of(model.layout, _tensors(arrays, names)), return_attention=bool(keys))
        expected = [_probabilities(out.logits.float(), multi_label).numpy()]
        expected += [out.attentions[k].float().numpy() for k in keys]
        got = session.run(["probabilities", *keys], {k: arrays[k] for k in names})
        for i, (a, b) in enumerate(zip(got, expected)):
            if a.shape != b.shape:
                raise ExportError(
                    f"the exported graph gives {['probabilities', *keys][i]} of shape {a.shape} where "
                    f"PyTorch gives {b.shape}: a shape was fixed while tracing"
                )
            key = "probabilities" if i == 0 else "attention"
            worst[key] = max(worst[key], float(np.abs(a - b).max()) if a.size else 0.0)
    return worst


def _check_out(run_dir: Path, out_dir: Path) -> None:
    """Refuse, before anything is written, a folder that would lose files that are not a former export."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"--out {out_dir} is a file; the export writes a folder ({', '.join(EXPORT_FILES)})")
    if out_dir.resolve() == run_dir.resolve():
        raise ExportError(
            f"--out {out_dir} is the run folder itself; its config.json would be replaced: give another folder"
        )
    if out_dir.is_dir() and any(out_dir.iterdir()):
        try:
            former = json.loads((out_dir / CONFIG_FILE).read_text(encoding="utf-8")).get("format") == EXPORT_FORMAT
        except (OSError, ValueError, AttributeError, RecursionError):
            former = False
        if not former:
            raise ExportError(
                f"--out {out_dir} holds other files; give an empty or new folder (a former export's is replaced)"
            )


def export_run(run_dir: Path, out_dir: Path, attention: bool = True, opset: int = 17) -> Path:
    """``export_onnx``: checks, trace, parity against PyTorch, then the four files (config.json last)."""
    import tempfile

    from docattn.data.files import atomic_write
    from docattn.models import get_spec
    from docattn.training.run import VOCAB, load_run
    from docattn.version import __version__

    _check_out(run_dir, out_dir)
    try:
        import onnx  # noqa: F401  (the exporter needs it)
        import onnxruntime  # noqa: F401
    except ImportError:
        raise ExportError("ONNX export needs onnx and onnxruntime: pip install 'docattn[onnx]'") from None
    run = load_run(run_dir, "cpu")
    spec = get_spec(run.model_name)
    if spec.layout not in ("hierarchical", "flat") or not isinstance(run.model, torch.nn.Module):
        raise ExportError(
            f"model {run.model_name!r} is a {spec.layout}-of-words baseline, not a neural network; ONNX "
            "export covers the neural models (docattn models lists them)"
        )
    vocab_size = len(run.vocab)
    with tempfile.TemporaryDirectory(prefix="docattn-onnx-") as tmp:
        graph_path = Path(tmp) / MODEL_FILE
        try:
            multi = run.labels.multi_label
            keys = trace(run.model, graph_path, vocab_size, attention, opset, multi)
            worst = differences(run.model, graph_path, keys, vocab_size, multi)
        except ExportError as err:
            raise ExportError(f"model {run.model_name!r} does not export to ONNX: {err}") from None
        except Exception as err:  # the tracer's and the runtime's many error types: one line naming the model
            first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
            raise ExportError(
                f"model {run.model_name!r} does not export to ONNX ({type(err).__name__}: {first})"
            ) from None
        if worst["probabilities"] > TOLERANCE or worst["attention"] > 10 * TOLERANCE:
            raise ExportError(
                f"model {run.model_name!r}: the ONNX graph's outputs differ from PyTorch's by "
                f"{worst['probabilities']:.1e} (probabilities) and {worst['attention']:.1e} (attention), "
                f"past the tolerance of {TOLERANCE:g}; it does not export faithfully"
            )
        graph = graph_path.read_bytes()
    d = run.data
    config = {
        "format": EXPORT_FORMAT,
        "format_version": FORMAT_VERSION,
        "docattn_version": __version__,
        "model": run.model_name,
        "paper": spec.paper,
        "layout": spec.layout,
        "inputs": list(input_names(spec.layout)),
        "outputs": ["probabilities", *keys],
        "limits": {
            "max_sentences": d.max_sentences,
            "max_words": d.max_words,
            "max_tokens": d.max_tokens,
            "max_batch_words": d.max_batch_words,
            "max_batch_pairs": d.max_batch_pairs,
        },
        "num_classes": len(run.labels),
        "vocab_size": vocab_size,
        "opset": opset,
        "max_abs_difference": worst,
        "run": str(run_dir.resolve()),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(out_dir / MODEL_FILE, graph)
    atomic_write(out_dir / VOCAB_FILE, (run_dir / VOCAB).read_bytes())
    atomic_write(out_dir / LABELS_FILE, json.dumps(run.labels.to_json(), ensure_ascii=False))
    atomic_write(out_dir / CONFIG_FILE, json.dumps(config, indent=1, ensure_ascii=False))
    return out_dir
