"""The docattn command: fast help, the model list, the main verbs end to end on one trained run, resume, DDP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_runs import DOCATTN, TINY, invoke_cli, run_cli
from typer.testing import CliRunner

from docattn.cli import _default_reach, app
from docattn.data import synthetic
from docattn.models import get_spec


def test_help_is_fast_and_imports_nothing_heavy():
    heavy = "('torch','lightning','gensim','matplotlib','captum','sklearn')"
    code = f"import sys, docattn.cli; print([m for m in {heavy} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    t0 = time.perf_counter()
    res = run_cli("--help")
    assert res.returncode == 0 and "train" in res.stdout
    assert time.perf_counter() - t0 < 3.0  # well under a second on an idle machine


def test_bare_command_runs_the_main_job(tmp_path, monkeypatch):
    """`docattn` with no command is the README's main job: demo() called with its own defaults."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(synthetic, "DEFAULT_N_TRAIN", 240)
    monkeypatch.setattr(synthetic, "DEFAULT_N_TEST", 60)
    res = CliRunner().invoke(app, [])
    assert res.exit_code == 0, res.output
    assert "test accuracy" in res.output and "explanations.json" in res.output
    assert "next: docattn predict runs/demo FILE" in res.output
    run = tmp_path / "runs" / "demo"
    for name in ("train.jsonl", "test.jsonl", "config.json", "model.safetensors", "explanations.json", "report.html"):
        assert (run / name).is_file(), name
    assert len((run / "train.jsonl").read_text().splitlines()) == 240
    # the report names documents as `docattn explain --data runs/demo/test.jsonl` does
    shown = json.loads((run / "explanations.json").read_text())
    first = json.loads((run / "test.jsonl").read_text().splitlines()[0])
    assert shown[0]["id"] == first["id"] and shown[0]["label"] == first["label"]
    res = CliRunner().invoke(app, ["demo", "--model", "nb", "--out", str(tmp_path / "nb")])
    assert res.exit_code != 0 and "has no attention or pooling weights" in str(res.exception)
    assert not (tmp_path / "nb").exists()  # refused before anything was trained or written


def test_models_lists_registry():
    res = CliRunner().invoke(app, ["models"])
    assert res.exit_code == 0
    for name in ("han", "han-ave", "han-max", "hpan", "hsan"):
        assert name in res.stdout
    # each model's default truncation is shown: self-attention never reads more than 1000 positions
    # (and every hierarchical model's padded block is bounded: at most 1,000 sentences of 1,000 words)
    assert "reads by default" in res.stdout and "all of it" in CliRunner().invoke(app, ["models", "fasttext"]).stdout
    assert _default_reach(get_spec("han").training, "hierarchical") == "1,000 sentences, 1,000 words per sentence"
    assert _default_reach(get_spec("hcan").training, "hierarchical") == "1,000 sentences, 1,000 words per sentence"
    assert _default_reach(get_spec("can-two-target").training, "flat") == "1,000 tokens"
    assert (
        _default_reach({"max_sentences": 15, "max_words": 20}, "hierarchical") == "15 sentences, 20 words per sentence"
    )
    # the sizes the auto recipe lays, a setting that holds from SMALL_DATA on said once
    wide = {"COLUMNS": "600"}
    hcan = CliRunner().invoke(app, ["models", "hcan"], env=wide).stdout
    assert "from 2,000 training documents on (recipe auto) embeddings word2vec+wordllama" in hcan
    assert "10,000" not in hcan
    han = CliRunner().invoke(app, ["models", "han"], env=wide).stdout
    assert "from 10,000 training documents (recipe auto) hidden_size 100" in han and "documents on" not in han
    assert "under 1,000,000 training tokens (recipe auto) embeddings word2vec+wordllama" in han
    assert "under 2,000 training documents (recipe auto) word_dropout 0.3;" in han
    # CSPAN's large-data width widens its CPU configuration, so the listing says it holds on a CPU only
    cspan = CliRunner().invoke(app, ["models", "cspan"], env=wide).stdout
    assert "from 10,000 training documents (recipe auto, on a CPU) embedding_dim 128" in cspan
    # SANet's table under 1M tokens stops where its sizes by documents keep word2vec alone
    sanet = CliRunner().invoke(app, ["models", "sanet"], env=wide).stdout
    small = (
        "under 2,000 training documents (recipe auto) word_dropout 0.3, embeddings word2vec, warmup_fraction 0.1, "
        "optimizer adamw, weight_decay 0.5;"
    )
    assert small in sanet
    table = "under 1,000,000 training tokens (recipe auto) embeddings word2vec+wordllama from 2,000 documents on"
    assert table in sanet
    res = CliRunner().invoke(app, ["models", "nosuch"])
    assert res.exit_code != 0 and "no registered model matches 'nosuch'" in str(res.exception)


