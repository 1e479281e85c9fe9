"""Attention weights of a fitted classifier, aligned with the words a person reads."""

from __future__ import annotations

import numpy as np
import torch

from docattn.data.corpus import Corpus
from docattn.data.text import documents_to_strings
from docattn.errors import DocattnError
from docattn.explain.attribution import contribution_items
from docattn.explain.scores import predicted
from docattn.explain.tokens import fit_length, surface_sentences


def explain_documents(
    clf, corpus, batch_size: int = 64, *, method: str | None = None, target=None, ig_steps: int = 20
) -> list[dict]:
    """Per document: prediction, probabilities, and word (and sentence) weights by ``method``, with how much of the
    document the model read (``tokens_read``, or ``sentences_read`` of ``sentence_count`` and each sentence's
    ``words_read``: words past a limit weigh 0).

    ``method``: "attention", "linear", "gradient_x_input" or "integrated_gradients" (``explain.methods``); None
    takes the model's default. The signed methods explain ``target``, a class index or one per document (None:
    each document's predicted class), and add each word's signed contribution; "linear" adds the ``bias`` that
    the contributions add up to the class's ``logit`` with. ``ig_steps``: integrated-gradients steps.
    """
    from docattn.data.corpus import to_corpus
    from docattn.errors import ConfigError
    from docattn.explain.methods import ATTENTION, GRADIENT_X_INPUT, SIGNED, model_methods, resolve_method

    corpus = corpus if isinstance(corpus, Corpus) else to_corpus(corpus)
    method = resolve_method(clf.model, clf.model_name, method)
    if method != ATTENTION:
        items = contribution_items(clf, corpus, method, target, ig_steps, batch_size)
        if clf.labels.multi_label and target is None:  # the top label above, and each predicted label beside it
            add_label_attributions(clf, corpus, items, method, batch_size, ig_steps)
        return items
    if target is not None:
        raise ConfigError(
            f"attention weights do not depend on the class, so a target does not apply; it does for {', '.join(SIGNED)}"
        )
    items = attention_items(clf, corpus, batch_size)
    if clf.labels.multi_label and GRADIENT_X_INPUT in model_methods(clf.model):
        add_label_attributions(clf, corpus, items, GRADIENT_X_INPUT, batch_size)
    return items


def add_label_attributions(
    clf, corpus: Corpus, items: list[dict], method: str, batch_size: int = 64, ig_steps: int = 20
) -> None:
    """Multi-label: one attention serves every label, so each item gets ``label_attributions``, the signed
    ``method`` contributions toward each label it predicts (in the item's schema, without the tokens)."""
    classes = clf.labels.classes
    for item in items:
        item["label_attributions"] = []
    for k, label in enumerate(classes):
        docs = [d for d, item in enumerate(items) if label in item["prediction"]]
        if not docs:
            continue
        explained = contribution_items(clf, corpus.subset(docs), method, k, ig_steps, batch_size)
        for d, it in zip(docs, explained):
            entry = {"label": label, "probability": it["probabilities"][label], "method": method}
            if "sentences" in it:
                entry["sentences"] = [{k2: v for k2, v in s.items() if k2 != "tokens"} for s in it["sentences"]]
            else:
                entry.update({k2: it[k2] for k2 in ("token_weights", "token_contributions", "tokens_read")})
            items[d]["label_attributions"].append(entry)


@torch.inference_mode()
def attention_items(clf, corpus: Corpus, batch_size: int = 64) -> list[dict]:
    """``explain_documents``' items by the model's own attention (or pooling) weights."""
    from docattn.training.inference import make_batch, sigmoid, softmax

    model = clf.model
    model.eval()
    enc = clf.encode(corpus.without_labels())  # gold labels are shown as given, never checked against the classes
    strings = documents_to_strings(corpus.texts, corpus.sentences, clf.vocab.text_config)
    device = next(model.parameters()).device
    out: list[dict] = []
    for start in range(0, len(enc), batch_size):
        docs = np.arange(start, min(start + batch_size, len(enc)))
        batch = make_batch(enc, docs, model.layout, clf.limits)
        result = model(batch.to(device), return_attention=True)
        logits = result.logits.float().cpu().numpy()
        probs = sigmoid(logits) if clf.labels.multi_label else softmax(logits)
        shown = predicted(clf.labels, probs)
        att = {k: v.float().cpu().numpy() for k, v in (result.attentions or {}).items() if torch.is_tensor(v)}
        if not {"word", "sentence", "token"} & set(att):
            raise DocattnError(
                f"model {clf.model_name!r} gives no attention or pooling weights to explain its decisions "
                "with; every attention model, and the max- and mean-pooling ones, do (docattn models)"
            )
        for row, d in enumerate(docs):
            sentences = surface_sentences(clf.vocab, strings[d])
            item = {
                "id": corpus.ids[d],
                "prediction": shown[row],
                "probabilities": {
                    c: float(p) for c, p in zip(clf.labels.classes, probs[row])
                },  # keyed like "prediction"
                "label": corpus.labels[d] if corpus.labels is not None else None,
                "layout": model.layout,
                "method": "attention",
                "target": None,  # attention weighs words the same whichever class is asked about
                "bias": None,
                "logit": None,
            }
            # what truncation let the model read is said, so an unread word is not taken for an ignored one
            if model.layout == "hierarchical":
                n_sent = int(batch.sentence_mask[row].sum())
                item["sentences_read"], item["sentence_count"] = n_sent, len(sentences)
                item["sentences"] = []
                for i, toks in enumerate(sentences[:n_sent]):
                    item["sentences"].append(
                        {
                            "tokens": toks,
                            "weight": float(att["sentence"][row, i]) if "sentence" in att else None,
                            "word_weights": fit_length(att["word"][row, i], len(toks)) if "word" in att else None,
                            "word_contributions": None,
                            "words_read": min(len(toks), int(batch.word_mask[batch.sentence_index[row, i]].sum())),
                        }
                    )
            else:
                tokens = [t for s in sentences for t in s]
                item["tokens"] = tokens
                item["token_weights"] = fit_length(att["token"][row], len(tokens)) if "token" in att else None
                item["token_contributions"] = None
                item["tokens_read"] = min(len(tokens), int(batch.mask[row].sum()))
            out.append(item)
    return out


def jsonable(items: list[dict]) -> list[dict]:
    """``explain``'s items ready for JSON: JSON keys are strings, so the class names of "probabilities" become str."""
    return [{**it, "probabilities": {str(c): p for c, p in it["probabilities"].items()}} for it in items]


def explanations_json(items: list[dict]) -> str:
    """``explain``'s items as JSON text."""
    import json

    return json.dumps(jsonable(items), ensure_ascii=False, indent=1, default=str)
