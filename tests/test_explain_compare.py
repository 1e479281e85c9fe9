"""`docattn explain RUN_A RUN_B`: the same documents explained by two runs, side by side in one report."""

from __future__ import annotations

import html
import json
import re
import warnings

import pytest
from test_explain_linear import make_splits, tiny_classifier
from typer.testing import CliRunner

from docattn.cli import app
from docattn.data import synthetic


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A hierarchical attention run (HAN) and a bag-of-words one (naive Bayes), and their test documents."""
    splits = make_splits(3)
    root = tmp_path_factory.mktemp("compare")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("han", "nb"):
            tiny_classifier(name, splits).save(root / name)
    return root / "han", root / "nb", synthetic.write_jsonl(splits["test"], root / "test.jsonl")


def _explain(*args):
    res = CliRunner().invoke(app, ["explain", *map(str, args)])
    assert res.exit_code == 0, res.output
    return res


def _cells(page: str) -> list[list[dict]]:
    """Per document row, per run column: the run's caption, the prediction shown and the shaded words."""
    rows = []
    for row in page.split('<div class="row">')[1:]:
        cols = []
        for col in row.split('<div class="col">')[1:]:
            caption = re.search(r'<div class="run"><bdi>(.*?)</bdi>', col).group(1)
            predicted = re.search(r"predicted <b><bdi>(.*?)</bdi></b>", col).group(1)
            words = re.findall(r'<span class="w[^"]*" data-w="([0-9.]+)"[^>]*>(.*?)</span>', col)
            cols.append({"run": caption, "prediction": html.unescape(predicted), "words": words})
        rows.append(cols)
    return rows


def _tokens(item):
    return [t for s in item["sentences"] for t in s["tokens"]] if item["layout"] == "hierarchical" else item["tokens"]


def test_two_runs_side_by_side(runs, tmp_path):
    han, nb, data = runs
    page_path, js = tmp_path / "both.html", tmp_path / "both.json"
    _explain(han, nb, "--data", data, "--n", "4", "--html", page_path, "--json", js)
    explained = json.loads(js.read_text())
    assert [(r["name"], r["model"], r["method"]) for r in explained] == [
        ("han", "han", "attention"),
        ("nb", "nb", "linear"),
    ]
    ids = [it["id"] for it in explained[0]["items"]]
    assert len(ids) == 4 and [it["id"] for it in explained[1]["items"]] == ids  # the same documents, in order
    page = page_path.read_text()
    assert page.count('class="doc"') == 8 and "<script src" not in page
    rows = _cells(page)
    assert len(rows) == 4
    for d, row in enumerate(rows):
        assert [c["run"] for c in row] == ["han", "nb"]
        for cell, run in zip(row, explained):
            item = run["items"][d]
            assert cell["prediction"] == str(item["prediction"])  # each run's own prediction
            assert [html.unescape(w) for _, w in cell["words"]] == _tokens(item)  # and its heatmap, every word
            assert any(float(w) > 0 for w, _ in cell["words"])
    # each column is what that run alone shows for these documents
    alone = tmp_path / "han.json"
    _explain(han, "--data", data, "--n", "4", "--html", tmp_path / "han.html", "--json", alone)
    assert json.loads(alone.read_text()) == explained[0]["items"]
    assert "The runs predict the same class for" in page


def test_methods_per_run_and_what_does_not_apply(runs, tmp_path):
    han, nb, data = runs
    out = tmp_path / "r.html"
    js = tmp_path / "r.json"
    _explain(han, nb, "--data", data, "--n", "2", "--html", out, "--json", js, "--method", "gradient_x_input,linear")
    assert [r["method"] for r in json.loads(js.read_text())] == ["gradient_x_input", "linear"]
    assert "gradient &times; input toward" in out.read_text()
    for method, message in [
        ("linear", "model 'han' has no linear explanation; its methods: attention, gradient_x_input"),
        ("attention,linear,linear", "--method takes one method, or one per run (2)"),
        ("saliency", "unknown explanation method 'saliency'"),
    ]:
        res = CliRunner().invoke(app, ["explain", str(han), str(nb), "--data", str(data), "--method", method])
        assert res.exit_code != 0 and message in str(res.exception), (method, res.output)
