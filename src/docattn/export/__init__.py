"""Export a run for serving without PyTorch: ``export_onnx(run_dir, out_dir)``; ``docattn.onnx.OnnxPredictor`` reads it.

An export folder holds ``model.onnx`` (encoded batch in, probabilities and attention weights out),
the run's ``vocab.json``, ``labels.json`` (the classes in the run's order) and ``config.json`` (model,
layout, input and output names, the run's limits, the measured parity with PyTorch).

Nothing here imports torch on import: ``docattn.onnx`` reads ``export.arrays`` without it.
"""

from __future__ import annotations

from pathlib import Path

from docattn.errors import DocattnError

EXPORT_FORMAT = "docattn-onnx"
FORMAT_VERSION = 1
MODEL_FILE, VOCAB_FILE, LABELS_FILE, CONFIG_FILE = "model.onnx", "vocab.json", "labels.json", "config.json"
EXPORT_FILES = (MODEL_FILE, VOCAB_FILE, LABELS_FILE, CONFIG_FILE)


class ExportError(DocattnError):
    """A run cannot be exported (a non-neural baseline, a graph that does not trace faithfully)."""


def export_onnx(run_dir: str | Path, out_dir: str | Path, attention: bool = True, opset: int = 17) -> Path:
    """Write ``out_dir``/model.onnx, vocab.json, labels.json and config.json from the run in ``run_dir``.

    ``attention`` adds the model's word / sentence / token weights as outputs beside the probabilities.
    The graph is checked against PyTorch on a batch of another shape than the traced one before any
    file is written; a model that does not export faithfully is an ``ExportError`` saying why.
    """
    from docattn.export.onnx_export import export_run

    return export_run(Path(run_dir), Path(out_dir), attention=attention, opset=opset)


__all__ = ["export_onnx", "ExportError", "EXPORT_FILES"]
