"""A model card (Mitchell et al. 2019) of a run, written from the run's own records only.

    model_card(run_dir) -> Markdown      write_card(run_dir) -> run_dir/README.md

Read: config.json (model, hyper-parameters, data settings, training options and results: data counts,
validation and test scores, the tf-idf guardrail baseline, timings, device) and, where present,
faithfulness.json (which ``docattn faithfulness RUN`` saves there). Nothing is measured again and
nothing is unpickled; a figure the run did not record is said to be missing, never guessed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path

from docattn.models.contract import is_bag

CARD_FILE = "README.md"
FAITHFULNESS_FILE = "faithfulness.json"


def averaged_weights(best: dict) -> str | None:
    """Where the kept weights are a mean of several validations' (average_best), which: None for one."""
    steps = best.get("averaged_steps")
    if not steps:
        return None
    return f"the mean of the weights of {len(steps)} validations (steps {', '.join(str(s) for s in steps)})"


def _score(split: dict | None) -> str:
    if not isinstance(split, dict) or split.get("accuracy") is None:
        return "not recorded"
    f1 = f", macro-F1 {split['macro_f1']:.4f}" if isinstance(split.get("macro_f1"), (int, float)) else ""
    n = f" ({split['documents']:,} documents)" if isinstance(split.get("documents"), int) else ""
    if isinstance(split.get("micro_f1"), (int, float)):  # multi-label: accuracy is subset accuracy
        return f"micro-F1 {split['micro_f1']:.4f}{f1}, subset accuracy {split['accuracy']:.4f}{n}"
    return f"accuracy {split['accuracy']:.4f}{f1}{n}"


def _changed(defaults: dict, given: dict) -> list[str]:
    return [f"`{k}={given[k]!r}`" for k in sorted(given) if k in defaults and given[k] != defaults[k]]


def _non_default_options(config: dict) -> list[str]:
    """Hyper-parameters that differ from the registered variant's, and data and training options from the defaults."""
    from docattn.data.prepare import DataSettings
    from docattn.data.text import TextConfig
    from docattn.models import get_spec
    from docattn.training.config import TrainConfig

    out: list[str] = []
    try:
        spec = get_spec(config["model"])
        hp_defaults = {**_model_defaults(config["model"]), **spec.defaults}
        out += _changed(hp_defaults, config.get("hparams") or {})
    except Exception:  # a model this docattn does not know: its options are listed as recorded
        out += [f"`{k}={v!r}`" for k, v in sorted((config.get("hparams") or {}).items())]
    data = dict(config.get("data") or {})
    text = data.pop("text", {}) or {}
    out += _changed({f.name: getattr(DataSettings(), f.name) for f in fields(DataSettings) if f.name != "text"}, data)
    out += _changed(TextConfig().to_json(), text)
    try:
        registered = {k: v for k, v in get_spec(config["model"]).training.items() if k in TrainConfig.field_names()}
    except Exception:
        registered = {}
    train_defaults = json.loads(json.dumps({**asdict(TrainConfig()), **registered}, default=str))
    # the auto recipe resolves these from the data: the card's Training section reports them
    skip = {
        "progress",
        "progress_lines",
        "accelerator",
        "devices",
        "max_epochs",
        "min_epochs",
        "min_steps",
        "word2vec_epochs",
        "monitor",
        "class_weight",
        "recipe",
    }
    out += [o for o in _changed(train_defaults, config.get("training") or {}) if o.strip("`").split("=")[0] not in skip]
    return out


def _model_defaults(name: str) -> dict:
    import torch

    from docattn.models import create_model

    with torch.random.fork_rng(devices=[]):
        model = create_model(name, vocab_size=4, num_classes=2)
    return model.hparams()


def _faithfulness(run_dir: Path) -> list[str]:
    path = run_dir / FAITHFULNESS_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return [
            "No faithfulness measurement is stored with this run (`docattn faithfulness RUN --data PATH` "
            f"saves one in RUN/{FAITHFULNESS_FILE})."
        ]
    record = record[0] if isinstance(record, list) and record else record
    methods = record.get("methods", {}) if isinstance(record, dict) else {}
    lines = [
        f"ERASER faithfulness on {record.get('documents', '?')} documents ({FAITHFULNESS_FILE}): removing the "
        "top-ranked words should lower the predicted class's probability (comprehensiveness, higher is more "
        "faithful); keeping only them should keep it (sufficiency, lower is more faithful).",
        "",
        "| ranking | AOPC comprehensiveness | AOPC sufficiency |",
        "|---|---|---|",
    ]
    for name, m in methods.items():
        if isinstance(m, dict) and m.get("available"):
            lines.append(f"| {name} | {m['aopc_comprehensiveness']:.4f} | {m['aopc_sufficiency']:.4f} |")
        elif isinstance(m, dict):
            lines.append(f"| {name} | not available: {m.get('reason', '')} | |")
    return lines


