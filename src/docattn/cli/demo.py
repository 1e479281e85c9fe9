"""The main job (``docattn`` alone, or ``docattn demo``) and the model list."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from docattn.cli.app import app
from docattn.cli.options import model_name
from docattn.errors import DocattnError


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context):
    """With no command, run the main job: train HAN on the embedded corpus, evaluate, explain."""
    if ctx.invoked_subcommand is None:
        demo()


@app.command()
def demo(  # Annotated options keep real defaults: the bare `docattn` calls demo() as a plain function
    out: Annotated[Path, typer.Option(help="Run directory to write.")] = Path("runs/demo"),
    model: Annotated[str, typer.Option(help="Model to train (any with attention or pooling weights).")] = "han",
    n_train: Annotated[int, typer.Option(help="Training documents (0: the package default).")] = 0,
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = 6,
    seed: Annotated[int, typer.Option(help="Seed of the generated corpus and of training.")] = 0,
):
    """The main job, offline: generate the embedded corpus, train, evaluate, write an explanation report."""
    from rich.console import Console

    from docattn.data import synthetic
    from docattn.models import get_spec
    from docattn.models.contract import is_bag

    model = model_name(model)
    if is_bag(get_spec(model)):  # refused before training, not after it
        raise DocattnError(
            f"the demo ends with an attention report, and {model!r} (a bag of words) has no attention or "
            "pooling weights to show; choose another model (docattn models)"
        )
    from docattn.training.run_folder import RUN_FILES, RunFolderError, RunLock, claim, clear, others

    written = (*RUN_FILES, "train.jsonl", "test.jsonl", "explanations.json", "report.html")
    clash = [n for n in others(out) if n in written] if out.is_dir() else []
    if clash or (out.exists() and not out.is_dir()):  # the main job replaces its own earlier output, nothing else
        raise RunFolderError(
            f"{out}: {', '.join(clash) or 'a file'} {'is' if len(clash) <= 1 else 'are'} not docattn's and "
            "the main job would replace it; move it away or give another --out"
        )
    n_tr = n_train or synthetic.DEFAULT_N_TRAIN
    splits = synthetic.make_splits(n_train=n_tr, n_test=synthetic.DEFAULT_N_TEST, seed=seed)
    with RunLock(out):
        clear(out)
        claim(out, written)
        _demo_into(Console(), out, model, splits, epochs, seed)


def _demo_into(console, out: Path, model: str, splits: dict, epochs: int, seed: int) -> None:
    from docattn.classifier import DocumentClassifier
    from docattn.data import synthetic
    from docattn.explain.attention import explanations_json
    from docattn.explain.html import write_atomic, write_html
    from docattn.explain.rationale import model_rationales, rationale_scores

    for name, corpus in splits.items():
        synthetic.write_jsonl(corpus, out / f"{name}.jsonl")
    console.print(
        f"[bold]Embedded corpus[/]: {len(splits['train'])} train / {len(splits['test'])} test documents, "
        f"{len(splits['train'].classes)} classes -> {out}/train.jsonl, test.jsonl"
    )
    train, test = splits["train"], splits["test"]
    # random init: in the corpus's templates every cue word shares its contexts with its opposite,
    # so word2vec would start "good" and "bad" almost equal
    clf = DocumentClassifier(model, max_epochs=epochs, seed=seed, min_count=2, embeddings="random")
    clf.fit(train.sentences, train.labels, run_dir=out)
    acc = clf.score(test.sentences, test.labels)
    console.print(
        f"[bold]{model}[/] test accuracy: {acc:.2%} ({clf.results.get('train_docs_per_s', 0):.0f} training documents/s)"
    )
    shown = test.subset(range(min(50, len(test))))  # ids as test.jsonl gives them to `docattn explain`
    explanations = clf.explain(shown)
    scores = rationale_scores(explanations, model_rationales(clf.vocab, shown))
    if scores:
        console.print(
            f"attention vs ground truth on 50 test documents: top sentence correct "
            f"{scores['top_sentence_accuracy']:.0%}, word AUPRC {scores['word_auprc']:.2f}"
        )
    write_atomic(out / "explanations.json", explanations_json(explanations))
    write_html(explanations[:20], out / "report.html", title=f"docattn {model} on the embedded corpus")
    clf.results["demo_test_accuracy"] = acc
    clf.save(out)
    console.print(
        f"run directory {out}: config.json, vocab.json, model.safetensors, metrics.csv, explanations.json, "
        f"and report.html (the attention of {len(explanations[:20])} test documents: open it in a browser)"
    )
    console.print(
        f"next: docattn predict {out} FILE  |  docattn explain {out} --data {out}/test.jsonl --html report.html  "
        f"|  docattn evaluate {out} --data {out}/test.jsonl"
    )


@app.command()
def models(pattern: str = typer.Argument("*", help="Glob over model names, e.g. 'han*' (any case).")):
    """List the registered models: what each reads of a document, and its size on a CPU."""
    from rich.console import Console
    from rich.table import Table

    from docattn.models import FEW_TOKENS, LARGE_DATA, SMALL_DATA
    from docattn.models.catalogue import list_catalogue  # no torch: the listing answers at once

    entries = list_catalogue(pattern)
    if not entries:
        raise DocattnError(f"no registered model matches {pattern!r}")
    table = Table("model", "layout", "reads by default", "description")
    for entry in entries:
        cpu = ", ".join(f"{k} {v}" for k, v in entry.cpu_sizes.items())
        large = ", ".join(f"{k} {v}" for k, v in entry.large_sizes.items())
        cpu_only = ", on a CPU" if entry.large_sizes.keys() & entry.cpu_sizes.keys() else ""  # ModelSpec.large
        small = ", ".join(f"{k} {v}" for k, v in entry.small_sizes.items())
        beyond_small = ", ".join(f"{k} {v}" for k, v in entry.beyond_small_sizes.items())
        few_tokens = ", ".join(f"{k} {v}" for k, v in entry.few_tokens_sizes.items())
        # where the sizes by documents name the same option, theirs win under SMALL_DATA (HPAN, HSAN, SANet: word2vec)
        few_tokens += (
            f" from {SMALL_DATA:,} documents on" if entry.few_tokens_sizes.keys() & entry.small_sizes.keys() else ""
        )
        table.add_row(
            entry.name,
            entry.layout,
            _default_reach(entry.truncation, entry.layout),
            entry.description
            + (f"; on a CPU (recipe auto) trained at {cpu}" if cpu else "")
            + (f"; from {LARGE_DATA:,} training documents (recipe auto{cpu_only}) {large}" if large else "")
            + (f"; under {SMALL_DATA:,} training documents (recipe auto) {small}" if small else "")
            + (f"; from {SMALL_DATA:,} training documents on (recipe auto) {beyond_small}" if beyond_small else "")
            + (f"; under {FEW_TOKENS:,} training tokens (recipe auto) {few_tokens}" if few_tokens else ""),
        )
    Console().print(table)


def _default_reach(training: dict, layout: str) -> str:
    """What of a document a model reads unless told otherwise: its registered truncation, else the data defaults."""
    from docattn.data.prepare import DataSettings

    base = DataSettings()
    keys = {"hierarchical": ("max_sentences", "max_words"), "flat": ("max_tokens",)}.get(layout, ())
    limits = {key: training.get(key, getattr(base, key)) for key in keys}
    cuts = [
        f"{limits[key]:,} {what}"
        for key, what in (("max_sentences", "sentences"), ("max_words", "words per sentence"), ("max_tokens", "tokens"))
        if limits.get(key)
    ]
    return ", ".join(cuts) or "all of it"
