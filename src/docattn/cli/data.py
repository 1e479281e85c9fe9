"""``docattn data list|download|stats|prepare``: the registered data sets, the papers' Table 1 columns, and
the encoded cache that training reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from docattn.cli.app import data_app
from docattn.cli.options import Reader, reads_documents
from docattn.cli.report import print_skipped, print_worker_hint
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


@data_app.command("prepare")
@reads_documents(split=False)
def data_prepare(
    data: str = typer.Argument(..., help="A file, folder, archive or registered data set name (the training data)."),
    valid: Annotated[
        str | None,
        typer.Option("--valid", help="Validation documents.", show_default="valid_fraction of the training data"),
    ] = None,
    test: Annotated[
        str | None,
        typer.Option("--test", help="Test documents.", show_default="the data's own test split, if any"),
    ] = None,
    out_stats: Annotated[
        Path | None,
        typer.Option("--out-stats", help="Also write the numbers printed as JSON to this file.", show_default="none"),
    ] = None,
    sets: Annotated[list[str], typer.Option("--set", help="A data or text option, KEY=VALUE (repeatable).")] = [],  # noqa: B006
    reader: Reader = Reader(),
):
    """Encode and cache a corpus as training would, without training: documents per split, tokens, vocabulary,
    where the cache is, how long it took and the peak memory."""
    import resource
    import time

    from rich.console import Console

    from docattn.data.prepare import prepare_paths

    settings = data_settings(sets)
    if out_stats is not None:
        check_stats_file(out_stats)
    t0 = time.perf_counter()
    prepared = prepare_paths(
        resolve_source(data), valid and resolve_source(valid), test and resolve_source(test), settings, reader.options
    )
    seconds = time.perf_counter() - t0
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    stats = {
        "written_by": "docattn data prepare",
        "data": data,
        "documents": {k: len(v) for k, v in prepared.splits.items()},
        "tokens": {k: len(v.tokens) for k, v in prepared.splits.items()},
        "sentences": {k: len(v.sentence_offsets) - 1 for k, v in prepared.splits.items()},
        "vocabulary": len(prepared.vocab),
        "classes": len(prepared.labels),
        "cache": prepared.info.get("cache"),
        "reused": bool(prepared.info.get("reused")),
        "seconds": round(seconds, 2),
        "peak_rss_mb": round(own, 1),
        "worker_peak_rss_mb": round(workers, 1),
        "prepare_chunk": settings.prepare_chunk,
        "prepare_workers": settings.prepare_workers,
    }
    console = Console(soft_wrap=True)  # a cache path stays one line, to copy
    for name, n in stats["documents"].items():
        console.print(
            f"{name}: {n:,} documents, {stats['sentences'][name]:,} sentences, {stats['tokens'][name]:,} tokens"
        )
    console.print(
        f"vocabulary: {stats['vocabulary']:,} ids (<pad>, <unk> and the sentence break among them), "
        f"classes: {stats['classes']}"
    )
    where = stats["cache"] or f"not cached ({prepared.info.get('cache_error', 'no cache')})"
    console.print(f"cache: {where}{' (reused: it was already there)' if stats['reused'] else ''}")
    console.print(
        f"{stats['seconds']:.1f} s, peak memory {own:,.0f} MB"
        + (f" (worker processes: {workers:,.0f} MB each at most)" if settings.prepare_workers else "")
    )
    print_skipped(console, prepared.info)
    print_worker_hint(console, prepared.info, settings.prepare_workers)
    if out_stats is not None:
        from docattn.data.files import write_json

        write_json(out_stats, stats)
        console.print(f"wrote {out_stats}")


def data_settings(sets: list[str]):
    """DataSettings from ``--set`` items: its own fields, and TextConfig's (how text becomes tokens)."""
    import dataclasses
    from difflib import get_close_matches

    from docattn.cli.options import parse_sets
    from docattn.data.prepare import DataSettings
    from docattn.data.text import TextConfig
    from docattn.errors import ConfigError

    given = parse_sets(sets)
    own = {f.name for f in dataclasses.fields(DataSettings)} - {"text"}
    text_keys = {f.name for f in dataclasses.fields(TextConfig)}
    for key in given:
        if key not in own | text_keys:
            guess = get_close_matches(key, sorted(own | text_keys), 1)
            raise ConfigError(
                f"--set {key}: not a data option"
                + (f"; did you mean {guess[0]!r}?" if guess else "")
                + " (docs/options.md lists them)"
            )
    text = TextConfig(**{k: v for k, v in given.items() if k in text_keys})
    return DataSettings(text=text, **{k: v for k, v in given.items() if k in own})


def check_stats_file(path: Path) -> None:
    """--out-stats replaces only a stats file this command wrote: never the user's own file, nor a folder."""
    from docattn.errors import DocattnError

    if path.is_dir():
        raise DocattnError(f"--out-stats {path} is a folder; give a file name")
    if not path.exists():
        return
    try:
        ours = json.loads(path.read_text(encoding="utf-8")).get("written_by") == "docattn data prepare"
    except (OSError, UnicodeDecodeError, ValueError, AttributeError, RecursionError):
        ours = False
    if not ours:
        raise DocattnError(f"--out-stats {path} exists and is not a stats file docattn wrote; give another name")