def _data_lines(config: dict, results: dict) -> list[str]:
    data_info = results.get("data") or {}
    docs = data_info.get("documents") or {}
    labels = config.get("labels") or []
    multi = isinstance(labels, dict)  # a multi-label run's labels: classes, thresholds
    classes = labels.get("classes", []) if multi else labels
    lines = [
        f"- Classes ({len(classes)}): " + ", ".join(f"`{c}`" for c in classes),
        *(
            ["- Multi-label: a document gets every class whose probability reaches its threshold (tuned on validation)"]
            if multi
            else []
        ),
    ]
    if docs:
        lines.append("- Documents per split: " + ", ".join(f"{k} {v:,}" for k, v in docs.items()))
    inputs = data_info.get("inputs")
    if isinstance(inputs, dict):  # split -> SHA-256 of the input files: what was read, whatever its path now
        shown = [f"{split} `sha256:{digest[:16]}`" for split, digest in inputs.items() if isinstance(digest, str)]
        lines.append("- Source, by content hash: " + (", ".join(shown) or "not recorded"))
    elif inputs:
        names = [
            str(i.get("path", i)) if isinstance(i, dict) else str(i)
            for i in (inputs if isinstance(inputs, list) else [inputs])
        ]
        lines.append("- Source: " + ", ".join(f"`{n[:200]}`" for n in names[:4]))
    else:
        lines.append("- Source: not recorded (trained from Python lists, or before sources were kept)")
    counts = data_info.get("class_counts")
    if isinstance(counts, dict):
        lines.append("- Training documents per class: " + ", ".join(f"`{k}` {v:,}" for k, v in counts.items()))
    if config.get("vocab_size"):
        lines.append(
            f"- Vocabulary: {config['vocab_size']:,} words (minimum count {config.get('data', {}).get('min_count')})"
        )
    return lines


def _explanation_meaning(layout: str, hparams: dict) -> str:
    pooling = str(hparams.get("pooling", "attention"))
    if is_bag(layout):
        return (
            "This is a bag-of-words model: it has no attention. `explain` shows each word's exact share of the "
            "predicted class's logit (its tf-idf weight times the class's coefficient; a bigram's split between "
            "its two words), so the shading is the model's own arithmetic, not a proxy for it."
        )
    if pooling == "max":
        what = "the share of the pooled features each word (or sentence) wins in max pooling"
    elif pooling == "mean":
        what = "mean pooling, which gives every word the same weight: the shading carries no information"
    else:
        what = "the model's attention weights"
    rule = (
        " Words are shaded by sqrt(p_sentence) x p_word (HAN's rule) and sentences get bars."
        if layout == "hierarchical"
        else ""
    )
    return (
        f"Explanations show {what}.{rule} Attention says where the model pooled from, which is not proof of "
        "why it decided: read it beside the faithfulness figures below, and beside gradient x input."
    )


def _training_lines(config: dict, results: dict) -> list[str]:
    lines = []
    seconds = results.get("train_seconds")
    if isinstance(seconds, (int, float)):
        epochs = len(results.get("epoch_seconds") or []) or "?"
        lines.append(
            f"- Trained for {seconds:,.1f} s ({epochs} epoch(s)) on `{results.get('device', 'an unrecorded device')}`"
            + (f", {results['train_docs_per_s']:,.0f} documents/s" if results.get("train_docs_per_s") else "")
        )
    else:
        lines.append("- Training time: not recorded")
    best = results.get("best") or {}
    monitored = (config.get("training") or {}).get("monitor", "val_acc")
    if best.get("averaged_steps"):
        lines.append(f"- Weights: {averaged_weights(best)}, the best by {monitored}")
    elif best:
        lines.append(
            f"- Best weights from epoch {best['epoch'] + 1 if isinstance(best.get('epoch'), int) else '?'}, "
            f"step {best.get('step')} (monitored {monitored})"
        )
    for flag, text in (
        ("stopped_early", "stopped early: validation stopped improving"),
        ("stopped_on_budget", "stopped on its time budget (--max-time)"),
    ):
        if results.get(flag):
            lines.append(f"- {text}")
    if results.get("diverged_at") is not None:
        lines.append(f"- diverged at {results['diverged_at']}; the best weights validated before are kept")
    if results.get("extended_to_epochs"):
        lines.append(
            f"- still improving at the end of its {(config.get('training') or {}).get('max_epochs')} planned epochs, "
            f"so lengthened to {results['extended_to_epochs']}"
        )
    training = config.get("training") or {}
    lines.append(
        f"- Optimiser {training.get('optimizer')} at lr {training.get('lr')}, batch {training.get('batch_size')}, "
        f"seed {training.get('seed')}; embeddings: {results.get('embeddings', training.get('embeddings'))}"
    )
    return lines


