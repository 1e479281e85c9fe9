"""Explanation commands: ``explain`` (HTML heatmaps), ``attention-matrix``, ``attention-dist``,
``attention-stats`` and ``faithfulness``. Each imports what it needs when it runs."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from docattn.cli.app import app, console
from docattn.cli.options import Reader, reads_documents
from docattn.errors import DocattnError

FIGURE_FORMATS = ("png", "svg", "pdf")
RUN_HELP = "Run directory (what train --out wrote)."
DATA_HELP = "Documents: any supported format or data set name, or plain text one per line."
JSON_HELP = "Print the numbers as JSON."


def _check_n(n: int) -> None:
    if n < 0:
        raise DocattnError(f"--n is a number of documents, 0 for all; got {n}")


def _pick(reader: Reader, data: str, n: int, sample: bool, seed: int):
    """``n`` documents (0: all): drawn at random by ``seed`` and kept in file order, or the first ``n``;
    files sorted by label would otherwise give one class only. Read in chunks: memory holds ``n`` documents
    and a chunk, not the whole source, and the draw is the one the whole corpus in memory gave."""
    if not n:
        return reader.corpus(data)
    from docattn.data.readers.stream import pick
    from docattn.data.sources import resolve_source

    split = reader.split or ("test", "all")  # as reader.corpus: never a training split unasked
    return pick(resolve_source(data), n, seed if sample else None, split=split, **reader.options)


def _load(run: Path, data: str, reader: Reader, n: int = 0):
    from docattn.classifier import DocumentClassifier

    _check_n(n)
    clf = DocumentClassifier.load(run)
    return clf, _pick(reader, data, n, sample=False, seed=0)


def _percents(text: str) -> list:
    """--percents "1,5,10": each k in (0, 100], the share of a document's words removed or kept."""
    ks = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            k = float(part) if "." in part else int(part)
        except ValueError:
            raise DocattnError(
                f"--percents takes numbers separated by commas, e.g. 1,5,10,20,50; got {part!r}"
            ) from None
        if not 0 < k <= 100:
            raise DocattnError(
                f"--percents: each k is a share of a document's words, above 0 and at most 100; got {part}"
            )
        ks.append(k)
    if not ks:
        raise DocattnError("--percents needs at least one value, e.g. 1,5,10,20,50")
    return ks


def _fmt(x, digits: int = 4) -> str:
    return "-" if x is None or (isinstance(x, float) and x != x) else f"{x:.{digits}f}"


