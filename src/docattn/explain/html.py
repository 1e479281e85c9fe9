"""A self-contained HTML attention report: no scripts or styles from the network, opens offline.

Each document shows its prediction, gold label and probabilities, a bar per sentence (sentence
attention) and every word shaded by its attention. Two controls at the top, both inline script:

- level: words by HAN's rule sqrt(p_sentence) * p_word (default), words by p_word alone (within
  their sentence), or sentences only (bars, no word shading);
- view: the model's attention (default) or, when ``add_attention_views`` attached them, one head
  of a multi-head model (HCAN) or one learned query (CSPAN) at a time.

Explanations by signed contributions (linear, gradient x input, integrated gradients) shade each word by
|contribution| scaled to the document's largest, orange where it pushes toward the explained class and blue
(class ``neg``) where it pushes away. Every weight written in the page (``data-w``, ``data-p``,
``data-weight``) is scaled to [0, 1].
"""

from __future__ import annotations

import html
import math
from pathlib import Path

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:60em;color:#222}
.doc{border:1px solid #ccc;border-radius:6px;padding:1em;margin:1em 0}
.meta{font-size:90%;color:#555;margin-bottom:.5em}
.sent{display:flex;align-items:flex-start;margin:.15em 0}
.bar{flex:0 0 4em;height:1em;background:#eee;margin:.2em .6em 0 0;position:relative}
.bar span{position:absolute;left:0;top:0;bottom:0;background:#1f77b4}
.w{padding:0 .1em;border-radius:2px;unicode-bidi:isolate}
.unread{color:#aaa}
.trunc{color:#a60}
.ok{color:#2a7} .bad{color:#c33}
.controls{position:sticky;top:0;background:#fff;padding:.4em 0;border-bottom:1px solid #eee}
.vname{font-size:80%;color:#777}
.how{font-size:90%;color:#555}
.label{border-top:1px dashed #ddd;margin-top:.6em;padding-top:.4em}
body.sentence-only .w{background:none!important}
"""

_SCRIPT = """
function shade(w,neg){return (neg?'rgba(31,119,180,':'rgba(255,80,0,')+Math.max(0,Math.min(1,w)).toFixed(3)+')';}
function setLevel(v){
  document.body.classList.toggle('sentence-only', v==='sentences');
  var key = v==='word' ? 'p' : 'w';
  document.querySelectorAll('span.w').forEach(function(s){s.style.background=shade(parseFloat(s.dataset[key]),s.classList.contains('neg'));});
}
function setView(v){
  document.querySelectorAll('.doc').forEach(function(doc){
    var views = doc.querySelectorAll('.view'), has = false;
    views.forEach(function(x){ if (x.dataset.view === v) has = true; });
    views.forEach(function(x){ x.hidden = x.dataset.view !== (has ? v : 'attention'); });
  });
}
"""


def _clip(w) -> float:
    w = 0.0 if w is None else float(w)
    return 0.0 if not math.isfinite(w) else max(0.0, min(1.0, w))


def _shade(weight: float, negative: bool = False) -> str:
    colour = "31,119,180" if negative else "255,80,0"
    return f"background:rgba({colour},{_clip(weight):.3f})"


def _word_spans(tokens, weights, within=None, read: int | None = None, signed=None) -> str:
    """Spans of shaded words: ``weights`` the shown intensity, ``within`` the word-level one (both in [0, 1]);
    words from position ``read`` on, which truncation kept from the model, are greyed. ``signed``: each word's
    contribution, whose sign picks the colour and which the tooltip gives."""
    within = weights if within is None else within
    read = len(tokens) if read is None else read
    signed = [None] * len(tokens) if signed is None else signed
    parts = []
    for i, (tok, w, p, c) in enumerate(zip(tokens, weights, within, signed)):
        w, p = _clip(w), _clip(p)
        if i >= read:
            parts.append(
                f'<span class="w unread" data-w="0" data-p="0" title="not read (truncated)">{html.escape(tok)}</span>'
            )
            continue
        negative = c is not None and c < 0
        title = f"{w:.3f}" if c is None else f"{c:+.4g}"
        parts.append(
            f'<span class="w{" neg" if negative else ""}" data-w="{w:.4f}" data-p="{p:.4f}" '
            f'style="{_shade(w, negative)}" title="{title}">{html.escape(tok)}</span>'
        )
    return " ".join(parts)


def _truncation_note(item: dict) -> str:
    """What the model did not read, in words, for the document's header ("" when it read everything)."""
    if item.get("layout") == "hierarchical":
        read, total = item.get("sentences_read"), item.get("sentence_count")
        cut_words = any(s.get("words_read", len(s["tokens"])) < len(s["tokens"]) for s in item["sentences"])
        notes = []
        if read is not None and total is not None and read < total:
            notes.append(f"the model read the first {read:,} of {total:,} sentences (the rest are not shown)")
        if cut_words:
            notes.append("greyed words lie past the model's words-per-sentence limit: it never read them")
        return "; ".join(notes)
    read, total = item.get("tokens_read"), len(item.get("tokens", []))
    if read is not None and read < total:
        return f"the model read the first {read:,} of {total:,} words; the greyed rest it never saw"
    return ""


def _scaled(values) -> list[float]:
    top = max((v for v in values if v is not None and math.isfinite(v)), default=0.0) or 1.0
    return [(0.0 if v is None or not math.isfinite(v) else v) / top for v in values]


def _body(item: dict, sentence_weights=None, word_weights=None, token_weights=None) -> str:
    """Sentence bars and word shading of one document for one set of weights (the item's own when none are given,
    with their signed contributions where the method has them)."""
    if item.get("layout") == "hierarchical":
        sentences = item["sentences"]
        signed = [s.get("word_contributions") for s in sentences] if word_weights is None else [None] * len(sentences)
        if sentence_weights is None:
            sentence_weights = [s["weight"] for s in sentences]
        if word_weights is None:
            word_weights = [s["word_weights"] for s in sentences]
        rows = []
        for s, p_s, words, c in zip(sentences, sentence_weights, word_weights, signed):
            p_s = 0.0 if p_s is None or not math.isfinite(p_s) else float(p_s)
            words = list(words) if words is not None else [0.0] * len(s["tokens"])
            # HAN's rule (Yang et al. 2016, sec. 3.6): word intensity sqrt(p_sentence) * p_word, scaled to the doc max;
            # a contribution is shown as itself, |c| on one scale for the whole document
            shown = [abs(x) for x in c] if c is not None else [math.sqrt(max(p_s, 0.0)) * w for w in words]
            rows.append((p_s, s["tokens"], shown, _scaled(words), s.get("words_read"), c))
        top = max((max(r[2], default=0.0) for r in rows), default=0.0) or 1.0
        return "".join(
            f'<div class="sent" data-weight="{_clip(p):.4f}"><div class="bar" title="sentence weight {_clip(p):.3f}">'
            f'<span style="width:{100 * _clip(p):.1f}%"></span></div>'
            f"<div>{_word_spans(toks, [w / top for w in shown], within, read, c)}</div></div>"
            for p, toks, shown, within, read, c in rows
        )
    signed = item.get("token_contributions") if token_weights is None else None
    weights = token_weights if token_weights is not None else item.get("token_weights")
    weights = weights if weights is not None else [0.0] * len(item["tokens"])
    return f"<div>{_word_spans(item['tokens'], _scaled(weights), read=item.get('tokens_read'), signed=signed)}</div>"


_METHOD_NAMES = {
    "linear": "linear contributions to the logit of",
    "gradient_x_input": "gradient &times; input toward",
    "integrated_gradients": "integrated gradients toward",
}

_LEGENDS = {
    "attention": "Attention: bars are sentence attention; shading is word attention (hierarchical models: "
    "sqrt(p_sentence) &times; p_word, scaled to each document's maximum). Models that pool by max instead of "
    "attention show the share of the pooled features each word or sentence wins; mean pooling gives every position "
    "the same weight.",
    "linear": "Linear: each word's exact contribution to the explained class's logit (tf-idf weight &times; "
    "coefficient, a bigram's split equally between its two words; fastText: its share of the mean of rows "
    "&times; the class's output weights); the contributions plus the bias make the logit.",
    "gradient_x_input": "Gradient &times; input: the gradient of the class's logit at each word's embedding, "
    "times the embedding.",
    "integrated_gradients": "Integrated gradients: gradient &times; input averaged along the path from the "
    "all-padding document to this one; they add up to the change in the logit along it.",
}
_SIGNED_LEGEND = (
    "Signed methods shade each word by |contribution|, scaled to the document's largest: orange pushes toward the "
    "explained class, blue away from it; a sentence's bar is its words' share of the document's |contribution|."
)


def is_correct(gold, prediction) -> bool:
    """Whether a prediction is the gold label; multi-label: the predicted set is the gold set."""
    if isinstance(prediction, list):
        return {str(g) for g in gold} == {str(p) for p in prediction}
    return str(gold) == str(prediction)


def document_head(item: dict) -> str:
    """The header of one explained document: id, prediction, verdict, probabilities, method, what was not read."""
    ranked = sorted(item["probabilities"].items(), key=lambda kv: -kv[1])
    probs = ", ".join(f"<bdi>{html.escape(str(c))}</bdi>: {p:.3f}" for c, p in ranked)  # bdi: user text, isolated
    gold, prediction = item.get("label"), item["prediction"]
    verdict = ""
    if gold is not None:
        ok = is_correct(gold, prediction)
        verdict = (
            f' <b class="{"ok" if ok else "bad"}">{"correct" if ok else "wrong"}</b> '
            f"(gold <bdi>{html.escape(str(gold))}</bdi>)"
        )
    how = ""
    if item.get("method") in _METHOD_NAMES:
        how = f'<br><span class="how">{_METHOD_NAMES[item["method"]]} <bdi>{html.escape(str(item["target"]))}</bdi>'
        if item.get("logit") is not None:
            how += f" (logit {item['logit']:.3f} = the words' sum {item['logit'] - item['bias']:+.3f}"
            how += f" + bias {item['bias']:+.3f})"
        how += "</span>"
    note = _truncation_note(item)
    note = f'<br><span class="trunc">{html.escape(note)}</span>' if note else ""
    shown = (", ".join(map(str, prediction)) or "no label") if isinstance(prediction, list) else str(prediction)
    return (
        f'<div class="meta"><bdi>{html.escape(str(item.get("id", "")))}</bdi>: predicted '
        f"<b><bdi>{html.escape(shown)}</bdi></b>{verdict}<br>{probs}{how}{note}</div>"
    )


def label_blocks(item: dict) -> str:
    """Multi-label: each predicted label's signed attributions, under the document's one attention."""
    blocks = []
    for entry in item.get("label_attributions") or []:
        if item.get("layout") == "hierarchical":
            sentences = [{**a, "tokens": s["tokens"]} for s, a in zip(item["sentences"], entry["sentences"])]
            own = {"layout": "hierarchical", "sentences": sentences}
        else:
            own = {"layout": item.get("layout"), "tokens": item["tokens"], **entry}
        name = _METHOD_NAMES.get(entry["method"], html.escape(entry["method"]))
        blocks.append(
            f'<div class="label"><div class="how">{name} <b><bdi>{html.escape(str(entry["label"]))}</bdi></b> '
            f"(probability {entry['probability']:.3f})</div>{_body(own)}</div>"
        )
    return "".join(blocks)


def render_document(item: dict) -> str:
    """One document: prediction, gold label, probabilities, sentence bars and shaded words (and its views)."""
    head = document_head(item)
    views = item.get("views") or []
    if not views:
        return f'<div class="doc">{head}{_body(item)}{label_blocks(item)}</div>'
    blocks = [f'<div class="view" data-view="attention">{_body(item)}</div>']
    for v in views:
        name = html.escape(v["name"])
        body = _body(item, v.get("sentence_weights"), v.get("word_weights"), v.get("token_weights"))
        blocks.append(f'<div class="view" data-view="{name}" hidden><div class="vname">{name}</div>{body}</div>')
    return f'<div class="doc">{head}{"".join(blocks)}{label_blocks(item)}</div>'


def _controls(items: list[dict]) -> str:
    """The level select, and the view select when any document has views (heads, queries)."""
    view_names: list[str] = []
    for it in items:
        for v in it.get("views") or []:
            if v["name"] not in view_names:
                view_names.append(v["name"])
    view_select = ""
    if view_names:
        options = "".join(f'<option value="{html.escape(n)}">{html.escape(n)}</option>' for n in view_names)
        view_select = (
            ' &nbsp; view: <select onchange="setView(this.value)"><option value="attention">'
            f"model attention (mean of heads / queries)</option>{options}</select>"
        )
    return (
        '<div class="controls">level: <select onchange="setLevel(this.value)">'
        '<option value="combined">words: sqrt(p_sentence) &times; p_word</option>'
        '<option value="word">words: p_word within the sentence</option>'
        '<option value="sentences">sentences only</option></select>' + view_select + "</div>"
    )


def legend(items: list[dict]) -> str:
    """What the page's bars and shading mean, for the methods its documents were explained by."""
    methods = list(dict.fromkeys(it.get("method", "attention") for it in items)) or ["attention"]
    parts = [_LEGENDS[m] for m in methods if m in _LEGENDS]
    if any(m in _METHOD_NAMES for m in methods):
        parts.append(_SIGNED_LEGEND)
    return "".join(f"<p>{p}</p>" for p in parts)


def page(title: str, items: list[dict], body: str, style: str = "") -> str:
    """A whole report page around ``body``: inline style and script, the title, the legend and the controls."""
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}{style}</style><script>{_SCRIPT}</script></head><body><h1>{html.escape(title)}</h1>"
        + legend(items)
        + _controls(items)
        + body
        + "</body></html>"
    )


def write_html(items: list[dict], path, title: str = "docattn attention report") -> Path:
    """Write the report atomically; every style and script is inline."""
    return write_atomic(path, page(title, items, "".join(render_document(it) for it in items)))


def write_atomic(path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder (created if missing):
    a crash leaves the old file or the new one, never half of one, and never a stray temporary file."""
    from docattn.data.files import atomic_write
    from docattn.errors import WriteError

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise WriteError(
            f"cannot write {path}: {err.strerror or err} (its folder cannot be made); write elsewhere"
        ) from None
    return atomic_write(path, text)


def _fit(weights, n: int) -> list[float]:
    out = [0.0] * n
    for i, w in enumerate(list(weights)[:n]):
        out[i] = float(w)
    return out


def add_attention_views(items: list[dict], clf, corpus, batch_size: int = 32) -> list[dict]:
    """Attach per-head (HCAN "word_heads"/"sentence_heads"/"token_heads") and per-query (CSPAN "queries") views.

    ``items`` are ``clf.explain(corpus)``'s results for the same documents, in order; each gets a
    ``views`` list of ``{"name", "sentence_weights", "word_weights"}`` (hierarchical) or
    ``{"name", "token_weights"}`` (flat). Models without such attentions get no views.
    """
    import torch

    from docattn.explain.attention_keys import PER_HEAD, attention_kind
    from docattn.explain.collect import attention_batches, unlabelled

    if any(it.get("method", "attention") != "attention" for it in items):
        return items  # heads and queries are attention's views; a signed explanation has its own weights
    enc = clf.encode(unlabelled(corpus))
    hierarchical = clf.model.layout == "hierarchical"
    for batch, out in attention_batches(clf, enc, batch_size, bucketed=False):
        att = {k: v.float().cpu().numpy() for k, v in (out.attentions or {}).items() if torch.is_tensor(v)}
        for row, d in enumerate(batch.documents.tolist()):
            item, views = items[d], []
            if hierarchical and ("word_heads" in att or "sentence_heads" in att):
                sentences = item["sentences"]
                heads = att["word_heads"].shape[2] if "word_heads" in att else att["sentence_heads"].shape[1]
                for h in range(heads):
                    sw = att["sentence_heads"][row, h, : len(sentences)].tolist() if "sentence_heads" in att else None
                    ww = (
                        [_fit(att["word_heads"][row, i, h], len(s["tokens"])) for i, s in enumerate(sentences)]
                        if "word_heads" in att
                        else None
                    )
                    views.append({"name": f"head {h + 1}", "sentence_weights": sw, "word_weights": ww})
            elif not hierarchical:
                for key in sorted(att):
                    kind = attention_kind(key)
                    if kind is not None and kind.kind == PER_HEAD and att[key].ndim == 3:
                        for h in range(att[key].shape[1]):
                            views.append(
                                {
                                    "name": f"{kind.axis} {h + 1}",
                                    "token_weights": _fit(att[key][row, h], len(item["tokens"])),
                                }
                            )
            if views:
                item["views"] = views
    return items