def _limits_lines(config: dict, layout: str, results: dict) -> list[str]:
    data = config.get("data") or {}
    text = data.get("text") or {}
    sentences, words = data.get("max_sentences") or "all", data.get("max_words") or "all"
    if layout == "hierarchical":
        read = f"the first {sentences} sentences of a document and {words} words of each"
    elif layout == "flat":
        read = f"the first {data.get('max_tokens') or 'all'} words of a document"
    else:
        read = "every word of a document, as a bag of words and word pairs"
    lines = [f"- Reads {read}; the rest is never seen (explanations grey it out)."]
    truncated = results.get("truncated") or {}
    cut = ", ".join(f"{k} {v:,}" for k, v in truncated.items() if k != "limits" and v)
    if cut:
        lines.append(f"- Documents read only in part during training and evaluation: {cut}.")
    lines.append(
        "- Language: that of its training data, whatever it was; words are runs of letters and digits"
        + (", lowercased" if text.get("lowercase") else "")
        + (", each Han character a word" if text.get("han_characters") else "")
        + "; a word missing from the training vocabulary reads as `<unk>`. Unspaced scripts other than "
        "Chinese and Japanese (Thai) need segmenting first."
    )
    if isinstance(config.get("labels"), dict):
        lines.append(
            "- Intended for labelling documents like the training data with its classes; a document may get "
            "several or none, and text unlike anything it saw still gets whatever passes the thresholds "
            "(check the probabilities)."
        )
    else:
        lines.append(
            "- Intended for classifying documents like the training data into its classes; it always "
            "answers one of those classes, even for text unlike anything it saw (check the probabilities)."
        )
    return lines


def model_card(run_dir: str | Path) -> str:
    """The Markdown model card of the run in ``run_dir`` (read-only: nothing is written)."""

    from docattn.models import get_spec
    from docattn.training.run import read_config
    from docattn.version import __version__

    run_dir = Path(run_dir)
    config = read_config(run_dir)
    results = config.get("results") or {}
    name = str(config.get("model", "?"))
    try:
        spec = get_spec(name)
        paper, description, layout = spec.paper, spec.description, spec.layout
    except Exception:
        paper, description, layout = "not known to this docattn", "", "flat"
    baseline = results.get("baseline") or {}
    verdict = results.get("guardrail") or {}
    lines = [
        f"# Model card: {name} ({run_dir.name})",
        "",
        "## Model",
        f"- `{name}`: {description}",
        f"- Paper: {paper}",
        f"- Layout: {layout}; {config.get('num_classes', '?')} classes",
        f"- Trained with docattn {config.get('docattn_version', '?')}; card written by docattn {__version__}",
        "",
        "## Data",
        *_data_lines(config, results),
        "",
        "## Options that differ from the defaults",
    ]
    options = _non_default_options(config)
    valid = results.get("valid") or (_best(results) if results.get("best") else None)
    lines += [", ".join(options) if options else "None: the model's registered defaults throughout.", ""]
    lines += [
        "## Scores",
        "",
        f"| split | {name} | tf-idf baseline ({baseline.get('model', 'logreg')}) |",
        "|---|---|---|",
        f"| validation | {_score(valid)} | {_score(baseline.get('valid'))} |",
        f"| test | {_score(results.get('test'))} | {_score(baseline.get('test'))} |",
        "",
    ]
    if verdict.get("behind"):
        lines += [
            "**Warning:** on validation this model scores more than a point under the tf-idf baseline; "
            "prefer the baseline, or train longer / with pre-trained vectors.",
            "",
        ]
    elif not baseline:
        lines += ["No tf-idf baseline was recorded for this run.", ""]
    lines += ["## Training", *_training_lines(config, results), ""]
    lines += [
        "## Intended use and limits",
        *_limits_lines(config, layout, results),
        "",
        "### What an explanation means",
        _explanation_meaning(layout, config.get("hparams") or {}),
        "",
        "### Faithfulness",
        *_faithfulness(run_dir),
        "",
    ]
    return "\n".join(lines)


def _best(results: dict) -> dict:
    best = results.get("best") or {}
    return {"accuracy": best.get("val_acc"), "macro_f1": best.get("val_macro_f1")}


def write_card(run_dir: str | Path) -> Path:
    """Write ``run_dir``/README.md (atomically) and return its path."""
    from docattn.data.files import atomic_write

    text = model_card(run_dir)  # every check happens here, before the write
    return atomic_write(Path(run_dir) / CARD_FILE, text)