def _table(title: str, text_columns, number_columns):
    """A Rich table whose number columns never wrap or truncate (text columns give way first)."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for name, width in text_columns:
        table.add_column(name, overflow="fold", min_width=width)
    for name in number_columns:
        table.add_column(name, justify="right", no_wrap=True)
    return table


@app.command()
@reads_documents()
def explain(
    runs: list[Path] = typer.Argument(..., help=RUN_HELP + " Two or more: one report comparing them side by side."),
    data: str = typer.Option(..., "--data", help=DATA_HELP),
    n: int = typer.Option(20, "--n", help="Number of documents to explain."),
    sample: bool = typer.Option(
        True,
        "--sample/--first",
        help="Draw the n documents at random (by --seed, shown in "
        "file order), or take the first n: files sorted by label would give one class only.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the random draw."),
    html: Path = typer.Option(Path("report.html"), "--html", help="Self-contained HTML report to write."),
    json_out: Path | None = typer.Option(
        None, "--json", help="Also write every weight as JSON to this file.", show_default="none"
    ),
    method: str | None = typer.Option(
        None,
        "--method",
        help="attention, linear, gradient_x_input or integrated_gradients; with several runs, one for all or "
        "one per run, comma-separated.",
        show_default="the model's own: its attention, or linear for linear models",
    ),
    target: str | None = typer.Option(
        None,
        "--target",
        help="Explain this class (its name) instead of each document's prediction (linear and gradient methods).",
        show_default="the predicted class",
    ),
    ig_steps: int = typer.Option(20, "--ig-steps", help="Integrated-gradients steps."),
    reader: Reader = Reader(),
):
    """Heatmaps of why a model decided: sentence bars and word shading, by attention (HAN's sqrt(p_sentence) *
    p_word rule), linear contributions or gradients; several runs side by side."""
    from docattn.classifier import DocumentClassifier
    from docattn.training.run_folder import claim_in_run

    if n < 1:
        raise DocattnError(f"--n is the number of documents to explain, at least 1; got {n}")
    for flag, path, example in (("--html", html, "report.html"), ("--json", json_out, "weights.json")):
        if path is not None and path.is_dir():
            raise DocattnError(f"{flag} {path} is a folder; give a file name, e.g. {path / example}")
    if ig_steps < 1:
        raise DocattnError(f"--ig-steps must be at least 1; got {ig_steps}")
    methods = _run_methods(method, len(runs))
    clfs = [DocumentClassifier.load(run) for run in runs]
    corpus = _pick(reader, data, n, sample, seed)
    explained = [_explain_run(clf, corpus, m, target, ig_steps) for clf, m in zip(clfs, methods)]
    if len(runs) == 1:
        _write_one(explained[0], html, json_out, f"docattn {clfs[0].model_name}: {Path(data).name}")
    else:
        _write_comparison(runs, clfs, explained, html, json_out, Path(data).name)
    claim_in_run(html)
    if json_out:
        claim_in_run(json_out)
    console().print(f"wrote {html}" + (f" and {json_out}" if json_out else ""))


def _run_methods(method: str | None, n_runs: int) -> list[str | None]:
    """--method for each run: none (each model's own), one for all, or one per run."""
    if method is None:
        return [None] * n_runs
    parts = [m.strip() for m in method.split(",")]
    if len(parts) not in (1, n_runs) or not all(parts):
        raise DocattnError(f"--method takes one method, or one per run ({n_runs}), separated by commas; got {method!r}")
    return parts * n_runs if len(parts) == 1 else parts


def _explain_run(clf, corpus, method: str | None, target: str | None, ig_steps: int) -> list[dict]:
    from docattn.explain.attention import explain_documents
    from docattn.explain.html import add_attention_views

    index = None
    if target is not None:
        names = [str(c) for c in clf.labels.classes]
        if target not in names:
            raise DocattnError(f"--target {target!r} is no class of {clf.model_name!r}: {', '.join(names)}")
        index = names.index(target)
    items = explain_documents(clf, corpus, method=method, target=index, ig_steps=ig_steps)
    return add_attention_views(items, clf, corpus)  # per-head (HCAN) and per-query (CSPAN) views of attention


def _write_one(items: list[dict], html: Path, json_out: Path | None, title: str) -> None:
    from docattn.explain.attention import explanations_json
    from docattn.explain.html import write_atomic, write_html

    write_html(items, html, title=title)
    if json_out:
        write_atomic(json_out, explanations_json(items))


def _write_comparison(runs: list[Path], clfs, explained: list, html: Path, json_out: Path | None, data: str) -> None:
    from docattn.explain.compare import Explained, comparison_json, run_names, write_comparison
    from docattn.explain.html import write_atomic

    named = [
        Explained(name, clf.model_name, items[0]["method"] if items else "", items)
        for name, clf, items in zip(run_names(runs), clfs, explained)
    ]
    write_comparison(named, html, title=f"docattn {' vs '.join(r.model for r in named)}: {data}")
    if json_out:
        write_atomic(json_out, comparison_json(named, runs))


@app.command("attention-matrix")
@reads_documents()
def attention_matrix(
    run: Path = typer.Argument(..., help=RUN_HELP),
    data: str = typer.Option(..., "--data", help=DATA_HELP),
    doc: int = typer.Option(0, "--doc", help="Position of the document in the data, from 0."),
    doc_id: str | None = typer.Option(
        None, "--id", help="Or the document's id, as explain and predict show it.", show_default="none: --doc"
    ),
    out: Path = typer.Option(Path("attention-matrices"), "--out", help="Folder for the figures."),
    sentence: str | None = typer.Option(
        None,
        "--sentence",
        help="Hierarchical models: sentence index for word-level matrices, or 'all'.",
        show_default="the sentence with the most attention",
    ),
    image_format: str = typer.Option("png", "--image-format", help="png, svg or pdf."),
    max_tokens: int = typer.Option(200, "--max-tokens", help="Show at most this many words per axis (0: all)."),
    reader: Reader = Reader(),
):
    """Self-attention heatmaps of one document, words on both axes: one figure per matrix, block and head."""
    from docattn.explain.stats import document_matrices

    image_format = image_format.lower().lstrip(".")
    if image_format not in FIGURE_FORMATS:
        raise DocattnError(f"--image-format must be one of {', '.join(FIGURE_FORMATS)}; got {image_format!r}")
    if sentence is not None and sentence != "all" and not sentence.lstrip("-").isdigit():
        raise DocattnError(f"--sentence takes a sentence index or 'all'; got {sentence!r}")
    if out.exists() and not out.is_dir():
        raise DocattnError(f"--out {out} is a file; attention-matrix writes its figures into a folder")
    if max_tokens < 0:
        raise DocattnError(f"--max-tokens is the number of words per axis to show (0: all); got {max_tokens}")
    clf, corpus = _load(run, data, reader)
    if doc_id is not None:
        doc = _position_of(corpus, doc_id, data)
    if sentence is not None and clf.model.layout != "hierarchical":
        raise DocattnError(
            f"--sentence picks a sentence of a hierarchical model; {clf.model_name!r} reads each "
            "document as one sequence (leave --sentence out)"
        )
    pick = None if sentence is None else ("all" if sentence == "all" else int(sentence))
    matrices = document_matrices(clf, corpus, doc, pick)
    if not matrices:
        console().print(
            f"model {clf.model_name!r} has no self-attention matrices: nothing to draw "
            "(self-attention models: sanet*, hcan-*, can-*, cspan*)"
        )
        raise typer.Exit(1)
    _draw_matrices(clf, corpus, doc, matrices, out, image_format, max_tokens)


def _position_of(corpus, doc_id: str, data: str) -> int:
    ids = [str(i) for i in corpus.ids] if corpus.ids is not None else [str(i) for i in range(len(corpus))]
    if doc_id not in ids:
        raise DocattnError(f"no document with id {doc_id!r} in {data} (ids run {ids[0]!r} ... {ids[-1]!r})")
    if ids.count(doc_id) > 1:
        raise DocattnError(
            f"{ids.count(doc_id)} documents in {data} have the id {doc_id!r}; pick one by position with --doc"
        )
    return ids.index(doc_id)


def _draw_matrices(clf, corpus, doc: int, matrices: list, out: Path, image_format: str, max_tokens: int) -> None:
    from docattn.explain.plots import plot_attention_matrix

    out.mkdir(parents=True, exist_ok=True)
    named = f" (id {corpus.ids[doc]})" if corpus.ids is not None and str(corpus.ids[doc]) != str(doc) else ""
    written = []
    for i, m in enumerate(matrices):
        name = "".join(c if c.isalnum() else "-" for c in m["name"]).strip("-")
        path = out / f"doc{doc}-{i:03d}-{name}.{image_format}"
        written.append(
            plot_attention_matrix(
                m["matrix"],
                m["tokens"],
                path,
                title=f"{clf.model_name}, document {doc}{named}: {m['name']}",
                max_tokens=max_tokens,
            )
        )
    console().print(f"wrote {len(written)} figure(s) to {out}")
    for p in written:
        typer.echo(str(p))


@app.command("attention-dist")
@reads_documents()
def attention_dist(
    run: Path = typer.Argument(..., help=RUN_HELP),
    data: str = typer.Option(..., "--data", help="Labelled documents."),
    word: str = typer.Option(..., "--word", help="The word whose attention to collect, e.g. good."),
    out: Path | None = typer.Option(None, "--out", help="Histogram figure (.png, .svg, .pdf).", show_default="none"),
    level: str = typer.Option(
        "word", "--level", help="word: p_word (HAN Figs. 3-4); combined: sqrt(p_sentence) * p_word."
    ),
    n: int = typer.Option(0, "--n", help="Use the first n documents (0: all)."),
    bins: int = typer.Option(30, "--bins", help="Histogram bins."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
    reader: Reader = Reader(),
):
    """Distribution of the attention a word receives over a data set, overall and per gold label."""
    from docattn.explain.stats import word_attention_distribution

    if out is not None and out.suffix.lower().lstrip(".") not in FIGURE_FORMATS:
        raise DocattnError(f"--out {out}: the figure's name must end in one of .{', .'.join(FIGURE_FORMATS)}")
    if level not in ("word", "combined"):
        raise DocattnError(f"--level must be word or combined; got {level!r}")
    clf, corpus = _load(run, data, reader, n)
    if level == "combined" and clf.model.layout != "hierarchical":
        raise DocattnError(
            f"--level combined weighs words by their sentence's attention; {clf.model_name!r} has "
            "no sentence level (use --level word)"
        )
    result = word_attention_distribution(clf, corpus, word, level=level, bins=bins)
    result.pop("values")
    result.pop("labels")
    if out is not None:
        from docattn.explain.plots import plot_attention_distribution

        result["figure"] = str(plot_attention_distribution(result, out))
    if as_json:
        typer.echo(json.dumps(result, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(
        "label",
        "count",
        "mean",
        "std",
        "q05",
        "q25",
        "median",
        "q75",
        "q95",
        title=f"{clf.model_name}: attention received by {result['word']!r} ({level})",
    )
    for name, s in [("all", result["overall"])] + list(result["by_label"].items()):
        q = s["quantiles"]
        table.add_row(
            name,
            str(s["count"]),
            _fmt(s["mean"]),
            _fmt(s["std"]),
            *[_fmt(q[k]) for k in ("0.05", "0.25", "0.5", "0.75", "0.95")],
        )
    Console().print(table)
    if out is not None:
        Console().print(f"figure: {result['figure']}")


@app.command("attention-stats")
@reads_documents()
def attention_stats(
    run: Path = typer.Argument(..., help=RUN_HELP),
    data: str = typer.Option(..., "--data", help=DATA_HELP),
    n: int = typer.Option(0, "--n", help="Use the first n documents (0: all)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
    reader: Reader = Reader(),
):
    """Gini, entropy, exact zeros and diagonality (b = 1..5, SANet Table 2) of every attention the model returns."""
    from docattn.explain.stats import attention_statistics

    clf, corpus = _load(run, data, reader, n)
    result = attention_statistics(clf, corpus)
    if corpus.rationales is not None and all(r is not None for r in corpus.rationales):
        scores = _rationale_scores(clf, corpus)
        if scores:
            result["rationales"] = scores
    if as_json:
        typer.echo(json.dumps(result, indent=1))
        return
    _print_attention_stats(clf, result)


def _rationale_scores(clf, corpus) -> dict:
    from docattn.explain.attention import explain_documents
    from docattn.explain.methods import has_pooling_attention
    from docattn.explain.rationale import model_rationales, rationale_metrics
    from docattn.explain.stats import surface_token_lists, unlabelled

    if not has_pooling_attention(clf.model):
        return {}  # these statistics are attention's; `explain` has the other methods
    lengths = (
        None
        if clf.model.layout == "hierarchical"
        else [[len(s) for s in doc] for doc in surface_token_lists(clf, corpus)]
    )
    limit = clf.limits.get("max_tokens")
    if lengths is not None and limit and any(sum(doc) > limit for doc in lengths):
        lengths = None  # truncated flat documents: the rationale positions may fall outside
    return rationale_metrics(
        explain_documents(clf, unlabelled(corpus), method="attention"),
        model_rationales(clf.vocab, corpus),
        sentence_lengths=lengths,
    )


def _print_attention_stats(clf, result: dict) -> None:
    from rich.console import Console

    out = Console()
    if not result["attentions"]:
        out.print(f"model {clf.model_name!r} returns no attention weights")
        return
    table = _table(
        f"{clf.model_name} on {result['documents']} documents (rows: attention distributions)",
        [("attention", 15), ("kind", 6)],
        ["rows", "Gini", "entropy", "H / log n", "zeros"],
    )
    for key, s in result["attentions"].items():
        kind = "dist." if s["kind"] == "distribution" else s["kind"]
        table.add_row(
            key,
            kind,
            str(s["distributions"]),
            _fmt(s["gini"]),
            _fmt(s["entropy"]),
            _fmt(s["normalized_entropy"]),
            _fmt(s["zero_share"]),
        )
    out.print(table)
    matrices = {k: s for k, s in result["attentions"].items() if s["kind"] == "matrix"}
    if matrices:
        bands = list(next(iter(matrices.values()))["diagonality"])
        diag = _table(
            "diagonality: share of attention mass with |i - j| <= b (SANet Table 2); "
            "'uniform': the same words attended uniformly",
            [("self-attention", 15)],
            ["matrices", "Gini/mat", "Gini/col", *[f"b={b}" for b in bands]],
        )
        for key, s in matrices.items():
            diag.add_row(
                key,
                str(s["matrices"]),
                _fmt(s["gini_matrix"]),
                _fmt(s["gini_columns"]),
                *[_fmt(s["diagonality"][b]) for b in bands],
            )
            diag.add_row("  uniform", "", _fmt(0.0), _fmt(0.0), *[_fmt(s["diagonality_uniform"][b]) for b in bands])
        out.print(diag)
    if result["pruned"]:
        out.print(
            "share of real words / sentences with exactly zero weight: "
            + ", ".join(f"{k} {v:.2%}" for k, v in result["pruned"].items())
        )
    if "rationales" in result:
        r = result["rationales"]
        parts = [f"word AUPRC {r['word_auprc']:.3f}", f"R-precision {r['word_r_precision']:.3f}"]
        if "top_sentence_accuracy" in r:
            parts.insert(0, f"top sentence is a deciding one {r['top_sentence_accuracy']:.1%}")
        parts.append("precision@k " + ", ".join(f"{k}: {v:.2f}" for k, v in r["word_precision_at_k"].items()))
        out.print(f"attention vs ground-truth rationales ({r['documents']} documents): " + "; ".join(parts))


@app.command("faithfulness")
@reads_documents()
def faithfulness_cmd(
    runs: list[Path] = typer.Argument(..., help="Run directories (several: one table over all the models)."),
    data: str = typer.Option(..., "--data", help=DATA_HELP),
    n: int = typer.Option(100, "--n", help="Number of documents (0: all)."),
    sample: bool = typer.Option(
        False,
        "--sample",
        help="Draw the n documents at random (by --seed), not the first n: "
        "files sorted by label would otherwise give one class only.",
    ),
    methods: str | None = typer.Option(
        None,
        "--methods",
        help="Comma-separated rankings to compare: attention, linear, random, gradient_x_input, integrated_gradients.",
        show_default="every ranking the model has, and random",
    ),
    percents: str = typer.Option("1,5,10,20,50", "--percents", help="k values (% of each document's words)."),
    ig_steps: int = typer.Option(20, "--ig-steps", help="Integrated-gradients steps."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random ranking (and of --sample)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Documents per forward pass."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the numbers as JSON (one run: its object; several: a list)."
    ),
    reader: Reader = Reader(),
):
    """ERASER comprehensiveness (higher: more faithful) and sufficiency (lower: better), with AOPC, per ranking."""
    from docattn.classifier import DocumentClassifier
    from docattn.explain.faithfulness import faithfulness

    ks = _percents(percents)
    _check_n(n)
    if ig_steps < 1:
        raise DocattnError(
            f"--ig-steps must be at least 1 (integrated gradients average the gradients at that many "
            f"points between a baseline and the input); got {ig_steps}"
        )
    corpus = _pick(reader, data, n, sample, seed)
    results = []
    for run in runs:
        clf = DocumentClassifier.load(run)
        results.append(
            faithfulness(
                clf,
                corpus,
                methods=None if methods is None else [m.strip() for m in methods.split(",") if m.strip()],
                percents=ks,
                batch_size=batch_size,
                ig_steps=ig_steps,
                seed=seed,
            )
        )
        results[-1]["run"] = str(run)
    if as_json:
        typer.echo(json.dumps(results[0] if len(results) == 1 else results, indent=1))
    else:
        _print_faithfulness(results, ks)
    for run, result in zip(runs, results):
        _keep_in_run(run, result)


def _keep_in_run(run: Path, result: dict) -> None:
    """The run keeps its faithfulness result, which its model card reports; never over a file of the user's."""
    from docattn.card import CARD_FILE, FAITHFULNESS_FILE, write_card
    from docattn.data.files import write_json
    from docattn.training.run_folder import claim_in_run, docattn_files

    ours, target = docattn_files(run), run / FAITHFULNESS_FILE
    if target.exists() and FAITHFULNESS_FILE not in ours:
        console().print(f"note: {target} is not docattn's: the result is not saved there")
        return
    write_json(target, result)
    claim_in_run(target)
    if CARD_FILE in ours:
        write_card(run)
    console().print(f"saved in {target}" + (f"; {run / CARD_FILE} reports it" if CARD_FILE in ours else ""))


def _print_faithfulness(results: list, ks: list) -> None:
    from rich.console import Console

    out = Console()
    cols = [str(k) for k in ks]
    many = len(results) > 1
    short = {"gradient_x_input": "grad*input", "integrated_gradients": "int. grads"}
    first = results[0]
    title = (
        f"faithfulness on {first['documents']} documents (mean {first['mean_words']:.0f} words); "
        "top k% words removed / kept"
    )
    table = _table(
        title if many else f"{first['model']}: {title}",
        [*([("model", 6)] if many else []), ("ranking", 10), ("metric", 6)],
        [*[f"{k}%" for k in cols], "AOPC", *([] if many else ["s"])],
    )
    for result in results:
        model = [result["model"]] if many else []
        for name, m in result["methods"].items():
            if not m["available"]:
                table.add_row(
                    *model, short.get(name, name), "n/a", *[""] * (len(cols) + (1 if many else 2)), end_section=True
                )
                continue
            table.add_row(
                *model,
                short.get(name, name),
                "comp",
                *[_fmt(m["comprehensiveness"][k], 3) for k in cols],
                _fmt(m["aopc_comprehensiveness"], 3),
                *([] if many else [f"{m['seconds']:.0f}"]),
            )
            table.add_row(
                *[""] * len(model),
                "",
                "suff",
                *[_fmt(m["sufficiency"][k], 3) for k in cols],
                _fmt(m["aopc_sufficiency"], 3),
                *([] if many else [""]),
                end_section=True,
            )
    out.print(table)
    out.print(
        "comp(rehensiveness): drop in the predicted class's probability without the top words (higher: "
        "more faithful); suff(iciency): drop with only them (lower: more faithful)" + ("" if many else "; s: seconds")
    )
    for result in results:
        for name, m in result["methods"].items():
            if not m["available"]:
                out.print(f"{result['model']} {name}: {m['reason']}")
        if "accuracy" in result:
            out.print(f"{result['model']} accuracy on these documents: {result['accuracy']:.2%}")
