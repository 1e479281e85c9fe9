"""The runs a server holds: each loaded once, its model used by one thread at a time.

``ServedRun.predict_proba`` and ``ServedRun.explain`` run in the server's worker threads. A lock per run
serialises them: gradient x input hooks the embedding layer for the length of a call, and a forward
pass running beside it would read the hooked layer.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

GRADIENT_VIEW = "gradient x input"


def jsonable(value):
    """A JSON-ready copy: class labels as strings in "probabilities", NaN and infinities as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return jsonable(value.item())
    return value


@dataclass
class ServedRun:
    name: str
    path: Path
    clf: object  # DocumentClassifier
    trained_with: str | None = None  # the docattn version that trained the run
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, name: str, path: Path) -> ServedRun:
        from docattn.classifier import DocumentClassifier
        from docattn.training.run import read_config

        clf = DocumentClassifier.load(path)
        return cls(name, Path(path), clf, read_config(path).get("docattn_version"))

    @property
    def layout(self) -> str:
        return self.clf.model.layout

    @property
    def explainable(self) -> bool:
        return self.layout in ("hierarchical", "flat")

    def info(self) -> dict:
        """What ``GET /models`` says of this run: model, classes, data settings, scores, versions."""
        from docattn.version import __version__

        r = self.clf.results or {}
        best = r.get("best") or {}
        valid = r.get("valid") or (
            {"accuracy": best.get("val_acc"), "macro_f1": best.get("val_macro_f1")} if best else None
        )
        baseline = r.get("baseline") or {}
        return jsonable(
            {
                "name": self.name,
                "model": self.clf.model_name,
                "layout": self.layout,
                "classes": self.clf.classes_,
                "data": self.clf.data_settings.to_json(),
                "validation": valid,
                "test": r.get("test"),
                "baseline": {
                    "model": baseline.get("model"),
                    "validation": baseline.get("valid"),
                    "test": baseline.get("test"),
                }
                if baseline
                else None,
                "explanations": self.explainable,
                "docattn_version": __version__,
                "trained_with_docattn": self.trained_with,
            }
        )

    def predict_proba(self, documents: list) -> np.ndarray:
        with self.lock:
            return self.clf.predict_proba(documents)

    def explain(self, documents: list, render_html: bool = False) -> list[dict]:
        """``docattn explain``'s items for ``documents`` (its JSON schema), with a gradient x input view where the model
        has a word embedding; ``render_html`` adds each document rendered as the explain report renders it."""
        from docattn.data.corpus import to_corpus
        from docattn.explain.html import add_attention_views, render_document

        corpus = to_corpus(documents, source="request")
        with self.lock:
            items = add_attention_views(self.clf.explain(corpus), self.clf, corpus)
            _add_gradient_view(items, self.clf, corpus)
        out = []
        for item in items:
            ready = jsonable(item)
            if render_html:
                ready["html"] = render_document(item)
            out.append(ready)
        return out


def _add_gradient_view(items: list[dict], clf, corpus) -> None:
    """A "gradient x input" view per document: |attribution| shares per sentence and per word within it (hierarchical),
    or per token (flat), scaled as attention is, so the report's views show it beside the attention."""
    from docattn.explain.scores import gradient_scores
    from docattn.explain.tokens import fit_to_limits

    if clf.labels.multi_label:  # each predicted label's attributions are the items' own (label_attributions)
        return
    layout = clf.model.layout
    enc = fit_to_limits(clf.encode(corpus.without_labels()), layout, clf.limits)  # only the words the model reads
    target = np.asarray([clf.labels.index[it["prediction"]] for it in items])
    scores = gradient_scores(clf, enc, target)
    if scores is None:
        return
    scores = np.abs(np.nan_to_num(scores))
    for d, item in enumerate(items):
        s0, s1 = enc.document_offsets[d], enc.document_offsets[d + 1]
        spans = [scores[enc.sentence_offsets[i] : enc.sentence_offsets[i + 1]] for i in range(s0, s1)]
        total = float(sum(s.sum() for s in spans)) or 1.0
        if layout == "hierarchical":
            if len(spans) != len(item["sentences"]):
                continue  # the read sentences and the shown ones disagree: show no view rather than a shifted one
            words = [
                _padded(s / (float(s.sum()) or 1.0), len(sent["tokens"])) for s, sent in zip(spans, item["sentences"])
            ]
            view = {
                "name": GRADIENT_VIEW,
                "sentence_weights": [float(s.sum()) / total for s in spans],
                "word_weights": words,
            }
        else:
            flat = np.concatenate(spans) if spans else np.zeros(0)
            view = {"name": GRADIENT_VIEW, "token_weights": _padded(flat / total, len(item["tokens"]))}
        item.setdefault("views", []).append(view)


def _padded(values: np.ndarray, n: int) -> list[float]:
    out = np.zeros(n)
    k = min(n, len(values))
    out[:k] = values[:k]
    return out.tolist()


def unique_names(paths: list[Path]) -> list[str]:
    """Each run's folder name; a name taken twice gets -2, -3, ... so every run can be picked."""
    names: list[str] = []
    for p in paths:
        base = Path(p).resolve().name or "run"
        name, i = base, 2
        while name in names:
            name, i = f"{base}-{i}", i + 1
        names.append(name)
    return names
