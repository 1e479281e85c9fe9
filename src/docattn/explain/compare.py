"""Side by side: the same documents explained by two or more runs, in one HTML report and one JSON file.

Each document is a row: its id and gold label, then one column per run with that run's prediction,
probabilities and heatmap, rendered exactly as the single-run report renders them (``html.render_document``).
A summary at the top names each run's model and method, its accuracy on these documents where they are
labelled, and how often the runs agree.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from docattn.explain.html import is_correct

_STYLE = """
body{max-width:none}
.summary td,.summary th{padding:.1em .8em;text-align:left}
.row{border-top:2px solid #bbb;margin:1.2em 0;padding-top:.4em}
.rowhead{font-weight:bold}
.cols{display:grid;gap:.8em;align-items:start}
.cols .doc{margin:.3em 0}
.run{font-size:85%;color:#333;font-weight:bold}
"""


@dataclass
class Explained:
    """One run's explanations of the shared documents, in their order."""

    name: str  # what the report calls the run (its folder's name, or its path where two share a name)
    model: str
    method: str
    items: list[dict]


def run_names(paths: list[Path]) -> list[str]:
    """Each run's folder name, or every run's path where two folders share a name."""
    names = [Path(p).name or str(p) for p in paths]
    return names if len(set(names)) == len(names) else [str(p) for p in paths]


def _agreement(runs: list[Explained]) -> float:
    predictions = [[_shown(it["prediction"]) for it in run.items] for run in runs]
    same = [len(set(row)) == 1 for row in zip(*predictions)]
    return sum(same) / len(same) if same else float("nan")


def _shown(prediction) -> str:
    """A prediction as text to compare across runs; a multi-label one in a fixed order."""
    return str(sorted(map(str, prediction))) if isinstance(prediction, list) else str(prediction)


def _summary(runs: list[Explained]) -> str:
    rows = []
    for run in runs:
        labelled = [it for it in run.items if it.get("label") is not None]
        right = sum(is_correct(it["label"], it["prediction"]) for it in labelled)
        accuracy = f"{right}/{len(labelled)} correct" if labelled else ""
        rows.append(
            f"<tr><td><bdi>{html.escape(run.name)}</bdi></td><td>{html.escape(run.model)}</td>"
            f"<td>{html.escape(run.method)}</td><td>{accuracy}</td></tr>"
        )
    n = len(runs[0].items) if runs else 0
    return (
        '<table class="summary"><tr><th>run</th><th>model</th><th>explained by</th><th>these documents</th></tr>'
        + "".join(rows)
        + f"</table><p>The runs predict the same class for {_agreement(runs):.0%} of these {n} documents.</p>"
    )


def _row(runs: list[Explained], d: int) -> str:
    from docattn.explain.html import render_document

    first = runs[0].items[d]
    gold = first.get("label")
    head = f"document <bdi>{html.escape(str(first.get('id', d)))}</bdi>"
    if gold is not None:
        head += f" (gold <bdi>{html.escape(str(gold))}</bdi>)"
    cells = "".join(
        f'<div class="col"><div class="run"><bdi>{html.escape(run.name)}</bdi>: {html.escape(run.model)}, '
        f"{html.escape(run.method)}</div>{render_document(run.items[d])}</div>"
        for run in runs
    )
    columns = f"grid-template-columns:repeat({len(runs)},minmax(0,1fr))"
    return f'<div class="row"><div class="rowhead">{head}</div><div class="cols" style="{columns}">{cells}</div></div>'


def comparison_page(runs: list[Explained], title: str) -> str:
    """The whole side-by-side page."""
    from docattn.explain.html import page

    n = len(runs[0].items) if runs else 0
    if any(len(run.items) != n for run in runs):
        raise ValueError("every run must explain the same documents")
    body = _summary(runs) + "".join(_row(runs, d) for d in range(n))
    return page(title, [it for run in runs for it in run.items], body, style=_STYLE)


def write_comparison(runs: list[Explained], path, title: str) -> Path:
    """Write the side-by-side report atomically; every style and script is inline."""
    from docattn.explain.html import write_atomic

    return write_atomic(path, comparison_page(runs, title))


def comparison_json(runs: list[Explained], paths: list[Path]) -> str:
    """One object per run: its path, model, method and ``explain``'s items (the single-run JSON schema)."""
    import json

    from docattn.explain.attention import jsonable

    ready = [
        {"run": str(p), "name": r.name, "model": r.model, "method": r.method, "items": jsonable(r.items)}
        for r, p in zip(runs, paths)
    ]
    return json.dumps(ready, ensure_ascii=False, indent=1, default=str)
