"""``docattn evaluate`` (scores against gold labels) and ``docattn predict`` (JSON lines of predictions)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from docattn.cli.app import app
from docattn.cli.options import Reader, reads_documents
from docattn.errors import DocattnError

RUN_HELP = "Run directory (what train --out wrote)."


CHUNK_HELP = "Documents read and scored at a time: memory grows with it, not with the input."


@app.command()
@reads_documents()
def evaluate(
    run: Path = typer.Argument(..., help=RUN_HELP),
    data: str = typer.Option(..., "--data", help="Labelled data: a file, folder, archive or registered data set name."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    chunk_size: int = typer.Option(4096, "--chunk-size", min=1, help=CHUNK_HELP),
    reader: Reader = Reader(),
):
    """Accuracy, macro-F1, per-class precision/recall/F1 and the confusion matrix (multi-label: micro- and
    macro-F1, precision, recall, subset accuracy, Hamming loss and the per-class table)."""
    from docattn.classifier import DocumentClassifier

    clf = DocumentClassifier.load(run)
    report = _streamed_report(run, clf, data, reader, chunk_size)
    seen = report["seen_in_training"]
    leaked = {k: v for k, v in (seen or {}).items() if v}
    warning = (
        (
            "warning: "
            + " and ".join(
                f"{n:,} of these {report['documents']:,} documents are in the run's "
                f"{'training' if k == 'train' else 'validation'} split"
                for k, n in leaked.items()
            )
            + ": the scores overstate how the model does on new documents"
        )
        if leaked
        else None
    )
    if as_json:
        if warning:
            typer.echo(warning, err=True)
        typer.echo(json.dumps(report, indent=1, default=str))
        return
    _print_report(report, clf.labels.classes, warning)


def _streamed_report(run: Path, clf, data: str, reader: Reader, chunk_size: int) -> dict:
    """The report of ``data`` read and scored chunk by chunk: only gold labels and probabilities (numbers per
    document) are kept to the end, never the texts."""
    import time

    import numpy as np

    from docattn.data.readers.stream import iter_chunks
    from docattn.data.sources import resolve_source
    from docattn.training.inference import probabilities
    from docattn.training.membership import seen_before
    from docattn.training.trainer import score_probabilities

    baseline, labels = _baseline_model(run, clf)
    gold, probs, baseline_probs, seen, seconds = [], [], [], None, 0.0
    split = reader.split or ("test", "all")  # never a training split unasked
    with iter_chunks(resolve_source(data), chunk_size, split, **reader.options) as chunks:
        for corpus in chunks:
            if corpus.labels is None:
                raise DocattnError(f"{data}: documents have no labels to evaluate against")
            enc = clf.encode(corpus)
            t0 = time.perf_counter()
            probs.append(probabilities(clf.model, enc, 256, clf.limits, clf.labels.multi_label))
            seconds += time.perf_counter() - t0
            gold.append(enc.labels)
            if baseline is not None:
                baseline_probs.append(baseline.predict_proba_encoded(enc))
            counts = seen_before(run, enc)
            if counts is not None:
                seen = {k: (seen or {}).get(k, 0) + v for k, v in counts.items()}
    gold_all, probs_all = np.concatenate(gold), np.concatenate(probs)
    report = score_probabilities(clf.labels, gold_all, probs_all)
    report["inference_docs_per_s"] = len(probs_all) / max(seconds, 1e-9)
    report["baseline"] = None
    if baseline is not None:
        scored = score_probabilities(labels, gold_all, np.concatenate(baseline_probs))
        keys = ("documents", "accuracy", "macro_f1", "micro_f1")
        report["baseline"] = {"model": "logreg", **{k: scored[k] for k in keys if k in scored}}
    report["seen_in_training"] = seen
    return report


def _print_report(report: dict, classes, warning: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if warning:
        Console(stderr=True).print(f"[bold yellow]{warning}[/]")
    if report.get("multi_label"):
        _print_multi_label(console, report)
        return
    accuracy, macro_f1 = report["accuracy"], report["macro_f1"]
    console.print(f"{report['documents']} documents: accuracy [bold]{accuracy:.4f}[/], macro-F1 {macro_f1:.4f}")
    if report["baseline"]:
        b = report["baseline"]
        console.print(
            f"tf-idf logreg baseline fitted with the run: accuracy {b['accuracy']:.4f}, macro-F1 {b['macro_f1']:.4f}"
        )
    table = Table("class", "precision", "recall", "F1", "support")
    for row in report["per_class"]:
        table.add_row(
            str(row["class"]),
            f"{row['precision']:.3f}",
            f"{row['recall']:.3f}",
            f"{row['f1']:.3f}",
            str(row["support"]),
        )
    console.print(table)
    cm = Table("gold \\ predicted", *[str(c) for c in classes])
    for c, row in zip(classes, report["confusion_matrix"]):
        cm.add_row(str(c), *map(str, row))
    console.print(cm)


def _print_multi_label(console, report: dict) -> None:
    from rich.table import Table

    console.print(
        f"{report['documents']} documents: micro-F1 [bold]{report['micro_f1']:.4f}[/], macro-F1 "
        f"{report['macro_f1']:.4f}, micro precision {report['micro_precision']:.4f}, micro recall "
        f"{report['micro_recall']:.4f}, subset accuracy {report['accuracy']:.4f}, Hamming loss "
        f"{report['hamming_loss']:.4f}"
    )
    if report["baseline"]:
        b = report["baseline"]
        console.print(
            f"tf-idf logreg baseline fitted with the run: micro-F1 {b['micro_f1']:.4f}, macro-F1 {b['macro_f1']:.4f}"
        )
    table = Table("class", "precision", "recall", "F1", "support")
    for row in sorted(report["per_class"], key=lambda r: -r["support"]):
        table.add_row(
            str(row["class"]),
            f"{row['precision']:.3f}",
            f"{row['recall']:.3f}",
            f"{row['f1']:.3f}",
            str(row["support"]),
        )
    console.print(table)


def _baseline_model(run: Path, clf):
    """The guardrail baseline saved with a neural run and the label map it decides by ((None, None) where there
    is none)."""
    from docattn.data.corpus import LabelMap
    from docattn.models import create_model
    from docattn.training.run import read_config
    from docattn.training.trainer import Guardrail

    folder = Path(run) / Guardrail.FOLDER
    if not folder.is_dir():
        return None, None
    model = create_model("logreg", vocab_size=len(clf.vocab), num_classes=len(clf.labels)).load_artifacts(folder)
    labels = clf.labels
    if labels.multi_label:  # the baseline's own thresholds, tuned with the run
        thresholds = (read_config(run).get("results", {}).get("baseline") or {}).get("thresholds")
        labels = LabelMap(labels.classes, True, thresholds, labels.at_least_one)
    return model, labels


@app.command()
@reads_documents()
def predict(
    run: Path = typer.Argument(..., help=RUN_HELP),
    data: str = typer.Argument("-", help="Documents: any supported file, plain text (one per line), or - for stdin."),
    chunk_size: int = typer.Option(4096, "--chunk-size", min=1, help=CHUNK_HELP),
    reader: Reader = Reader(),
):
    """Write one JSON line per document: its id, the predicted class and the class probabilities.

    The key is "prediction", as in explain's output, where "label" is the gold label the input gave.
    Documents are read, predicted and written in chunks, so memory does not grow with the input and lines
    come out as they are ready (from a pipe, whenever its writer pauses). Empty documents are skipped with a
    note on stderr at the end (lines are joined to the input by id, not position); a blank line of plain
    text separates documents.
    """
    from docattn.classifier import DocumentClassifier
    from docattn.data.readers.stream import iter_chunks
    from docattn.data.sources import resolve_source

    clf = DocumentClassifier.load(run)
    # stdin has one split; a source with splits is predicted on its test split (or --split)
    source, split = ("-", None) if data == "-" else (resolve_source(data), reader.split or ("test", "all"))
    with iter_chunks(source, chunk_size, split, **reader.options, ignore_labels=True) as chunks:
        for corpus in chunks:
            if not _write(prediction_lines(clf, corpus.ids, clf.predict_proba(corpus))):
                return  # the reader of stdout has gone (predict ... | head): stop reading, quietly
    skipped = chunks.stats.get("skipped_empty", 0)
    if skipped:
        typer.echo(f"note: {skipped} empty document(s) skipped, no prediction written for them", err=True)
    cut = chunks.stats.get("cut_documents", 0)
    if cut:
        typer.echo(
            f"note: {cut} document(s) cut at the length limit (first: {chunks.stats['first_cut_document']}); "
            "set DOCATTN_MAX_DOCUMENT_CHARS to keep more of them",
            err=True,
        )


def prediction_lines(clf, ids: list[str], probs) -> str:
    """The JSON lines ``docattn predict`` writes for documents ``ids`` with class probabilities ``probs``."""
    classes = clf.labels.classes
    # multi-label: the list of classes at or over their thresholds (each one's probability is beside it)
    decided = clf.labels.decode_sets(clf.labels.decide(probs)) if clf.labels.multi_label else None
    return "".join(
        json.dumps(
            {
                "id": ids[i],
                "prediction": decided[i] if decided is not None else classes[int(p.argmax())],
                "probabilities": {str(c): round(float(x), 6) for c, x in zip(classes, p)},
            },
            ensure_ascii=False,
        )
        + "\n"
        for i, p in enumerate(probs)
    )


def _write(text: str) -> bool:
    """``text`` written to stdout and flushed, so each chunk's lines are out before the next is read; False
    when stdout was closed under us, whose later writes (and the flush at exit) go nowhere instead of failing."""
    import os

    try:
        sys.stdout.write(text)
        sys.stdout.flush()
        return True
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return False
