"""``docattn data list|download|stats``: the registered data sets and the papers' Table 1 columns."""

from __future__ import annotations

import json

import typer

from docattn.cli.app import data_app
from docattn.cli.options import Reader, reads_documents
from docattn.cli.report import print_skipped
from docattn.data.sources import resolve_source


@data_app.command("list")
def data_list():
    """The registered standard data sets."""
    from rich.console import Console
    from rich.table import Table

    from docattn.data.registry import DATASETS

    table = Table("name", "classes", "train", "test", "layout", "description")
    for name, info in DATASETS.items():
        table.add_row(
            name, str(info.num_classes), str(info.train or "?"), str(info.test or "?"), info.layout, info.description
        )
    Console().print(table)


@data_app.command("download")
def data_download(
    name: str = typer.Argument(..., help="A registered data set name (docattn data list)."),
    url: str | None = typer.Option(
        None, "--url", help="Mirror URL or local archive path.", show_default="the registry's address"
    ),
):
    """Download, verify and extract a registered data set into the cache folder."""
    from docattn.data.registry import download

    typer.echo(str(download(name, url=url)))


@data_app.command("stats")
@reads_documents(split=False)
def data_stats(
    data: str = typer.Argument(..., help="A file, folder, archive or registered data set name."),
    as_json: bool = typer.Option(False, "--json", help="Print the numbers as JSON."),
    reader: Reader = Reader(),
):
    """The papers' Table 1 columns per split, and the class distribution."""
    from rich.console import Console
    from rich.table import Table

    from docattn.data.readers import read_splits
    from docattn.data.stats import corpus_stats

    splits = read_splits(resolve_source(data), **reader.options)
    stats = {name: corpus_stats(c) for name, c in splits.items()}
    if as_json:
        typer.echo(json.dumps(stats, indent=1, default=str))
        return
    console = Console()
    table = Table("split", "classes", "documents", "avg #s", "max #s", "avg #w", "max #w", "vocabulary")
    for name, s in stats.items():
        table.add_row(
            name,
            str(s["classes"]),
            f"{s['documents']:,}",
            f"{s['avg_sentences']:.1f}",
            str(s["max_sentences"]),
            f"{s['avg_words']:.1f}",
            str(s["max_words"]),
            f"{s['vocabulary']:,}",
        )
    console.print(table)
    for name, s in stats.items():
        dist = ", ".join(f"{k}: {v:,}" for k, v in s["class_counts"].items())
        console.print(f"[bold]{name}[/] classes: {dist or 'none (unlabelled documents)'}")
    print_skipped(console, {"skipped": {name: c.stats for name, c in splits.items() if c.stats}})
