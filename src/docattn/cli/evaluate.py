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


@app.command()
@reads_documents()
def evaluate(
    run: Path = typer.Argument(..., help=RUN_HELP),
    data: str = typer.Option(..., "--data", help="Labelled data: a file, folder, archive or registered data set name."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    reader: Reader = Reader(),
):
    """Accuracy, macro-F1, per-class precision/recall/F1 and the confusion matrix (multi-label: micro- and
    macro-F1, precision, recall, subset accuracy, Hamming loss and the per-class table)."""
    from docattn.classifier import DocumentClassifier
    from docattn.training.membership import seen_before
    from docattn.training.trainer import evaluate_encoded

    clf = DocumentClassifier.load(run)
    corpus = reader.corpus(data)
    if corpus.labels is None:
        raise DocattnError(f"{data}: documents have no labels to evaluate against")
    enc = clf.encode(corpus)
    report = evaluate_encoded(clf, enc)
    report["baseline"] = _baseline_report(run, clf, enc)
    report["seen_in_training"] = seen = seen_before(run, enc)
    leaked = {k: v for k, v in (seen or {}).items() if v}
    warning = (
        (
            "warning: "
            + " and ".join(
                f"{n:,} of these {len(enc):,} documents are in the run's "
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


def _baseline_report(run: Path, clf, enc) -> dict | None:
    """The guardrail baseline saved with a neural run, scored on the same documents (None where there is none)."""
    from docattn.data.corpus import LabelMap
    from docattn.models import create_model
    from docattn.training.run import read_config
    from docattn.training.trainer import Guardrail, score_probabilities

    folder = Path(run) / Guardrail.FOLDER
    if not folder.is_dir():
        return None
    model = create_model("logreg", vocab_size=len(clf.vocab), num_classes=len(clf.labels)).load_artifacts(folder)
    labels = clf.labels
    if labels.multi_label:  # the baseline's own thresholds, tuned with the run
        thresholds = (read_config(run).get("results", {}).get("baseline") or {}).get("thresholds")
        labels = LabelMap(labels.classes, multi_label=True, thresholds=thresholds)
    report = score_probabilities(labels, enc.labels, model.predict_proba_encoded(enc))
    keys = ("documents", "accuracy", "macro_f1", "micro_f1")
    return {"model": "logreg", **{k: report[k] for k in keys if k in report}}


@app.command()
@reads_documents()
def predict(
    run: Path = typer.Argument(..., help=RUN_HELP),
    data: str = typer.Argument("-", help="Documents: any supported file, plain text (one per line), or - for stdin."),
    reader: Reader = Reader(),
):
    """Write one JSON line per document: its id, the predicted class and the class probabilities.

    The key is "prediction", as in explain's output, where "label" is the gold label the input gave.
    Empty documents are skipped with a note on stderr (lines are joined to the input by id, not position);
    a blank line of plain text separates documents.
    """
    from docattn.classifier import DocumentClassifier
    from docattn.data.readers import read_corpus

    clf = DocumentClassifier.load(run)
    if data == "-":  # the reader tells JSON lines and fastText from plain text
        corpus = read_corpus("-", **reader.options, ignore_labels=True)
    else:  # a source with splits is predicted on its test split
        corpus = reader.corpus(data, ignore_labels=True)
    skipped = corpus.stats.get("skipped_empty", 0)
    if skipped:
        typer.echo(f"note: {skipped} empty document(s) skipped, no prediction written for them", err=True)
    cut = corpus.stats.get("cut_documents", 0)
    if cut:
        typer.echo(
            f"note: {cut} document(s) cut at the length limit (first: {corpus.stats['first_cut_document']}); "
            "set DOCATTN_MAX_DOCUMENT_CHARS to keep more of them",
            err=True,
        )
    probs = clf.predict_proba(corpus)
    classes = clf.labels.classes
    # multi-label: the list of classes at or over their thresholds (each one's probability is beside it)
    decided = clf.labels.decode_sets(clf.labels.decide(probs)) if clf.labels.multi_label else None
    out = sys.stdout
    for i, p in enumerate(probs):
        out.write(
            json.dumps(
                {
                    "id": corpus.ids[i],
                    "prediction": decided[i] if decided is not None else classes[int(p.argmax())],
                    "probabilities": {str(c): round(float(x), 6) for c, x in zip(classes, p)},
                },
                ensure_ascii=False,
            )
            + "\n"
        )
