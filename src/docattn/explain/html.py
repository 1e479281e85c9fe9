"""A self-contained HTML attention report: no scripts or styles from the network, opens offline."""

from __future__ import annotations

import html
import math
import os
from pathlib import Path

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:60em;color:#222}
.doc{border:1px solid #ccc;border-radius:6px;padding:1em;margin:1em 0}
.meta{font-size:90%;color:#555;margin-bottom:.5em}
.sent{display:flex;align-items:flex-start;margin:.15em 0}
.bar{flex:0 0 4em;height:1em;background:#eee;margin:.2em .6em 0 0;position:relative}
.bar span{position:absolute;left:0;top:0;bottom:0;background:#1f77b4}
.w{padding:0 .1em;border-radius:2px}
.ok{color:#2a7} .bad{color:#c33}
body.sentence-only .w{background:none!important}
"""

_SCRIPT = """
function toggleLevel(){document.body.classList.toggle('sentence-only');}
"""


def _shade(weight: float) -> str:
    a = max(0.0, min(1.0, weight))
    return f"background:rgba(255,80,0,{a:.3f})"


def _word_spans(tokens, weights) -> str:
    parts = []
    for tok, w in zip(tokens, weights):
        w = 0.0 if w is None or not math.isfinite(w) else float(w)
        parts.append(f'<span class="w" data-w="{w:.4f}" style="{_shade(w)}" title="{w:.3f}">{html.escape(tok)}</span>')
    return " ".join(parts)


def render_document(item: dict) -> str:
    """One document: prediction, gold label, probabilities, sentence bars and shaded words."""
    probs = ", ".join(f"{html.escape(str(c))}: {p:.3f}" for c, p in sorted(item["probabilities"].items(), key=lambda kv: -kv[1]))
    gold = item.get("label")
    verdict = ""
    if gold is not None:
        ok = str(gold) == str(item["prediction"])
        verdict = f' <b class="{"ok" if ok else "bad"}">{"correct" if ok else "wrong"}</b> (gold {html.escape(str(gold))})'
    head = f'<div class="meta">{html.escape(str(item.get("id", "")))}: predicted <b>{html.escape(str(item["prediction"]))}</b>{verdict}<br>{probs}</div>'
    rows = []
    if item.get("layout") == "hierarchical":
        for s in item["sentences"]:
            p_s = s["weight"] if s["weight"] is not None else 0.0
            words = s["word_weights"] or [0.0] * len(s["tokens"])
            # HAN's rule (Yang et al. 2016, sec. 3.6): word intensity sqrt(p_sentence) * p_word, scaled to the doc max
            shown = [math.sqrt(max(p_s, 0.0)) * w for w in words]
            rows.append((p_s, s["tokens"], shown))
        top = max((max(r[2], default=0.0) for r in rows), default=0.0) or 1.0
        body = "".join(
            f'<div class="sent" data-weight="{p:.4f}"><div class="bar" title="sentence weight {p:.3f}"><span style="width:{100 * max(0.0, min(1.0, p)):.1f}%"></span></div>'
            f"<div>{_word_spans(toks, [w / top for w in shown])}</div></div>"
            for p, toks, shown in rows
        )
    else:
        weights = item.get("token_weights") or [0.0] * len(item["tokens"])
        top = max(weights, default=0.0) or 1.0
        body = f"<div>{_word_spans(item['tokens'], [w / top for w in weights])}</div>"
    return f'<div class="doc">{head}{body}</div>'


def write_html(items: list[dict], path, title: str = "docattn attention report") -> Path:
    """Write the report atomically; every style and script is inline."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = (
        f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title><style>{_STYLE}</style>"
        f"<script>{_SCRIPT}</script></head><body><h1>{html.escape(title)}</h1>"
        "<p>Bars: sentence attention. Shading: word attention (hierarchical models: sqrt(p_sentence) &times; p_word, "
        "scaled to each document's maximum). <button onclick=\"toggleLevel()\">toggle word shading</button></p>"
        + "".join(render_document(it) for it in items)
        + "</body></html>"
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(doc, encoding="utf-8")
    os.replace(tmp, path)
    return path