def test_embeddings_help_names_every_family_the_recipe_gives_the_table():
    """``train --help`` says which families read the packaged table by default: each family whose sizes (by
    documents or by tokens) lay it, and no other, so the help cannot drift from the catalogue."""
    from docattn.cli.train import Embeddings
    from docattn.models import PACKAGED_BESIDE
    from docattn.models.catalogue import CATALOGUE

    families = ("han", "hpan", "hsan", "hcan", "sanet", "cspan")
    default = Embeddings.__metadata__[0].show_default
    named = {word for word in default.replace(",", " ").split() if word in families}
    with_table = {
        family
        for family in families
        for sizes in ("small_sizes", "beyond_small_sizes", "few_tokens_sizes")
        if getattr(CATALOGUE[family], sizes).get("embeddings") == PACKAGED_BESIDE["embeddings"]
    }
    assert named == with_table == {"han", "hpan", "hsan", "cspan", "sanet", "hcan"}


def _write(path: Path, corpus, with_labels=True):
    with open(path, "w", encoding="utf-8") as f:
        for t, y in zip(corpus.texts, corpus.labels):
            f.write(json.dumps({"text": t, **({"label": y} if with_labels else {})}) + "\n")


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    sp = synthetic.make_splits(n_train=400, n_test=100, seed=1)
    _write(tmp / "train.jsonl", sp["train"])
    _write(tmp / "test.jsonl", sp["test"])
    env = {**os.environ, "DOCATTN_CACHE": str(tmp / "cache")}
    res = run_cli(
        "train",
        "--train",
        str(tmp / "train.jsonl"),
        "--test",
        str(tmp / "test.jsonl"),
        "--out",
        str(tmp / "run"),
        "--epochs",
        "1",
        *TINY,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    return tmp


def test_train_writes_run_directory(trained_run):
    run = trained_run / "run"
    for name in ("config.json", "vocab.json", "model.safetensors", "metrics.csv"):
        assert (run / name).exists(), name
    results = json.loads((run / "config.json").read_text())["results"]
    assert results["test"]["documents"] == 100


def test_evaluate_json_and_table(trained_run):
    res = CliRunner().invoke(
        app, ["evaluate", str(trained_run / "run"), "--data", str(trained_run / "test.jsonl"), "--json"]
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["documents"] == 100 and 0 <= report["accuracy"] <= 1
    assert len(report["confusion_matrix"]) == len(report["per_class"])
    table = CliRunner().invoke(app, ["evaluate", str(trained_run / "run"), "--data", str(trained_run / "test.jsonl")])
    assert "macro-F1" in table.stdout


def test_predict_from_file_and_stdin(trained_run):
    res = run_cli("predict", str(trained_run / "run"), str(trained_run / "test.jsonl"))
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert res.returncode == 0 and len(lines) == 100
    assert abs(sum(lines[0]["probabilities"].values()) - 1) < 1e-4
    assert set(lines[0]) == {"id", "prediction", "probabilities"}  # "label" is the gold label everywhere else
    assert lines[0]["prediction"] == max(lines[0]["probabilities"], key=lines[0]["probabilities"].get)
    res = run_cli("predict", str(trained_run / "run"), "-", input="a great phone\n\nthe screen was bad\n")
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.splitlines()) == 2  # the empty line is not a document


def test_predict_needs_no_labels_and_reads_jsonl_from_stdin(trained_run):
    (trained_run / "unk.jsonl").write_text(json.dumps({"text": "a great phone", "label": "never seen"}) + "\n")
    res = run_cli("predict", str(trained_run / "run"), str(trained_run / "unk.jsonl"))
    assert res.returncode == 0, res.stderr
    texts = ["a great phone . i love it", "the screen was bad . sad"]
    piped = run_cli("predict", str(trained_run / "run"), input="".join(json.dumps({"text": t}) + "\n" for t in texts))
    plain = run_cli("predict", str(trained_run / "run"), input="".join(t + "\n" for t in texts))
    assert piped.returncode == 0 and plain.returncode == 0, piped.stderr + plain.stderr
    label = lambda out: [json.loads(line)["probabilities"] for line in out.splitlines()]
    assert label(piped.stdout) == label(plain.stdout)  # the JSON lines' texts, not the raw JSON


def test_predict_ignores_missing_labels_and_explain_shows_unseen_ones(trained_run):
    """Gold labels are not needed to predict: an empty or absent one is no error; explain shows them as given."""
    (trained_run / "gaps.csv").write_text("text,label\na great phone,\nthe screen was bad,neg\n")
    (trained_run / "gaps.jsonl").write_text(
        '{"text": "a great phone", "label": "pos"}\n{"text": "the screen was bad"}\n'
    )
    for name in ("gaps.csv", "gaps.jsonl"):
        res = CliRunner().invoke(app, ["predict", str(trained_run / "run"), str(trained_run / name)])
        assert res.exit_code == 0, res.output
        assert [json.loads(line)["id"] for line in res.stdout.splitlines()] == (
            ["2", "3"] if name.endswith("csv") else ["1", "2"]
        )
    (trained_run / "unseen.csv").write_text("text,label\na great phone,never seen\n")
    js = trained_run / "unseen.json"
    res = CliRunner().invoke(
        app,
        [
            "explain",
            str(trained_run / "run"),
            "--data",
            str(trained_run / "unseen.csv"),
            "--html",
            str(trained_run / "unseen.html"),
            "--json",
            str(js),
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(js.read_text())[0]["label"] == "never seen"
    res = run_cli("explain", str(trained_run / "run"), "--data", str(trained_run / "unseen.csv"), "--n", "0")
    assert res.returncode == 2 and "--n" in res.stderr and "Traceback" not in res.stderr


def test_evaluate_names_the_line_of_an_unseen_label(trained_run):
    (trained_run / "late.csv").write_text("text,label\na great phone,positive\nthe screen was bad,meh\n")
    res = run_cli("evaluate", str(trained_run / "run"), "--data", str(trained_run / "late.csv"))
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "late.csv:3: the document has label 'meh', unseen in training" in res.stderr, res.stderr


def test_sigterm_mid_training_exits_143_and_says_how_to_resume(trained_run, tmp_path):
    """Lightning ends a SIGTERM'd fit with exit status 0; a script must not take that for success."""
    import signal

    run = tmp_path / "run"
    env = {**os.environ, "DOCATTN_CACHE": str(trained_run / "cache")}
    proc = subprocess.Popen(
        [*DOCATTN, "train", "--train", str(trained_run / "train.jsonl"), "--out", str(run), "--epochs", "500", *TINY],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while not (run / "checkpoints" / "last.ckpt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert "stopped by SIGTERM in epoch" in err and "--resume" in err and "Traceback" not in err
    res = run_cli(
        "train", "--train", str(trained_run / "train.jsonl"), "--out", str(run), "--resume", "--epochs", "1", env=env
    )
    # one epoch was done (or, on a fast machine, more): nothing is left to resume with --epochs 1
    assert res.returncode == 2 and "has already trained" in res.stderr and "give --epochs" in res.stderr, res.stderr[
        -2000:
    ]
    assert "Traceback" not in res.stderr


def test_resume_continues_with_the_runs_own_settings(trained_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained_run / "run", run)
    config = json.loads((run / "config.json").read_text())
    config["training"]["seed"] = 3  # as if trained with --seed 3: a resume without --seed keeps it
    sized = {"hidden_size": config["hparams"]["hidden_size"]}  # as if the recipe had sized the width to the data
    config["results"]["recipe"]["hparams"] = sized
    (run / "config.json").write_text(json.dumps(config))
    env = {**os.environ, "DOCATTN_CACHE": str(trained_run / "cache")}
    train = ["train", "--train", str(trained_run / "train.jsonl"), "--out", str(run), "--resume"]
    res = run_cli(*train, "--model", "hpan", env=env)
    assert res.returncode == 2 and "'han' run" in res.stderr and "Traceback" not in res.stderr
    res = run_cli(*train, "--set", "hidden_size=4", env=env)
    assert res.returncode == 2 and "hidden_size" in res.stderr and "Traceback" not in res.stderr
    res = run_cli(*train, "--seed", "5", env=env)
    assert res.returncode == 2 and "seed" in res.stderr
    before = json.loads((run / "config.json").read_text())
    res = run_cli(*train, "--epochs", "2", env=env)  # no --model, no sizes, no seed: the run's own
    assert res.returncode == 0, res.stderr[-2000:]
    after = json.loads((run / "config.json").read_text())
    assert after["model"] == before["model"] and after["hparams"] == before["hparams"]
    assert after["results"]["embeddings"] == "random" and after["training"]["max_epochs"] == 2
    assert after["training"]["seed"] == 3 and after["results"]["recipe"]["hparams"] == sized
    assert "resumed from epoch 1, the last one finished: training goes on with epoch 2" in res.stderr
    epochs = [int(line.split(",")[0]) for line in (run / "metrics.csv").read_text().splitlines()[1:]]
    assert epochs == sorted(epochs) and epochs[-1] == 1 and epochs.count(0) == before["training"]["val_per_epoch"]


def test_bad_training_inputs_are_one_line_errors(trained_run, tmp_path):
    """An --out file, unlabelled validation data, a --valid source without a valid split, unlabelled test data."""
    env = {**os.environ, "DOCATTN_CACHE": str(trained_run / "cache")}
    base = ["train", "--train", str(trained_run / "train.jsonl"), "--epochs", "1", *TINY]
    (tmp_path / "afile").write_text("x")
    texts = [json.loads(line)["text"] for line in (trained_run / "test.jsonl").read_text().splitlines()[:5]]
    (tmp_path / "unlabelled.txt").write_text("\n".join(texts) + "\n")
    (tmp_path / "src" / "train" / "a").mkdir(parents=True)
    (tmp_path / "src" / "test" / "a").mkdir(parents=True)
    for split in ("train", "test"):
        (tmp_path / "src" / split / "a" / "1.txt").write_text(texts[0])
    cases = [
        (["--out", str(tmp_path / "afile")], "is a file; give a folder"),
        (["--out", str(tmp_path / "r1"), "--valid", str(tmp_path / "unlabelled.txt")], "documents have no labels"),
        (["--out", str(tmp_path / "r2"), "--valid", str(tmp_path / "src")], "but no valid split"),
    ]
    for extra, word in cases:
        res = invoke_cli(*base, *extra, env=env)
        assert res.returncode == 2 and "Traceback" not in res.stderr and word in res.stderr, (extra, res.stderr[-1500:])
    res = run_cli(*base, "--out", str(tmp_path / "r3"), "--test", str(tmp_path / "unlabelled.txt"), env=env)
    assert res.returncode == 0 and "test documents have no labels" in res.stderr, res.stderr[-1500:]


def test_train_says_why_it_stopped_and_what_it_ignores(trained_run, tmp_path):
    env = {**os.environ, "DOCATTN_CACHE": str(trained_run / "cache")}
    res = run_cli(
        "train",
        "--train",
        str(trained_run / "train.jsonl"),
        "--out",
        str(tmp_path / "r"),
        "--epochs",
        "50",
        "--patience",
        "1",
        "--max-tokens",
        "5",
        *TINY,
        env=env,
    )
    assert res.returncode == 0, res.stderr[-1500:]
    assert "stopped early, after 1 validation(s) without improvement" in res.stderr
    assert "--max-tokens has no effect on 'han'" in res.stderr
    res = run_cli(
        "train",
        "--model",
        "nb",
        "--train",
        str(trained_run / "train.jsonl"),
        "--out",
        str(tmp_path / "nb"),
        "--epochs",
        "3",
        "--lr",
        "0.1",
        "--min-count",
        "2",
        env=env,
    )
    assert res.returncode == 0, res.stderr[-1500:]
    assert "note: lr, max_epochs have no effect on 'nb', which is fitted in one call" in res.stderr
    assert "its own options (--set KEY=VALUE): " in res.stderr and "alpha=0.1" in res.stderr


def test_bad_training_options_are_one_line_errors(trained_run):
    env = {**os.environ, "DOCATTN_CACHE": str(trained_run / "cache")}
    base = [
        "train",
        "--train",
        str(trained_run / "train.jsonl"),
        "--out",
        str(trained_run / "bad"),
        "--epochs",
        "1",
        *TINY,
    ]
    cases = [
        (["--precision", "foo"], "precision"),
        (["--strategy", "nonsense"], "strategy"),
        (["--set", "hidden_size=-1"], "hidden_size"),
        (["--set", "min_count=abc"], "min_count must be a whole number"),
        (["--set", "lowercase=maybe"], "lowercase must be true or false"),
        (["--accelerator", "tpu"], "training options"),
        (["--max-time", "-5"], "max_time must be above 0"),
        (["--set", "weight_decay=-1"], "weight_decay must be >= 0"),
        (["--lr", "nan"], "lr must be a number above 0, got nan"),
        (["--lr", "inf"], "lr must be a number above 0"),
        (["--epochs", "0"], "max_epochs must be at least 1, got 0"),
        (["--batch-size", "0"], "batch_size must be at least 1, got 0"),
    ]
    import torch

    if not torch.cuda.is_available():
        cases.append((["--accelerator", "gpu"], "GPU"))
    # the first case as a user's shell runs it; the others in this process, which raises any traceback
    for i, (extra, word) in enumerate(cases):
        res = (run_cli if i == 0 else invoke_cli)(*base, *extra, env=env)
        assert res.returncode == 2 and "Traceback" not in res.stderr and word in res.stderr, (extra, res.stderr[-1500:])
    for extra, word in (
        (["--lr", "0.1,abc"], "--lr"),
        (["--lr", ","], "--lr"),
        (["--lr", "0.1,1e-1"], "more than once"),
        (["--model", "logreg"], "learning rate"),
    ):
        res = invoke_cli(
            "tune", "--train", str(trained_run / "train.jsonl"), "--out", str(trained_run / "t"), *extra, env=env
        )
        assert res.returncode == 2 and word in res.stderr, (extra, res.stderr[-1500:])


def test_explain_writes_html_and_json(trained_run):
    html, js = trained_run / "r.html", trained_run / "w.json"
    res = CliRunner().invoke(
        app,
        [
            "explain",
            str(trained_run / "run"),
            "--data",
            str(trained_run / "test.jsonl"),
            "--n",
            "5",
            "--html",
            str(html),
            "--json",
            str(js),
        ],
    )
    assert res.exit_code == 0, res.output
    assert html.read_text().count('class="doc"') == 5
    assert len(json.loads(js.read_text())) == 5


@pytest.mark.slow
def test_ddp_two_cpu_processes_match_one(tmp_path):
    """2-process data parallel training (gloo) reaches the quality of 1 process.

    Each process takes half the batches, so 2 processes make half the optimizer steps per epoch:
    8 epochs let both converge (at 6, 2 processes were still climbing: 0.925 validation accuracy).
    """
    sp = synthetic.make_splits(n_train=2000, n_test=400, seed=2)
    _write(tmp_path / "train.jsonl", sp["train"])
    _write(tmp_path / "test.jsonl", sp["test"])
    env = {**os.environ, "DOCATTN_CACHE": str(tmp_path / "cache")}
    acc = {}
    for devices in ("1", "2"):
        out = tmp_path / f"run{devices}"
        extra = ["--strategy", "ddp"] if devices == "2" else []
        res = run_cli(
            "train",
            "--train",
            str(tmp_path / "train.jsonl"),
            "--test",
            str(tmp_path / "test.jsonl"),
            "--out",
            str(out),
            "--epochs",
            "8",
            "--accelerator",
            "cpu",
            "--devices",
            devices,
            *extra,
            "--embeddings",
            "random",
            "--min-count",
            "2",
            "--set",
            "progress=false",
            # the paper's HAN: the auto recipe's dropout and label smoothing slow this toy run, where 2 processes
            # make half the steps
            "--recipe",
            "paper",
            env=env,
        )
        assert res.returncode == 0, res.stderr[-3000:]
        acc[devices] = json.loads((out / "config.json").read_text())["results"]["test"]["accuracy"]
    assert acc["2"] >= 0.9 and abs(acc["2"] - acc["1"]) <= 0.05, acc


def test_explain_draws_its_documents_at_random_unless_told_first(trained_run):
    shown = {}
    for extra in ([], ["--seed", "1"], ["--first"]):
        js = trained_run / f"pick{len(extra)}{''.join(extra)}.json"
        res = CliRunner().invoke(
            app,
            [
                "explain",
                str(trained_run / "run"),
                "--data",
                str(trained_run / "test.jsonl"),
                "--n",
                "5",
                "--html",
                str(trained_run / "pick.html"),
                "--json",
                str(js),
                *extra,
            ],
        )
        assert res.exit_code == 0, res.output
        shown[tuple(extra)] = [item["id"] for item in json.loads(js.read_text())]
    assert shown[("--first",)] == ["1", "2", "3", "4", "5"]
    drawn = shown[()]
    assert drawn != shown[("--first",)] and drawn != shown[("--seed", "1")]
    assert drawn == sorted(drawn, key=int)  # shown in file order


def test_train_writes_a_model_card_it_owns(trained_run):
    run = trained_run / "run"
    card = (run / "README.md").read_text(encoding="utf-8")
    assert card.startswith("# ") and "han" in card and "validation" in card.lower()
    assert "README.md" in json.loads((run / ".docattn-files.json").read_text())


def test_a_readme_of_the_users_own_is_never_replaced_by_the_card(trained_run, tmp_path):
    """The card is a run file like config.json: a README.md docattn did not write is refused before any write."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "README.md").write_text("my notes\n")
    env = {**os.environ, "DOCATTN_CACHE": str(trained_run / "cache")}
    res = run_cli(
        "train", "--train", str(trained_run / "train.jsonl"), "--out", str(out), "--overwrite", *TINY, env=env
    )
    assert res.returncode == 2 and "README.md is not docattn's" in res.stderr, res.stderr
    assert (out / "README.md").read_text() == "my notes\n" and sorted(p.name for p in out.iterdir()) == ["README.md"]


def test_export_writes_what_the_onnx_predictor_reads(trained_run, tmp_path):
    pytest.importorskip("onnxruntime")
    from docattn.classifier import DocumentClassifier
    from docattn.onnx import OnnxPredictor

    res = run_cli("export", str(trained_run / "run"), "--out", str(tmp_path / "onnx"))
    assert res.returncode == 0, res.stderr
    texts = [json.loads(line)["text"] for line in (trained_run / "test.jsonl").read_text().splitlines()[:20]]
    expected = DocumentClassifier.load(trained_run / "run").predict_proba(texts)
    assert np.abs(OnnxPredictor(tmp_path / "onnx").predict_proba(texts) - expected).max() < 1e-5
    res = run_cli("export", str(trained_run / "run"), "--format", "torchscript", "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and "onnx is the only export format" in res.stderr and not (tmp_path / "x").exists()


def test_serve_hands_its_options_to_the_server(trained_run, monkeypatch):
    import docattn.serve

    seen = {}
    monkeypatch.setattr(docattn.serve, "serve", lambda runs, **options: seen.update(runs=runs, **options))
    res = CliRunner().invoke(app, ["serve", str(trained_run / "run"), "--port", "8123", "--api-key", "k"])
    assert res.exit_code == 0, res.output
    assert seen == {
        "runs": [trained_run / "run"],
        "host": "127.0.0.1",
        "port": 8123,
        "workers": 1,
        "api_key": "k",
        "micro_batch_ms": 5.0,
        "model_processes": None,  # serve() decides: one per usable core, shared among the workers
    }
    res = CliRunner().invoke(app, ["serve", str(trained_run / "run"), "--model-processes", "0"])
    assert res.exit_code == 0 and seen["model_processes"] == 0


def test_faithfulness_is_kept_in_the_run_and_reported_by_its_card(trained_run):
    run = trained_run / "run"
    res = run_cli(
        "faithfulness",
        str(run),
        "--data",
        str(trained_run / "test.jsonl"),
        "--n",
        "10",
        "--methods",
        "attention,random",
        "--json",
    )
    assert res.returncode == 0, res.stderr
    saved = json.loads((run / "faithfulness.json").read_text())
    assert saved == json.loads(res.stdout) and "faithfulness.json" in json.loads(
        (run / ".docattn-files.json").read_text()
    )
    card = (run / "README.md").read_text()
    assert "ERASER faithfulness on 10 documents" in card and "| attention |" in card
