"""Explanations of tiny models: the HTML report, figures, data-set statistics, faithfulness, the CLI commands."""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from docattn.classifier import DocumentClassifier, to_corpus
from docattn.cli import app
from docattn.data import synthetic
from docattn.explain.tokens import fit_to_limits

# tiny hyper-parameters of the models used here (fast on two shared CPU cores)
TINY = {
    "han": dict(embedding_dim=16, hidden_size=8, context_dim=8),
    "sanet": dict(embedding_dim=16, d_model=16),
    "hcan-two-target": dict(embedding_dim=16, d_model=16, heads=2),
    "can-two-target": dict(embedding_dim=16, d_model=16, heads=2),
    "cspan": dict(embedding_dim=16, queries=3),
    "han-ave": dict(embedding_dim=16, hidden_size=8),
    "han-max": dict(embedding_dim=16, hidden_size=8),
    "bilstm": dict(embedding_dim=16, hidden_size=8),
    "fasttext": dict(embedding_dim=16),
}


def subprocess_cli(*args):
    """The installed CLI in a child process: exit status and stderr as a user sees them."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "docattn.cli", *args], capture_output=True, text=True, timeout=300)


# ---------------------------------------------------------------- tiny models


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Two shared cores: one intra-op thread per test process avoids oversubscription stalls."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def splits():
    return synthetic.make_splits(n_train=300, n_test=40, seed=5)


def _build(name: str, splits, tmp_path_factory, epochs: int = 0):
    """A classifier for ``name`` on the synthetic splits, trained ``epochs`` times with a plain loop, saved."""
    from docattn.data.batching import BucketBatchSampler, bucket_keys
    from docattn.data.prepare import prepare
    from docattn.models import create_model
    from docattn.training.inference import make_batch

    hp = TINY[name]
    clf = DocumentClassifier(name, min_count=2, **hp)
    data = prepare(to_corpus(splits["train"].sentences, splits["train"].labels), None, None, clf.data_settings)
    clf.vocab, clf.labels = data.vocab, data.labels
    torch.manual_seed(0)
    clf.model = create_model(name, vocab_size=len(data.vocab), num_classes=len(data.labels), **hp)
    enc = data.splits["train"]
    opt = torch.optim.Adam(clf.model.parameters(), lr=1e-2)
    clf.model.train()
    for epoch in range(epochs):
        for docs in BucketBatchSampler(bucket_keys(enc, clf.model.layout), 32, shuffle=True, seed=epoch):
            batch = make_batch(enc, docs, clf.model.layout, clf.limits)
            loss = torch.nn.functional.cross_entropy(clf.model(batch).logits, batch.labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
    clf.model.eval()
    clf.results = {}
    run = tmp_path_factory.mktemp(name) / "run"
    clf.save(run)
    return clf, run


@pytest.fixture(scope="module")
def han(splits, tmp_path_factory):
    return _build("han", splits, tmp_path_factory, epochs=1)


@pytest.fixture(scope="module")
def test_file(splits, tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "test.jsonl"
    synthetic.write_jsonl(splits["test"], path)
    return path


@pytest.fixture(scope="module")
def self_attention(splits, tmp_path_factory):
    """An untrained tiny self-attention model (its matrices exist from the first forward), saved as a run."""
    from docattn.models import list_models

    available = [m for m in ("sanet", "hcan-two-target", "can-two-target", "cspan") if m in list_models()]
    if not available:
        pytest.skip("no self-attention model (sanet, hcan-*, can-*, cspan) is registered yet")
    return _build(available[0], splits, tmp_path_factory)


# ---------------------------------------------------------------- HTML report


class _Report(HTMLParser):
    """Per document: (view name, [(token, data-w, data-p)]) blocks, sentence weights, and every external reference."""

    def __init__(self):
        super().__init__()
        self.docs, self.external, self.sentence_weights = [], [], []
        self._stack, self._span = [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href"):
            if k in a and (a[k] or "").lstrip().lower().startswith(("http:", "https:", "//")):
                self.external.append((tag, a[k]))
        if tag == "link" or (tag == "script" and "src" in a):
            self.external.append((tag, a))
        classes = (a.get("class") or "").split()
        if tag == "div":
            self._stack.append(classes)
            if "doc" in classes:
                self.docs.append([["attention", []]])
            elif "view" in classes:
                if self.docs[-1][-1][1]:
                    self.docs[-1].append([a["data-view"], []])
                else:
                    self.docs[-1][-1][0] = a["data-view"]
            elif "sent" in classes:
                self.sentence_weights.append(float(a["data-weight"]))
        elif tag == "span" and "w" in classes:
            self._span = [None, float(a["data-w"]), float(a["data-p"])]

    def handle_endtag(self, tag):
        if tag == "div" and self._stack:
            self._stack.pop()
        if tag == "span" and self._span is not None:
            self.docs[-1][-1][1].append(tuple(self._span))
            self._span = None

    def handle_data(self, data):
        if self._span is not None:
            self._span[0] = (self._span[0] or "") + data


def _tokens(item):
    return [t for s in item["sentences"] for t in s["tokens"]] if item["layout"] == "hierarchical" else item["tokens"]


def _check_report(path, items):
    text = path.read_text(encoding="utf-8")
    parser = _Report()
    parser.feed(text)
    assert parser.external == []
    assert "@import" not in text and "url(" not in text
    assert len(parser.docs) == len(items)
    for blocks, item in zip(parser.docs, items):
        assert [name for name, _ in blocks] == ["attention"] + [v["name"] for v in item.get("views", [])]
        for _, spans in blocks:
            assert [s[0] for s in spans] == _tokens(item)  # every token, in order, in every view
            assert all(0.0 <= w <= 1.0 and 0.0 <= p <= 1.0 for _, w, p in spans)
    assert all(0.0 <= w <= 1.0 for w in parser.sentence_weights)
    return parser


def test_html_report_is_self_contained_and_complete(han, splits, tmp_path):
    from docattn.explain.html import write_html

    clf, _ = han
    texts = splits["test"].sentences[:5] + [['Tom\'s <b>bold</b> & "quoted" text, naïve café!']]
    items = clf.explain(texts)
    parser = _check_report(write_html(items, tmp_path / "r.html", title="<t>"), items)
    assert any(w > 0 for _, spans in parser.docs[0] for _, w, _ in spans)


def test_unread_words_are_said_and_greyed_not_shown_as_ignored(self_attention, han, splits, tmp_path):
    """Past a truncation limit the model never read a word: the JSON says how much it read, the page greys the rest."""
    import copy

    from docattn.explain.html import write_html

    long_doc = [" ".join(["great"] * 30) + ".", "Fine.", "Bad.", "Good."]
    clf, _ = han
    clf = copy.copy(clf)
    clf.data_settings = copy.copy(clf.data_settings)
    clf.data_settings.max_sentences, clf.data_settings.max_words = 2, 10
    item = clf.explain([long_doc])[0]
    assert (item["sentences_read"], item["sentence_count"]) == (2, 4) and len(item["sentences"]) == 2
    assert [s["words_read"] for s in item["sentences"]] == [10, 2]
    page = write_html([item], tmp_path / "h.html").read_text()
    assert (
        "read the first 2 of 4 sentences" in page and page.count('class="w unread"') == 21
    )  # 30 words and '.' past 10
    flat, _ = self_attention
    if flat.model.layout != "flat":
        return
    flat = copy.copy(flat)
    flat.data_settings = copy.copy(flat.data_settings)
    flat.data_settings.max_tokens = 7
    item = flat.explain([long_doc])[0]
    assert item["tokens_read"] == 7 and len(item["tokens"]) == 37 and sum(item["token_weights"][7:]) == 0
    page = write_html([item], tmp_path / "f.html").read_text()
    assert "read the first 7 of 37 words" in page and page.count('class="w unread"') == 30


def test_html_views_per_head_or_query(splits, tmp_path_factory, tmp_path):
    from docattn.explain.html import add_attention_views, write_html
    from docattn.models import list_models

    name = next((m for m in ("hcan-two-target", "cspan", "can-two-target") if m in list_models()), None)
    if name is None:
        pytest.skip("no multi-head / multi-query model (hcan-*, can-*, cspan) is registered yet")
    clf, _ = _build(name, splits, tmp_path_factory)
    corpus = splits["test"].subset(range(3))
    items = add_attention_views(clf.explain(corpus), clf, corpus)
    assert len(items[0]["views"]) in (TINY[name].get("heads", 0), TINY[name].get("queries", 0))
    _check_report(write_html(items, tmp_path / "views.html"), items)


# ---------------------------------------------------------------- figures


def test_attention_matrix_figures(self_attention, splits, tmp_path, test_file):
    from docattn.explain.collect import document_matrices
    from docattn.explain.plots import plot_attention_matrix

    clf, run = self_attention
    short = int(
        np.argmin([sum(len(s.split()) for s in doc) for doc in splits["test"].sentences])
    )  # fewer labels to draw
    mats = document_matrices(clf, splits["test"], short)
    assert mats and all(m["matrix"].shape == (len(m["tokens"]),) * 2 for m in mats)
    assert mats[0]["tokens"][:3] == " ".join(splits["test"].sentences[short]).split()[:3]
    svg = plot_attention_matrix(mats[0]["matrix"][:6, :6], mats[0]["tokens"][:6], tmp_path / "m.svg", "test")
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
    res = CliRunner().invoke(
        app,
        ["attention-matrix", str(run), "--data", str(test_file), "--doc", str(short), "--out", str(tmp_path / "figs")],
    )
    assert res.exit_code == 0, res.output
    files = sorted((tmp_path / "figs").glob("*.png"))
    assert len(files) == len(mats) >= 1
    assert all(f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in files)
    from docattn.data.readers import read_corpus

    doc_id = read_corpus(test_file).ids[short]  # the id explain and predict show picks the same document
    res = CliRunner().invoke(
        app,
        ["attention-matrix", str(run), "--data", str(test_file), "--id", str(doc_id), "--out", str(tmp_path / "by-id")],
    )
    assert res.exit_code == 0, res.output
    assert sorted(f.name for f in (tmp_path / "by-id").glob("*.png")) == [f.name for f in files]


def test_words_no_installed_font_covers_get_one_clear_warning(tmp_path):
    """Matplotlib warns per missing glyph and draws boxes; the figure says once what to install."""
    import warnings

    from docattn.explain.plots import _font_families, plot_attention_matrix

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_attention_matrix(np.eye(3), ["这部", "电影", "good"], tmp_path / "cjk.png", "t")
        plot_attention_matrix(np.eye(2), ["good", "film"], tmp_path / "latin.png", "t")
    messages = [str(w.message) for w in caught]
    assert not any("missing from font" in m for m in messages)  # Matplotlib's own, one per glyph, are folded
    has_cjk = any("CJK" in f or "Hei" in f or "Fallback" in f or "Han" in f for f in _font_families())
    said = [m for m in messages if "have no glyph in the fonts found" in m]
    assert len(said) == (0 if has_cjk else 1) and (has_cjk or "cjk.png" in said[0] and "fonts-noto-cjk" in said[0])

    import matplotlib

    with warnings.catch_warnings(record=True) as caught:  # the caller's filters still hold for other warnings
        warnings.simplefilter("ignore")
        plot_attention_matrix(np.eye(3), ["这部", "电影", "good"], tmp_path / "quiet.png", "t")
    assert not [w for w in caught if "have no glyph" not in str(w.message)]
    assert matplotlib.rcParams["font.family"] == matplotlib.rcParamsDefault["font.family"]  # nothing leaks


@pytest.mark.parametrize("name", ["han-ave", "han-max", "bilstm"])
def test_pooling_models_are_explained_by_what_their_pooling_takes(name, splits, tmp_path_factory):
    """HN-MAX: the share of features each position wins; mean pooling: 1/n for every real position."""
    clf, _ = _build(name, splits, tmp_path_factory)
    for item in clf.explain(splits["test"].sentences[:3]):
        if item["layout"] == "hierarchical":
            weights = [s["weight"] for s in item["sentences"]]
            words = [np.asarray(s["word_weights"]) for s in item["sentences"]]
        else:
            weights, words = None, [np.asarray(item["token_weights"])]
        if weights is not None:
            assert abs(sum(weights) - 1) < 1e-5
        for w in words:
            assert abs(w.sum() - 1) < 1e-5 and (w >= 0).all()
            if name != "han-max":
                np.testing.assert_allclose(w, 1 / len(w), rtol=1e-5)


def test_a_model_without_attention_is_explained_linearly_and_refuses_attention(
    splits, tmp_path_factory, test_file, tmp_path
):
    """fastText has no attention: its default explanation is linear; asking for attention is one clear error."""
    _, run = _build("fasttext", splits, tmp_path_factory)
    args = ["explain", str(run), "--data", str(test_file), "--n", "3", "--html", str(tmp_path / "r.html")]
    res = CliRunner().invoke(app, [*args, "--method", "attention"])
    assert res.exit_code != 0 and not (tmp_path / "r.html").exists()
    assert "has no attention explanation; its methods: linear, gradient_x_input, integrated_gradients" in str(
        res.exception
    )
    res = CliRunner().invoke(app, [*args, "--json", str(tmp_path / "w.json")])
    assert res.exit_code == 0, res.output
    assert {it["method"] for it in json.loads((tmp_path / "w.json").read_text())} == {"linear"}


@pytest.mark.parametrize(
    "args, message",
    [
        (["attention-matrix", "--sentence", "foo"], "--sentence takes a sentence index"),
        (["attention-matrix", "--image-format", "bmp"], "--image-format must be one of"),
        (["attention-matrix", "--max-tokens", "-5"], "--max-tokens is the number of words per axis to show (0: all)"),
        (["attention-matrix", "--id", "nope"], "no document with id 'nope'"),
        (["attention-dist", "--word", "film", "--out", "x.txt"], "the figure's name must end in"),
        (["faithfulness", "--percents", "abc"], "--percents takes numbers"),
        (["faithfulness", "--percents", "0,150"], "above 0 and at most 100"),
        (["faithfulness", "--ig-steps", "0"], "--ig-steps must be at least 1"),
        (["explain", "--html", "."], "is a folder; give a file name"),
    ],
)
def test_explain_commands_check_their_options_first(han, test_file, args, message):
    res = subprocess_cli(args[0], str(han[1]), "--data", str(test_file), *args[1:])
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr, res.stderr[-1500:]


def test_hierarchical_options_on_a_flat_model_are_errors(self_attention, test_file, tmp_path):
    if self_attention[0].model.layout == "hierarchical":
        pytest.skip("the registered self-attention model is hierarchical")
    run = str(self_attention[1])
    res = subprocess_cli("attention-matrix", run, "--data", str(test_file), "--sentence", "1", "--out", str(tmp_path))
    assert res.returncode == 2 and "--sentence picks a sentence of a hierarchical model" in res.stderr
    res = subprocess_cli("attention-dist", run, "--data", str(test_file), "--word", "film", "--level", "combined")
    assert res.returncode == 2 and "no sentence level" in res.stderr


def test_explain_writes_json_into_a_new_folder(han, test_file, tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "explain",
            str(han[1]),
            "--data",
            str(test_file),
            "--n",
            "2",
            "--html",
            str(tmp_path / "a" / "r.html"),
            "--json",
            str(tmp_path / "b" / "w.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert len(json.loads((tmp_path / "b" / "w.json").read_text())) == 2
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["w.json"]  # no temporary file left


def test_attention_matrix_says_when_there_is_none(han, test_file, tmp_path):
    res = CliRunner().invoke(
        app, ["attention-matrix", str(han[1]), "--data", str(test_file), "--out", str(tmp_path / "none")]
    )
    assert res.exit_code == 1 and "no self-attention" in res.output


# ---------------------------------------------------------------- data-set level commands


def test_attention_dist(han, test_file, tmp_path):
    fig = tmp_path / "good.png"
    res = CliRunner().invoke(
        app, ["attention-dist", str(han[1]), "--data", str(test_file), "--word", "good", "--out", str(fig), "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["word"] == "good" and fig.exists()
    assert out["overall"]["count"] == sum(s["count"] for s in out["by_label"].values()) > 0
    assert 0.0 <= out["overall"]["quantiles"]["0.05"] <= out["overall"]["mean"] <= out["overall"]["max"] <= 1.0
    assert set(out["by_label"]) == {str(c) for c in han[0].classes_}
    assert sum(out["overall"]["histogram"]) == out["overall"]["count"]
    bad = CliRunner().invoke(app, ["attention-dist", str(han[1]), "--data", str(test_file), "--word", "zzzunseen"])
    assert bad.exit_code != 0


def test_attention_stats(han, test_file):
    res = CliRunner().invoke(app, ["attention-stats", str(han[1]), "--data", str(test_file), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out["attentions"]) == {"word", "sentence"}
    for s in out["attentions"].values():
        assert 0.0 <= s["gini"] <= 1.0 and 0.0 <= s["normalized_entropy"] <= 1.0 + 1e-9 and s["distributions"] > 0
    assert set(out["pruned"]) == {"words", "sentences"}
    assert 0.0 <= out["rationales"]["word_auprc"] <= 1.0  # the synthetic test file carries rationales
    table = CliRunner().invoke(app, ["attention-stats", str(han[1]), "--data", str(test_file)])
    assert table.exit_code == 0 and "Gini" in table.stdout
    for command in (["attention-stats"], ["attention-dist", "--word", "good"], ["faithfulness"]):
        res = CliRunner().invoke(app, [*command, str(han[1]), "--data", str(test_file), "--n", "-1"])
        assert "--n is a number of documents, 0 for all; got -1" in str(res.exception), (command, res.output)


def test_attention_stats_self_attention_diagonality(self_attention, splits):
    from docattn.explain.collect import attention_statistics

    clf, _ = self_attention
    out = attention_statistics(clf, splits["test"].subset(range(8)))
    mats = {k: v for k, v in out["attentions"].items() if v["kind"] == "matrix"}
    assert mats
    for s in mats.values():
        d = [s["diagonality"][str(b)] for b in range(1, 6)]
        assert all(0.0 <= x <= 1.0 for x in d) and d == sorted(d)  # the band widens: never less mass
        u = [s["diagonality_uniform"][str(b)] for b in range(1, 6)]
        assert all(0.0 < x <= 1.0 for x in u) and u == sorted(u)


def test_faithfulness(han, test_file):
    from docattn.explain.scores import attention_scores

    clf, run = han
    res = CliRunner().invoke(
        app, ["faithfulness", str(run), "--data", str(test_file), "--n", "20", "--ig-steps", "4", "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["documents"] == 20 and out["percents"] == [1, 5, 10, 20, 50]
    assert set(out["methods"]) == {"attention", "random", "gradient_x_input", "integrated_gradients"}
    for m in out["methods"].values():
        assert m["available"]
        assert set(m["comprehensiveness"]) == set(m["sufficiency"]) == {"1", "5", "10", "20", "50"}
        assert all(-1.0 <= v <= 1.0 for v in [*m["comprehensiveness"].values(), *m["sufficiency"].values()])
        assert m["aopc_comprehensiveness"] == pytest.approx(np.mean(list(m["comprehensiveness"].values())))
    # gradients rank by the model's own sensitivity: removing their top words must hurt more than random words
    ig, rnd = out["methods"]["integrated_gradients"], out["methods"]["random"]
    assert ig["aopc_comprehensiveness"] > rnd["aopc_comprehensiveness"]
    # the attention ranking is HAN's sqrt(p_sentence) * p_word, aligned with the words explain() shows
    docs = [json.loads(line) for line in test_file.read_text().splitlines()[:3]]
    items = clf.explain([d["sentences"] for d in docs])
    enc = clf.encode([d["sentences"] for d in docs])
    expected = [math.sqrt(s["weight"]) * w for it in items for s in it["sentences"] for w in s["word_weights"]]
    np.testing.assert_allclose(attention_scores(clf, enc), expected, rtol=1e-5, atol=1e-7)
    table = CliRunner().invoke(
        app, ["faithfulness", str(run), "--data", str(test_file), "--n", "5", "--methods", "attention,random"]
    )
    assert table.exit_code == 0 and "AOPC" in table.stdout and "comp" in table.stdout
    first, drawn = (
        json.loads(
            CliRunner()
            .invoke(
                app,
                [
                    "faithfulness",
                    str(run),
                    "--data",
                    str(test_file),
                    "--n",
                    "6",
                    "--seed",
                    "1",
                    "--methods",
                    "random",
                    "--json",
                    *extra,
                ],
            )
            .stdout
        )
        for extra in ([], ["--sample"])
    )
    assert first["documents"] == drawn["documents"] == 6
    assert first["mean_words"] != drawn["mean_words"]  # --sample reads other documents than the first six


def test_integrated_gradients_match_captum(self_attention, splits):
    """The batched hand-written integrated gradients equal Captum's LayerIntegratedGradients on a flat model."""
    from docattn.explain.scores import captum_integrated_gradients, gradient_scores, probabilities

    clf, _ = self_attention
    if clf.model.layout != "flat":
        pytest.skip(f"{clf.model_name} is hierarchical; the Captum cross-check runs on flat models")
    enc = fit_to_limits(clf.encode(splits["test"].subset(range(4))), "flat", clf.limits)
    pred = probabilities(clf, enc).argmax(1)
    mine = gradient_scores(clf, enc, pred, steps=6)
    theirs = captum_integrated_gradients(clf, enc, pred, steps=6)
    np.testing.assert_allclose(mine, theirs, rtol=1e-3, atol=1e-6)
