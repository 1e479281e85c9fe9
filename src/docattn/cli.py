"""The ``docattn`` command line. Heavy modules are imported inside the commands that use them."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from docattn.data.sources import parse_value as _parse_value
from docattn.data.sources import read_evaluation_corpus as _read_eval_corpus
from docattn.data.sources import reader_options as _reader_options
from docattn.data.sources import resolve_source as _resolve
from docattn.errors import ConfigError, Diverged, DocattnError, Interrupted

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="Attention-based document classification: train, evaluate, predict and explain.",
    pretty_exceptions_enable=False,
)
data_app = typer.Typer(add_completion=False, help="Standard data sets and corpus statistics.")
app.add_typer(data_app, name="data")


def _console():
    from rich.console import Console

    return Console(stderr=True)


def _check_out(out: Path) -> None:
    """--out is a folder (a run, a benchmark): a file there is an error before any work is done."""
    if out.exists() and not out.is_dir():
        raise DocattnError(f"--out {out} is a file; give a folder to write into")


def _parse_sets(items: List[str]) -> dict:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise DocattnError(f"--set expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip().replace("-", "_")] = _parse_value(v)
    return out


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context):
    """With no command, run the main job: train HAN on the embedded corpus, evaluate, explain."""
    if ctx.invoked_subcommand is None:
        demo()


@app.command()
def demo(  # Annotated options keep real defaults: the bare `docattn` calls demo() as a plain function
    out: Annotated[Path, typer.Option(help="Run directory to write.")] = Path("runs/demo"),
    model: Annotated[str, typer.Option(help="Model to train.")] = "han",
    n_train: Annotated[int, typer.Option(help="Training documents (0: the package default).")] = 0,
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = 6,
    seed: Annotated[int, typer.Option()] = 0,
):
    """The main job, offline: generate the embedded corpus, train, evaluate, write an explanation report."""
    from rich.console import Console

    from docattn.data import synthetic
    from docattn.models import get_spec

    if get_spec(model).layout == "bag":  # refused before training, not after it
        raise DocattnError(f"the demo ends with an attention report, and {model!r} (a bag of words) has no attention or "
                           "pooling weights to show; choose another model (docattn models)")
    from docattn.training.run_folder import RUN_FILES, RunFolderError, RunLock, claim, clear, others

    console = Console()
    written = (*RUN_FILES, "train.jsonl", "test.jsonl", "explanations.json", "report.html")
    clash = [n for n in others(out) if n in written] if out.is_dir() else []
    if clash or (out.exists() and not out.is_dir()):  # the main job replaces its own earlier output, nothing else
        raise RunFolderError(f"{out}: {', '.join(clash) or 'a file'} {'is' if len(clash) <= 1 else 'are'} not docattn's and "
                             "the main job would replace it; move it away or give another --out")
    n_tr = n_train or synthetic.DEFAULT_N_TRAIN
    splits = synthetic.make_splits(n_train=n_tr, n_test=synthetic.DEFAULT_N_TEST, seed=seed)
    with RunLock(out):
        clear(out)
        claim(out, written)
        _demo_into(console, out, model, splits, epochs, seed)


def _demo_into(console, out: Path, model: str, splits: dict, epochs: int, seed: int) -> None:
    from docattn.classifier import DocumentClassifier
    from docattn.data import synthetic
    from docattn.explain.attention import explanations_json
    from docattn.explain.html import write_atomic, write_html
    from docattn.explain.rationale import model_rationales, rationale_scores

    for name, corpus in splits.items():
        synthetic.write_jsonl(corpus, out / f"{name}.jsonl")
    console.print(f"[bold]Embedded corpus[/]: {len(splits['train'])} train / {len(splits['test'])} test documents, "
                  f"{len(splits['train'].classes)} classes -> {out}/train.jsonl, test.jsonl")
    train, test = splits["train"], splits["test"]
    # random init: in the corpus's templates every cue word shares its contexts with its opposite,
    # so word2vec would start "good" and "bad" almost equal
    clf = DocumentClassifier(model, max_epochs=epochs, seed=seed, min_count=2, embeddings="random")
    clf.fit(train.sentences, train.labels, run_dir=out)
    acc = clf.score(test.sentences, test.labels)
    console.print(f"[bold]{model}[/] test accuracy: {acc:.2%} "
                  f"({clf.results.get('train_docs_per_s', 0):.0f} training documents/s)")
    shown = test.subset(range(min(50, len(test))))  # ids as test.jsonl gives them to `docattn explain`
    explanations = clf.explain(shown)
    scores = rationale_scores(explanations, model_rationales(clf.vocab, shown))
    if scores:
        console.print(f"attention vs ground truth on 50 test documents: top sentence correct {scores['top_sentence_accuracy']:.0%}, "
                      f"word AUPRC {scores['word_auprc']:.2f}")
    write_atomic(out / "explanations.json", explanations_json(explanations))
    write_html(explanations[:20], out / "report.html", title=f"docattn {model} on the embedded corpus")
    clf.results["demo_test_accuracy"] = acc
    clf.save(out)
    console.print(f"run directory {out}: config.json, vocab.json, model.safetensors, metrics.csv, explanations.json, "
                  f"and report.html (the attention of {len(explanations[:20])} test documents: open it in a browser)")
    console.print(f"next: docattn predict {out} FILE  |  docattn explain {out} --data {out}/test.jsonl --html report.html  "
                  f"|  docattn evaluate {out} --data {out}/test.jsonl")


@app.command()
def models(pattern: str = typer.Argument("*", help="Glob over model names, e.g. 'han*'.")):
    """List the registered models."""
    from rich.console import Console
    from rich.table import Table

    from docattn.models import get_spec, list_models

    names = list_models(pattern)
    if not names:
        raise DocattnError(f"no registered model matches {pattern!r} (names are lowercase: docattn models)")
    table = Table("model", "layout", "reads by default", "description")
    for name in names:
        spec = get_spec(name)
        cpu = ", ".join(f"{k} {v}" for k, v in spec.cpu.items() if k in _SIZES)
        table.add_row(name, spec.layout, _default_reach(spec.training, spec.layout),
                      spec.description + (f"; on a CPU (recipe auto) trained at {cpu}" if cpu else ""))
    Console().print(table)


_SIZES = ("d_model", "heads", "embedding_dim", "dropout", "embedding_dropout")  # what a CPU default shrinks


def _default_reach(training: dict, layout: str) -> str:
    """What of a document a model reads unless told otherwise: its registered truncation, else the data defaults."""
    from docattn.data.prepare import DataSettings

    base = DataSettings()
    keys = {"hierarchical": ("max_sentences", "max_words"), "flat": ("max_tokens",)}.get(layout, ())
    limits = {key: training.get(key, getattr(base, key)) for key in keys}
    cuts = [f"{limits[key]:,} {what}" for key, what in (("max_sentences", "sentences"),
            ("max_words", "words per sentence"), ("max_tokens", "tokens")) if limits.get(key)]
    return ", ".join(cuts) or "all of it"


@app.command()
def train(
    train: str = typer.Option(..., "--train", help="Training data: a file, folder, archive or registered data set name."),
    out: Path = typer.Option(..., "--out", help="Run directory."),
    model: Optional[str] = typer.Option(None, "--model", help="Model name (default han; with --resume, the run's)."),
    valid: Optional[str] = typer.Option(None, "--valid", help="Validation data (default: a stratified split of train)."),
    test: Optional[str] = typer.Option(None, "--test", help="Test data (default: the source's own test split, if any)."),
    fmt: Optional[str] = typer.Option(None, "--format", help="Reader format (default: detected)."),
    text_col: Optional[str] = typer.Option(None, "--text-col", help="CSV text column(s), comma separated, or the JSONL text field."),
    label_col: Optional[str] = typer.Option(None, "--label-col", help="CSV label column, or the JSONL label field."),
    epochs: Optional[int] = typer.Option(None, "--epochs"),
    batch_size: Optional[int] = typer.Option(None, "--batch-size"),
    lr: Optional[float] = typer.Option(None, "--lr"),
    optimizer: Optional[str] = typer.Option(None, "--optimizer", help="sgd, adam or adamw."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Random seed (default 0; with --resume, the run's)."),
    valid_fraction: Optional[float] = typer.Option(None, "--valid-fraction"),
    test_fraction: Optional[float] = typer.Option(None, "--test-fraction", help="For data without a test split: test on this share of the training documents (stratified, seeded)."),
    recipe: Optional[str] = typer.Option(None, "--recipe", help="auto (default: epochs, early stopping, word2vec passes and class weights sized to the data) or paper (each model's registered settings)."),
    min_count: Optional[int] = typer.Option(None, "--min-count"),
    max_sentences: Optional[int] = typer.Option(None, "--max-sentences"),
    max_words: Optional[int] = typer.Option(None, "--max-words"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens"),
    embeddings: Optional[str] = typer.Option(None, "--embeddings", help="word2vec, random, or a vector file: GloVe .txt, word2vec/fastText .vec, word2vec .bin, each optionally .gz."),
    accelerator: Optional[str] = typer.Option(None, "--accelerator", help="auto, cpu or gpu."),
    devices: Optional[str] = typer.Option(None, "--devices"),
    num_nodes: Optional[int] = typer.Option(None, "--num-nodes"),
    strategy: Optional[str] = typer.Option(None, "--strategy", help="e.g. ddp"),
    precision: Optional[str] = typer.Option(None, "--precision", help="e.g. bf16-mixed, 32-true"),
    val_every: Optional[int] = typer.Option(None, "--val-every", help="Validate every N steps (default: each epoch)."),
    patience: Optional[int] = typer.Option(None, "--patience", help="Early stopping patience (validations)."),
    max_time: Optional[float] = typer.Option(None, "--max-time", help="Training time budget in seconds."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run in --out."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the run in --out: the files docattn wrote there are removed, no other file."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not cache the encoded corpus."),
    sets: List[str] = typer.Option([], "--set", help="Any other option or model hyper-parameter, KEY=VALUE."),
):
    """Train a model and write its run directory (config, vocabulary, best weights, metrics)."""
    from rich.console import Console

    from docattn.classifier import DocumentClassifier
    from docattn.training.run_folder import RUN_FILES, RunLock, check_out, claim, clear, others

    console = Console(stderr=True)
    # DDP's other processes run this command again once rank 0 has started training into --out: only
    # rank 0 checks, locks and replaces the folder
    primary = all(os.environ.get(k, "0") == "0" for k in ("RANK", "LOCAL_RANK", "NODE_RANK"))
    if primary:
        check_out(out, resume=resume, overwrite=overwrite)  # before anything is read or written
    options = {k: v for k, v in {
        "max_epochs": epochs, "batch_size": batch_size, "lr": lr, "optimizer": optimizer, "seed": seed,
        "valid_fraction": valid_fraction, "test_fraction": test_fraction, "recipe": recipe,
        "min_count": min_count, "max_sentences": max_sentences,
        "max_words": max_words, "max_tokens": max_tokens, "embeddings": embeddings, "accelerator": accelerator,
        "devices": _parse_value(devices) if devices else None, "num_nodes": num_nodes, "strategy": strategy,
        "precision": precision, "val_every_n_steps": val_every, "patience": patience, "max_time": max_time,
    }.items() if v is not None}
    options.update(_parse_sets(sets))
    if resume and (out / "config.json").exists():
        model, options = _resume_options(out, model, options)
    elif resume:  # a job script may always pass --resume; a mistyped --out must not pass unnoticed
        console.print(f"note: {out} holds no run to resume (no config.json): starting a new run there")
    clf = DocumentClassifier(model or "han", **options)
    _note_unused_options(console, clf, options)
    if not primary:
        return _train_into(console, clf, out, train, valid, test, fmt, text_col, label_col, no_cache, resume)
    if resume and (out / "config.json").exists():
        _check_resume_point(out, clf)
    with RunLock(out):  # a second training into this folder is refused while this one lives
        if overwrite and not resume:
            removed = clear(out)
            if removed:
                console.print(f"--overwrite: removed {len(removed)} file(s) docattn wrote in {out} ({', '.join(removed[:4])}"
                              + (", ..." if len(removed) > 4 else "") + ")")
        foreign = set(others(out))
        claim(out, [n for n in RUN_FILES if n not in foreign])
        _train_into(console, clf, out, train, valid, test, fmt, text_col, label_col, no_cache, resume)


def _check_resume_point(out: Path, clf) -> None:
    """--resume on a run with nothing to resume from is an error, never a silent new start."""
    from docattn.models import get_spec
    from docattn.training.run import resume_checkpoint

    if get_spec(clf.model_name).layout != "bag" and not resume_checkpoint(out).exists():
        raise DocattnError(f"--resume: {out} has no checkpoint to continue from ({resume_checkpoint(out)} is missing: the "
                           "run stopped before its first epoch ended); train it again with --overwrite")


def _train_into(console, clf, out: Path, train, valid, test, fmt, text_col, label_col, no_cache: bool, resume: bool) -> None:
    """Prepare the data, train ``clf`` into ``out`` and report (the body of ``train``, run under the folder's lock)."""
    from docattn.data.prepare import prepare_paths

    data = prepare_paths(_resolve(train), valid and _resolve(valid), test and _resolve(test), clf.data_settings,
                         _reader_options(fmt, text_col, label_col), use_cache=not no_cache)
    info = data.info
    console.print(f"data: {info.get('documents')} documents, vocabulary {len(data.vocab)}, {len(data.labels)} classes "
                  f"(cache: {info.get('cache', 'off')})")
    _print_skipped(console, info)
    if info.get("cache_error"):
        console.print(f"note: the encoded corpus is not cached ({info['cache_error']}; $DOCATTN_CACHE picks another folder)")
    clf.fit_prepared(data, run_dir=out, resume=resume)
    if not clf.results.get("is_global_zero", True):
        return
    _print_recipe(console, clf.results)
    truncated = clf.results.get("truncated")
    if truncated:
        limits = ", ".join(f"{k} {v:,}" for k, v in truncated["limits"].items())
        counts = ", ".join(f"{k} {truncated[k]:,}" for k in ("train", "valid", "test") if truncated.get(k))
        console.print(f"documents read only in part ({limits}): {counts}; --set max_sentences=0 (or the limit named) reads "
                      "them whole, at the cost of memory")
    coverage = clf.results.get("coverage")
    if coverage:  # vectors from a file: how much of the vocabulary they cover (cased vectors, lowercased text...)
        console.print(f"embeddings: {coverage['words']:,} words of the vocabulary found in {clf.train_config.embeddings} "
                      f"({coverage['vocab_share']:.1%} of it, {coverage['token_share']:.1%} of training tokens); "
                      "the rest start random")
    diverged = clf.results.get("diverged_at")
    if diverged:
        console.print(f"[bold red]training diverged[/]: loss {diverged['loss']} and NaN/infinite weights by step {diverged['step']} "
                      f"(epoch {diverged['epoch'] + 1}); stopped there and kept the best weights from before it. "
                      f"A lower learning rate (now {clf.train_config.lr:g}) should train further")
    elif clf.results.get("stopped_early"):
        console.print(f"stopped early, after {clf.train_config.patience} validation(s) without improvement (--patience), "
                      f"keeping the best weights")
    elif clf.results.get("stopped_on_budget"):
        console.print(f"stopped on the time budget (--max-time {clf.train_config.max_time:g} s)")
    best = clf.results.get("best", {})
    if best:
        speed = clf.results.get("train_docs_per_s", 0)
        console.print(f"best validation: accuracy {best.get('val_acc', float('nan')):.4f}, epoch {best.get('epoch')}; "
                      + (f"training {speed:.0f} documents/s" if speed else
                         f"no epoch left to train (the run had reached --epochs {clf.train_config.max_epochs})"))
    elif "valid" in clf.results:  # one-shot baselines (nb, logreg, fasttext-lib): no epochs to choose from
        console.print(f"validation: accuracy {clf.results['valid']['accuracy']:.4f}; "
                      f"trained in {clf.results.get('train_seconds', 0):.1f} s")
    if "test" in data.splits and "test" not in clf.results:
        console.print("note: the test documents have no labels (all or some), so they were not evaluated; "
                      "docattn predict labels them")
    if "test" in clf.results:
        t = clf.results["test"]
        console.print(f"test: accuracy {t['accuracy']:.4f}, macro-F1 {t['macro_f1']:.4f} ({t['documents']} documents)")
    _print_guardrail(console, clf.results)
    console.print(f"run directory: {out}")


def _print_recipe(console, results: dict) -> None:
    recipe = results.get("recipe") or {}
    if recipe.get("recipe") != "auto":
        return
    weights = recipe.get("class_weights")
    console.print(f"recipe auto: up to {recipe['max_epochs']} epoch(s)"
                  + (f", early stopping after {recipe['patience']} validations without improvement" if recipe.get("patience") else "")
                  + f", best by {recipe['monitor']}, word2vec {recipe['word2vec_epochs']} passes"
                  + (f", class weights {', '.join(f'{c} {w:g}' for c, w in weights.items())}" if weights else ""))


def _print_guardrail(console, results: dict) -> None:
    """The model's validation scores beside the tf-idf baseline's, and a warning when it is behind."""
    from docattn.training.trainer import GUARDRAIL_ADVICE, guardrail_verdict

    verdict = guardrail_verdict(results)
    if verdict is None:
        return
    m, b = verdict["model"], verdict["baseline"]
    sample = f", on a sample of {results['baseline']['documents']:,} training documents" if results["baseline"].get("sampled") else ""
    console.print(f"validation: this model accuracy {m['accuracy']:.4f}, macro-F1 {m['macro_f1']:.4f}; tf-idf logreg "
                  f"baseline accuracy {b['accuracy']:.4f}, macro-F1 {b['macro_f1']:.4f}{sample}")
    if verdict["behind"]:
        console.print(f"[bold yellow]warning[/]: {GUARDRAIL_ADVICE}")
    test = results["baseline"].get("test")
    if test and "test" in results:
        console.print(f"test: baseline accuracy {test['accuracy']:.4f}, macro-F1 {test['macro_f1']:.4f}")


def _note_unused_options(console, clf, options: dict) -> None:
    """Options the model never reads are said, not dropped: truncation its layout does not have (words per
    sentence for a flat model...), and the training engine's options for models fitted in one call (nb, logreg)."""
    from docattn.models import get_spec

    unused, reads = {"hierarchical": (("max_tokens",), "sentences of words"),
                     "flat": (("max_sentences", "max_words"), "one sequence of tokens"),
                     "bag": (("max_sentences", "max_words", "max_tokens"), "bags of words")}[get_spec(clf.model_name).layout]
    for key in unused:
        if options.get(key):
            console.print(f"note: --{key.replace('_', '-')} has no effect on {clf.model_name!r}, which reads documents as {reads}")
    if get_spec(clf.model_name).layout != "bag":
        return
    from docattn.models import create_model
    from docattn.training.config import TrainConfig

    model = create_model(clf.model_name, vocab_size=4, num_classes=2, **clf.hparams)  # a bag model is tiny to build
    if hasattr(model, "fit_encoded"):  # fitted in one call (scikit-learn, the fastText library), not by the training engine
        engine = TrainConfig.field_names() - {"seed", "progress", "progress_lines"}
        ignored = sorted(k for k in options if k in engine)
        if ignored:
            own = ", ".join(f"{k}={v}" for k, v in model.hparams().items()) or "none"
            console.print(f"note: {', '.join(ignored)} {'has' if len(ignored) == 1 else 'have'} no effect on "
                          f"{clf.model_name!r}, which is fitted in one call, not by the training engine; its own options "
                          f"(--set KEY=VALUE): {own}")


def _print_skipped(console, info: dict) -> None:
    """Say what the readers dropped or re-decoded, so it is never silent."""
    skipped = info.get("skipped") or {}
    empty = sum(int(v.get("skipped_empty", 0)) for v in skipped.values())
    decoded = sum(int(v.get("decode_errors", 0)) for v in skipped.values())
    if empty:
        console.print(f"skipped empty documents: {empty}")
    if decoded:
        console.print(f"documents that were not UTF-8, read as Latin-1 (or with U+FFFD, as errors= says): {decoded}")
    cut = [v for v in skipped.values() if v.get("cut_documents")]
    if cut:
        console.print(f"documents cut at the length limit: {sum(int(v['cut_documents']) for v in cut)} "
                      f"(first: {cut[0]['first_cut_document']}); set DOCATTN_MAX_DOCUMENT_CHARS to keep more of them")
    spans = [v for v in skipped.values() if v.get("quoted_tab_breaks")]
    if spans:
        console.print(f"TSV records whose quoted text holds a line break and a tab: "
                      f"{sum(int(v['quoted_tab_breaks']) for v in spans)} (first: {spans[0]['first_quoted_tab_break']}); "
                      "each was read as one field, as CSV quoting says. If a quote there was meant as a plain "
                      'character, the records up to its partner were merged: double it ("") or quote the field')
    links = max((int(v.get("skipped_links", 0)) for v in skipped.values()), default=0)
    if links:
        console.print(f"links in the archive not read: {links}, each pointing outside it or to a folder it sits in "
                      "(archive the files themselves, e.g. tar --dereference)")


# options that change where and how a run is shown or spread, never what it learns
_RUN_ONLY = {"accelerator", "devices", "num_nodes", "strategy", "loader_workers", "progress", "progress_lines"}
# options --resume may change besides: how long and how fast to go on
_RESUME_FREE = _RUN_ONLY | {"max_epochs", "max_time", "patience", "precision", "val_every_n_steps", "val_per_epoch"}


def _resume_options(out: Path, model: Optional[str], options: dict) -> tuple[str, dict]:
    """The interrupted run's model and settings, with the options given now on top; an option that
    would change the model or its data (the checkpoint could not be loaded into it) is an error."""
    from docattn.data.prepare import DataSettings
    from docattn.training.config import TrainConfig
    from docattn.training.run import read_config, settings_as_options

    config = read_config(out)
    try:
        saved_model = config["model"]
        # from_json fills what older runs did not record
        saved = settings_as_options(DataSettings.from_json(config["data"]), TrainConfig.from_json(config["training"]),
                                    dict(config["hparams"]))
    except (KeyError, TypeError, AttributeError, ValueError, DocattnError) as err:
        raise DocattnError(f"{out / 'config.json'}: cannot resume, malformed field {err}") from None
    if model is not None and model != saved_model:
        raise DocattnError(f"{out} is a {saved_model!r} run: --resume cannot continue it as {model!r}")
    changed = sorted(k for k, v in options.items() if k not in _RESUME_FREE and k in saved and _differs(saved[k], v))
    unknown = sorted(k for k in options if k not in saved and k not in _RESUME_FREE)
    if changed or unknown:
        what = ", ".join([f"{k} (run: {saved[k]!r}, now: {options[k]!r})" for k in changed] + [f"{k} (not set in the run)" for k in unknown])
        raise DocattnError(f"--resume continues {out} with its own settings; these differ: {what}. "
                           f"Start a new run (another --out) to change them")
    return saved_model, {**saved, **options}


def _differs(a, b) -> bool:
    return (list(a) if isinstance(a, (list, tuple)) else a) != (list(b) if isinstance(b, (list, tuple)) else b)


@app.command()
def evaluate(
    run: Path = typer.Argument(..., help="Run directory."),
    data: str = typer.Option(..., "--data", help="Labelled data (file, folder, archive or data set name)."),
    split: Optional[str] = typer.Option(None, "--split", help="train, valid or test (default: test if present)."),
    fmt: Optional[str] = typer.Option(None, "--format"),
    text_col: Optional[str] = typer.Option(None, "--text-col"),
    label_col: Optional[str] = typer.Option(None, "--label-col"),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
):
    """Accuracy, macro-F1, per-class precision/recall/F1 and the confusion matrix."""
    from docattn.classifier import DocumentClassifier
    from docattn.training.membership import seen_before
    from docattn.training.trainer import evaluate_encoded

    clf = DocumentClassifier.load(run)
    corpus = _read_eval_corpus(data, split, fmt, text_col, label_col)
    if corpus.labels is None:
        raise DocattnError(f"{data}: documents have no labels to evaluate against")
    enc = clf.encode(corpus)
    report = evaluate_encoded(clf, enc)
    report["baseline"] = _baseline_report(run, clf, enc)
    report["seen_in_training"] = seen = seen_before(run, enc)
    leaked = {k: v for k, v in (seen or {}).items() if v}
    warning = ("warning: " + " and ".join(f"{n:,} of these {len(enc):,} documents are in the run's "
                                         f"{'training' if k == 'train' else 'validation'} split" for k, n in leaked.items())
               + ": the scores overstate how the model does on new documents") if leaked else None
    if as_json:
        if warning:
            typer.echo(warning, err=True)
        typer.echo(json.dumps(report, indent=1, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if warning:
        Console(stderr=True).print(f"[bold yellow]{warning}[/]")
    console.print(f"{report['documents']} documents: accuracy [bold]{report['accuracy']:.4f}[/], macro-F1 {report['macro_f1']:.4f}")
    if report["baseline"]:
        b = report["baseline"]
        console.print(f"tf-idf logreg baseline fitted with the run: accuracy {b['accuracy']:.4f}, macro-F1 {b['macro_f1']:.4f}")
    table = Table("class", "precision", "recall", "F1", "support")
    for row in report["per_class"]:
        table.add_row(str(row["class"]), f"{row['precision']:.3f}", f"{row['recall']:.3f}", f"{row['f1']:.3f}", str(row["support"]))
    console.print(table)
    cm = Table("gold \\ predicted", *[str(c) for c in clf.labels.classes])
    for c, row in zip(clf.labels.classes, report["confusion_matrix"]):
        cm.add_row(str(c), *map(str, row))
    console.print(cm)


def _baseline_report(run: Path, clf, enc) -> dict | None:
    """The guardrail baseline saved with a neural run, scored on the same documents (None where there is none)."""
    import numpy as np

    from docattn.models import create_model
    from docattn.training.metrics import classification_report
    from docattn.training.trainer import Guardrail

    folder = Path(run) / Guardrail.FOLDER
    if not folder.is_dir():
        return None
    model = create_model("logreg", vocab_size=len(clf.vocab), num_classes=len(clf.labels)).load_artifacts(folder)
    report = classification_report(np.asarray(enc.labels), model.predict_proba_encoded(enc).argmax(1), clf.labels.classes)
    return {"model": "logreg", **{k: report[k] for k in ("documents", "accuracy", "macro_f1")}}


@app.command()
def predict(
    run: Path = typer.Argument(..., help="Run directory."),
    data: str = typer.Argument("-", help="Documents: any supported file, plain text (one per line), or - for stdin."),
    split: Optional[str] = typer.Option(None, "--split", help="For sources with splits (default: test)."),
    fmt: Optional[str] = typer.Option(None, "--format"),
    text_col: Optional[str] = typer.Option(None, "--text-col"),
    label_col: Optional[str] = typer.Option(None, "--label-col"),
):
    """Write one JSON line per document: its id, the predicted class and the class probabilities.

    The key is "prediction", as in explain's output, where "label" is the gold label the input gave.
    """
    from docattn.classifier import DocumentClassifier
    from docattn.data.readers import read_corpus

    clf = DocumentClassifier.load(run)
    if data == "-":
        opts = _reader_options(fmt, text_col, label_col)  # the reader tells JSON lines and fastText from plain text
        corpus = read_corpus("-", **opts, ignore_labels=True)
    else:  # a source with splits is predicted on its test split
        corpus = _read_eval_corpus(data, split, fmt, text_col, label_col, ignore_labels=True)
    skipped = corpus.stats.get("skipped_empty", 0)
    if skipped:  # output lines are joined to the input by id, not by position
        typer.echo(f"note: {skipped} empty document(s) skipped, no prediction written for them", err=True)
    cut = corpus.stats.get("cut_documents", 0)
    if cut:
        typer.echo(f"note: {cut} document(s) cut at the length limit (first: {corpus.stats['first_cut_document']}); "
                   "set DOCATTN_MAX_DOCUMENT_CHARS to keep more of them", err=True)
    probs = clf.predict_proba(corpus)
    classes = clf.labels.classes
    out = sys.stdout
    for i, p in enumerate(probs):
        out.write(json.dumps({"id": corpus.ids[i], "prediction": classes[int(p.argmax())],
                              "probabilities": {str(c): round(float(x), 6) for c, x in zip(classes, p)}}, ensure_ascii=False) + "\n")


@app.command()
def explain(
    run: Path = typer.Argument(..., help="Run directory."),
    data: str = typer.Option(..., "--data", help="Documents (any supported format, or plain text one per line)."),
    n: int = typer.Option(20, "--n", help="Number of documents."),
    html: Path = typer.Option(Path("report.html"), "--html", help="Self-contained HTML report."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write every weight as JSON."),
    split: Optional[str] = typer.Option(None, "--split"),
    fmt: Optional[str] = typer.Option(None, "--format"),
    text_col: Optional[str] = typer.Option(None, "--text-col", help="CSV text column(s), or the JSONL text field."),
    label_col: Optional[str] = typer.Option(None, "--label-col", help="CSV label column, or the JSONL label field."),
):
    """Attention heatmaps: sentence bars and word shading (HAN's sqrt(p_sentence) * p_word rule)."""
    from docattn.classifier import DocumentClassifier
    from docattn.explain.html import write_html

    if n < 1:
        raise DocattnError(f"--n is the number of documents to explain, at least 1; got {n}")
    for flag, path, example in (("--html", html, "report.html"), ("--json", json_out, "weights.json")):
        if path is not None and path.is_dir():
            raise DocattnError(f"{flag} {path} is a folder; give a file name, e.g. {path / example}")
    clf = DocumentClassifier.load(run)
    corpus = _read_eval_corpus(data, split, fmt, text_col, label_col)
    corpus = corpus.subset(range(min(n, len(corpus))))
    from docattn.explain.html import add_attention_views

    items = add_attention_views(clf.explain(corpus), clf, corpus)  # per-head (HCAN) and per-query (CSPAN) views
    from docattn.training.run_folder import claim_in_run

    write_html(items, html, title=f"docattn {clf.model_name}: {Path(data).name}")
    claim_in_run(html)
    if json_out:
        from docattn.explain.attention import explanations_json
        from docattn.explain.html import write_atomic

        write_atomic(json_out, explanations_json(items))
        claim_in_run(json_out)
    _console().print(f"wrote {html}" + (f" and {json_out}" if json_out else ""))


@app.command()
def tune(
    train: str = typer.Option(..., "--train"),
    out: Path = typer.Option(..., "--out", help="Folder for one run per trial and tune.json."),
    model: str = typer.Option("han", "--model"),
    lr: Optional[str] = typer.Option(None, "--lr", help="Comma-separated learning rates to try (default: the HAN "
                                     "paper's 0.5,0.1,0.05,0.01 under SGD, the model's rate x 1/4..2 under Adam)."),
    valid: Optional[str] = typer.Option(None, "--valid"),
    epochs: Optional[int] = typer.Option(None, "--epochs"),
    seed: int = typer.Option(0, "--seed"),
    fmt: Optional[str] = typer.Option(None, "--format", help="Reader format (default: detected)."),
    text_col: Optional[str] = typer.Option(None, "--text-col", help="CSV text column(s), comma separated, or the JSONL text field."),
    label_col: Optional[str] = typer.Option(None, "--label-col", help="CSV label column, or the JSONL label field."),
    sets: List[str] = typer.Option([], "--set"),
    resume: bool = typer.Option(False, "--resume", help="Go on with an interrupted search: keep the trials "
                                "tune.json records and continue the interrupted one from its last finished epoch."),
):
    """Learning-rate grid search on the validation split (as the HAN paper does); reports each trial."""
    from rich.console import Console
    from rich.table import Table

    from docattn.classifier import DocumentClassifier
    from docattn.data.prepare import prepare_paths
    from docattn.data.text import write_json_atomic

    from docattn.models import get_spec

    console = Console()
    _check_out(out)
    try:
        rates = [float(x) for x in (lr or "").split(",") if x.strip()]
    except ValueError:
        raise DocattnError(f"--lr expects comma-separated numbers, got {lr!r}") from None
    if (lr is not None and not rates) or any(not 0 < r < float("inf") for r in rates):  # nan fails both
        raise DocattnError(f"--lr needs at least one learning rate, each a number above 0, got {lr!r}")
    if len({f"{r:g}" for r in rates}) < len(rates):  # the same rate twice would train into one lr=... folder twice
        raise DocattnError(f"--lr lists a learning rate more than once (as its run folder names it): {lr}")
    if get_spec(model).layout == "bag":
        raise DocattnError(f"{model} is not trained by gradient descent: there is no learning rate to tune "
                           "(compare its settings with docattn benchmark --set KEY=VALUE)")
    options = {"seed": seed, **({"max_epochs": epochs} if epochs else {}), **_parse_sets(sets)}
    base = DocumentClassifier(model, **options)
    rates = rates or base.train_config.lr_grid()  # the grid that suits the optimizer that will run
    console.print(f"{model}, {base.train_config.optimizer}: learning rates {', '.join(f'{r:g}' for r in rates)}")
    data = prepare_paths(_resolve(train), valid and _resolve(valid), None, base.data_settings,
                         _reader_options(fmt, text_col, label_col))
    data.splits.pop("test", None)
    # what makes trials comparable: the model, the data's content and the options that change training
    search = {"model": model, "data": data.info["inputs"],
              "options": json.loads(json.dumps({k: v for k, v in options.items() if k not in _RUN_ONLY}, default=str))}
    kept = _tune_trials_kept(out, search) if resume else {}
    trials = []

    def record(**extra) -> None:  # before and after every trial, so an interrupted search keeps what it found
        out.mkdir(parents=True, exist_ok=True)
        listed = {f"{t['lr']:g}" for t in trials}  # kept trials not reached yet stay recorded too
        write_json_atomic(out / "tune.json", {**search, "trials": trials + [t for r, t in kept.items() if r not in listed],
                                              **extra})

    record(complete=False)
    for rate in rates:
        if f"{rate:g}" in kept:
            trials.append(kept[f"{rate:g}"])
            console.print(f"lr {rate:g}: kept from tune.json")
            continue
        clf = DocumentClassifier(model, **{**options, "lr": rate})
        try:
            clf.fit_prepared(data, run_dir=out / f"lr={rate:g}", resume=resume and _unfinished(out / f"lr={rate:g}", clf, data))
        except Diverged as err:  # too high a rate is a finding of the search, not the end of it
            trials.append({"lr": rate, "diverged": str(err), "run": str(out / f"lr={rate:g}")})
            console.print(f"lr {rate:g}: diverged before its first validation")
            record(complete=False)
            continue
        except Interrupted as err:
            record(complete=False)
            raise Interrupted(f"lr {rate:g}: {err.where}; tune.json keeps the {len(trials)} trial(s) finished before it. "
                              "Go on with the same command and --resume", err.signal, err.where) from None
        best = clf.results.get("best", {})
        trials.append({"lr": rate, **best, "run": str(out / f"lr={rate:g}")})
        console.print(f"lr {rate:g}: validation accuracy {best.get('val_acc', float('nan')):.4f}")
        record(complete=False)
    if not any("val_acc" in t for t in trials):
        raise DocattnError(f"every learning rate tried diverged or kept no validation ({', '.join(f'{r:g}' for r in rates)}); "
                           "try lower ones with --lr")
    best_trial = max(trials, key=lambda t: t.get("val_acc", -1))
    record(complete=True, best=best_trial)
    table = Table("lr", "val_acc", "val_macro_f1", "best epoch")
    for t in trials:
        if t.get("diverged"):
            table.add_row(f"{t['lr']:g}", "-", "-", "diverged")
            continue
        table.add_row(f"{t['lr']:g}", f"{t.get('val_acc', float('nan')):.4f}", f"{t.get('val_macro_f1', float('nan')):.4f}", str(t.get("epoch")))
    console.print(table)
    console.print(f"best lr: {best_trial['lr']:g} (run {best_trial['run']})")


def _unfinished(run_dir: Path, clf, data) -> bool:
    """Whether a tune trial's resume checkpoint has epochs left; one that trained them all was cut
    short while it was tested or saved, and trains again rather than keep half-written results."""
    from docattn.training.engine import check_resumable
    from docattn.training.recipe import planned_epochs
    from docattn.training.run import resume_checkpoint

    checkpoint = resume_checkpoint(run_dir)
    if not checkpoint.exists():
        return False
    try:  # a checkpoint that cannot be read safely is refused (CheckpointError), never trained over
        check_resumable(checkpoint, planned_epochs(clf.train_config, len(data.splits["train"])))
    except ConfigError:
        return False
    return True


def _tune_trials_kept(out: Path, search: dict) -> dict:
    """The finished trials of an earlier search into ``out`` by rate ("0.001"), for ``tune --resume``;
    refused when it searched another model, data or options, whose trials would not compare."""
    path = out / "tune.json"
    if not path.exists():
        return {}
    try:
        prior = json.loads(path.read_text(encoding="utf-8"))
        trials = {f"{float(t['lr']):g}": t for t in prior["trials"]}
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DocattnError(f"--resume: {path} is unreadable ({err}); remove it to search again") from None
    differs = [k for k in search if prior.get(k) != search[k]]
    if differs:
        raise DocattnError(f"--resume: {path} searched with other settings ({', '.join(differs)}: "
                           f"{', '.join(repr(prior.get(k)) for k in differs)}); give the same ones, or another --out")
    return trials


@app.command()
def benchmark(
    data: str = typer.Option(..., "--data", help="Registered data set name or any supported path (e.g. aclImdb.tar.gz)."),
    models: str = typer.Option("han,hpan,hsan,nb,logreg", "--models", help="Comma-separated model names."),
    seeds: Optional[int] = typer.Option(None, "--seeds", help="Seeds per model (first-seed .. first-seed+N-1); default 3, or 1 with --cv (each fold is a trial)."),
    first_seed: int = typer.Option(0, "--first-seed", help="The first seed."),
    out: Path = typer.Option(Path("benchmark"), "--out"),
    runs: Optional[Path] = typer.Option(None, "--runs", help="Keep every trial's run directory here, as MODEL-seedN."),
    valid_fraction: float = typer.Option(0.3, "--valid-fraction", help="Validation share of train (HPAN paper: 0.3)."),
    max_epochs: Optional[int] = typer.Option(None, "--max-epochs", help="Epoch budget per model (default: each model's own)."),
    max_time: Optional[float] = typer.Option(None, "--max-time", help="Training time budget per model run, seconds."),
    test: Optional[str] = typer.Option(None, "--test", help="Test data, when --data has no test split of its own."),
    test_fraction: Optional[float] = typer.Option(None, "--test-fraction", help="For data without a test split: test on this share of it, stratified (default 0.2 there)."),
    cv: Optional[int] = typer.Option(None, "--cv", help="Stratified K-fold cross-validation: each model trains K times, tested on each fold in turn."),
    fmt: Optional[str] = typer.Option(None, "--format", help="Reader format (default: detected)."),
    text_col: Optional[str] = typer.Option(None, "--text-col", help="CSV text column(s), comma separated, or the JSONL text field."),
    label_col: Optional[str] = typer.Option(None, "--label-col", help="CSV label column, or the JSONL label field."),
    sets: List[str] = typer.Option([], "--set", help="Options for every model, KEY=VALUE; MODEL:KEY=VALUE for one model."),
    jobs: int = typer.Option(1, "--jobs", help="Trials at a time, in worker processes sharing the CPU cores (2 on a 2-core CPU: more done per hour)."),
):
    """Train and test several models on the same splits; accuracy, cost, a table and a curve plot."""
    from rich.console import Console

    from docattn.benchmark import PathData, run_benchmark

    console = Console()
    _check_out(out)
    common, per_model = {}, {}
    for k, v in _parse_sets(sets).items():
        if ":" in k:
            m, key = k.split(":", 1)
            per_model.setdefault(m.replace("_", "-"), {})[key] = v
        else:
            common[k] = v
    if max_epochs:
        common["max_epochs"] = max_epochs
    if max_time:
        common["max_time"] = max_time
    common["valid_fraction"] = valid_fraction
    if cv is not None and (cv < 2 or test_fraction is not None or test):
        raise DocattnError("--cv K needs K >= 2, and chooses the test documents itself: drop --test and --test-fraction"
                           if cv >= 2 else f"--cv must be at least 2, got {cv}")
    if test_fraction is not None:
        common["test_fraction"] = test_fraction
    names = [m.strip() for m in models.split(",") if m.strip()]
    if not names:
        raise DocattnError(f"--models names no model ({models!r})")
    if seeds is None:
        seeds = 1 if cv else 3
    if seeds < 1:
        raise DocattnError(f"--seeds must be >= 1, got {seeds}")
    from docattn.training.config import MAX_SEED  # light: no torch

    if not 0 <= first_seed <= first_seed + seeds - 1 <= MAX_SEED:  # TrainConfig's range, before the first trial
        raise DocattnError(f"--first-seed and --seeds give seeds {first_seed} to {first_seed + seeds - 1}; "
                           f"seeds must be from 0 to {MAX_SEED}")
    unused = sorted(set(per_model) - set(names))
    if unused:
        raise DocattnError(f"--set names {', '.join(unused)}, not in --models ({', '.join(names)})")
    owned = {"seed": "--first-seed and --seeds", "progress": "the benchmark (one line per validation)",
             "progress_lines": "the benchmark (one line per validation)"}
    for opts in (common, *per_model.values()):
        for key in sorted(set(opts) & set(owned)):
            raise DocattnError(f"--set {key} is set by {owned[key]}, not by --set")
    from docattn.classifier import DocumentClassifier

    # unknown models or options fail before anything trains
    built = [DocumentClassifier(name, **{**common, **per_model.get(name, {})}) for name in names]
    if jobs < 1:
        raise DocattnError(f"--jobs must be >= 1, got {jobs}")
    # each model's own data settings (e.g. HCAN's text cleaning), one cached preparation per distinct one
    prepare_for = PathData(_resolve(data), test and _resolve(test), _reader_options(fmt, text_col, label_col), name=data)
    if cv is None and test_fraction is None and not test and not prepare_for.has_test_split():
        common["test_fraction"] = 0.2
        built = [DocumentClassifier(name, **{**common, **per_model.get(name, {})}) for name in names]
        console.print(f"note: {data} has no test split: 20% of it, stratified, is held out for testing "
                      "(--test-fraction F or --cv K to choose)")
    first = built[0].data_settings
    if cv is not None:
        first = DocumentClassifier(names[0], **{**common, **per_model.get(names[0], {}), "cv_folds": cv}).data_settings
    prepare_for(first)  # data errors (no test split...) before the first trial
    seed_list = list(range(first_seed, first_seed + seeds))
    title = f"{Path(data).name}" + (f", {cv}-fold cross-validation" if cv else "")
    rows = run_benchmark(names, prepare_for, seed_list, out, common, title, per_model, log=console.print,
                         runs=runs, jobs=jobs, folds=cv)
    console.print((out / "results.md").read_text())
    console.print(f"wrote {out}/results.json, results.md, curves.png ({len(rows)} models)")


@data_app.command("list")
def data_list():
    """The registered standard data sets."""
    from rich.console import Console
    from rich.table import Table

    from docattn.data.registry import DATASETS

    table = Table("name", "classes", "train", "test", "layout", "description")
    for name, info in DATASETS.items():
        table.add_row(name, str(info.num_classes), str(info.train or "?"), str(info.test or "?"), info.layout, info.description)
    Console().print(table)


@data_app.command("download")
def data_download(
    name: str = typer.Argument(...),
    url: Optional[str] = typer.Option(None, "--url", help="Mirror URL or local archive path instead of the registry's address."),
):
    """Download, verify and extract a registered data set into the cache folder."""
    from docattn.data.registry import download

    path = download(name, url=url)
    typer.echo(str(path))


@data_app.command("stats")
def data_stats(
    data: str = typer.Argument(..., help="A file, folder, archive or registered data set name."),
    fmt: Optional[str] = typer.Option(None, "--format"),
    text_col: Optional[str] = typer.Option(None, "--text-col"),
    label_col: Optional[str] = typer.Option(None, "--label-col"),
    as_json: bool = typer.Option(False, "--json"),
):
    """The papers' Table 1 columns per split, and the class distribution."""
    from rich.console import Console
    from rich.table import Table

    from docattn.data.readers import read_splits
    from docattn.data.stats import corpus_stats

    splits = read_splits(_resolve(data), **_reader_options(fmt, text_col, label_col))
    stats = {name: corpus_stats(c) for name, c in splits.items()}
    if as_json:
        typer.echo(json.dumps(stats, indent=1, default=str))
        return
    console = Console()
    table = Table("split", "classes", "documents", "avg #s", "max #s", "avg #w", "max #w", "vocabulary")
    for name, s in stats.items():
        table.add_row(name, str(s["classes"]), f"{s['documents']:,}", f"{s['avg_sentences']:.1f}", str(s["max_sentences"]),
                      f"{s['avg_words']:.1f}", str(s["max_words"]), f"{s['vocabulary']:,}")
    console.print(table)
    for name, s in stats.items():
        dist = ", ".join(f"{k}: {v:,}" for k, v in s["class_counts"].items())
        console.print(f"[bold]{name}[/] classes: {dist or 'none (unlabelled documents)'}")
    _print_skipped(console, {"skipped": {name: c.stats for name, c in splits.items() if c.stats}})


from docattn.explain import commands as _explain_commands  # noqa: E402  (light: typer only)

_explain_commands.register(app)


def _strict_option_suggestions() -> None:
    """Click suggests any option within difflib's 0.6 similarity ("--bogus": "--out"); suggest only names
    that are near misspellings of the one typed. Typer from 0.29 raises its own copy of click's error."""
    from difflib import get_close_matches

    import click

    classes = [click.exceptions.NoSuchOption]
    try:
        from typer._click.exceptions import NoSuchOption as TyperNoSuchOption

        classes.append(TyperNoSuchOption)
    except ImportError:
        pass
    for cls in classes:
        original = cls.__init__

        def init(self, option_name, message=None, possibilities=None, ctx=None, _original=original):
            _original(self, option_name, message, possibilities, ctx)
            near = get_close_matches(option_name, list(self.possibilities or []), n=3, cutoff=0.8)
            self.possibilities = near or None

        cls.__init__ = init


def main() -> None:
    """Entry point: user errors print one line (exit 2), never a traceback."""
    _strict_option_suggestions()
    if not sys.stdout.isatty():  # piped or logged: Rich would cut its tables at 80 columns ("negat…")
        os.environ.setdefault("COLUMNS", "200")
    try:
        app(standalone_mode=True)
    except Interrupted as err:  # the shell's convention: 128 + the signal's number
        typer.echo(f"interrupted: {err}", err=True)
        sys.exit(128 + err.signal)
    except DocattnError as err:
        # plain text, never wrapped: a path or line number in the message must stay whole
        typer.echo(f"error: {err}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
