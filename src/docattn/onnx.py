"""``OnnxPredictor``: an exported run (``docattn.export.export_onnx``) on onnxruntime, without torch.

Text goes through docattn's own tokenizer and encoding (``Vocabulary``, ``encode_corpus``), the same ids
``DocumentClassifier`` gives, then into NumPy batches of the run's layout and limits (``export.arrays``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from docattn.errors import CheckpointError, ConfigError, DocattnError
from docattn.export import CONFIG_FILE, EXPORT_FORMAT, FORMAT_VERSION, LABELS_FILE, MODEL_FILE, VOCAB_FILE


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(
            f"{path}: missing; an ONNX export folder holds {MODEL_FILE}, {VOCAB_FILE}, "
            f"{LABELS_FILE} and {CONFIG_FILE} (docattn export RUN --format onnx)"
        ) from None
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise CheckpointError(f"{path}: not valid JSON ({str(err)[:200]})") from None


class OnnxPredictor:
    """``predict`` / ``predict_proba`` of an ONNX export folder; columns of ``predict_proba`` in ``classes_`` order.

    ``threads`` bounds onnxruntime's intra-op threads (None: its default, one per core).
    """

    def __init__(self, path: str | Path, threads: int | None = None):
        from docattn.data.corpus import LabelMap
        from docattn.data.text import Vocabulary

        self.path = Path(path)
        if not self.path.is_dir():
            raise CheckpointError(f"{self.path}: not an ONNX export folder (no such folder)")
        self.config = _read_json(self.path / CONFIG_FILE)
        if not isinstance(self.config, dict) or self.config.get("format") != EXPORT_FORMAT:
            raise CheckpointError(f"{self.path / CONFIG_FILE}: not a docattn ONNX export's config")
        if self.config.get("format_version", 0) > FORMAT_VERSION:
            raise CheckpointError(
                f"{self.path}: exported by a newer docattn (format {self.config['format_version']}); "
                "upgrade docattn to read it"
            )
        try:
            self.layout, self.inputs = self.config["layout"], tuple(self.config["inputs"])
            self.limits = dict(self.config["limits"])
        except (KeyError, TypeError) as err:
            raise CheckpointError(f"{self.path / CONFIG_FILE}: missing or malformed field {err}") from None
        self.vocab = Vocabulary.load(self.path / VOCAB_FILE)
        try:
            self.labels = LabelMap.from_json(_read_json(self.path / LABELS_FILE))
        except (TypeError, ValueError, DocattnError) as err:
            raise CheckpointError(f"{self.path / LABELS_FILE}: malformed classes ({err})") from None
        self.session = _session(self.path / MODEL_FILE, threads)
        self.outputs = tuple(o.name for o in self.session.get_outputs())

    @property
    def classes_(self) -> list:
        return list(self.labels.classes)

    @property
    def model_name(self) -> str:
        return str(self.config.get("model", ""))

    def encode(self, texts):
        """The texts' word ids, as ``DocumentClassifier.encode`` gives them (raw strings or lists of sentences)."""
        from docattn.data.corpus import to_corpus
        from docattn.data.encoding import encode_corpus

        return encode_corpus(to_corpus(texts), self.vocab, None)

    def run(
        self, texts, outputs: tuple[str, ...] = ("probabilities",), batch_size: int | None = None
    ) -> list[list[np.ndarray]]:
        """Per document, the named graph outputs (its own row of each); documents are batched by length.

        ``batch_size`` None: 16 documents a call for a hierarchical graph, which pads every sentence of a
        call to the longest one (onnxruntime pays for each padded step), 64 for a flat one."""
        from docattn.export.arrays import batch_arrays, length_batches

        unknown = [o for o in outputs if o not in self.outputs]
        if unknown:
            raise ConfigError(f"the exported graph has no output {unknown[0]!r}; it has {', '.join(self.outputs)}")
        if batch_size is None:
            batch_size = 16 if self.layout == "hierarchical" else 64
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
        enc = self.encode(texts)
        rows: list = [None] * len(enc)
        for docs in length_batches(enc, self.layout, batch_size):
            arrays = batch_arrays(enc, docs, self.layout, self.limits)
            values = self.session.run(list(outputs), {name: arrays[name] for name in self.inputs})
            for i, d in enumerate(docs):
                rows[int(d)] = [v[i] for v in values]
        return rows

    def predict_proba(self, texts, batch_size: int | None = None) -> np.ndarray:
        """(n_documents, n_classes) probabilities, columns in ``classes_`` order."""
        return np.stack([r[0] for r in self.run(texts, ("probabilities",), batch_size)]).astype(np.float32)

    def predict(self, texts, batch_size: int | None = None) -> list:
        """The most probable class of each document; multi-label: the list of classes over their thresholds."""
        probs = self.predict_proba(texts, batch_size)
        if self.labels.multi_label:
            return self.labels.decode_sets(self.labels.decide(probs))
        return self.labels.decode(probs.argmax(1))

    def __repr__(self) -> str:
        return f"OnnxPredictor({str(self.path)!r}, model={self.model_name!r})"


def _session(path: Path, threads: int | None):
    try:
        import onnxruntime as ort
    except ImportError:
        raise ConfigError("OnnxPredictor needs onnxruntime: pip install 'docattn[onnx]'") from None
    if not path.is_file():
        raise CheckpointError(f"{path}: missing (the exported graph)")
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime's own error types: a damaged or foreign file
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise CheckpointError(f"{path}: onnxruntime cannot load it ({first})") from None
