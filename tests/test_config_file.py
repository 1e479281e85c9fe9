"""Runs from a config file (``docattn train --config``) and ``docattn config show``: TOML keys as the command line
and --set name them, the command line over the file, a run's config.json repeating that run, each value's
source, and one-line errors naming the file, the key and the fix, before anything is written."""

from __future__ import annotations

import json
import os

import pytest
from cli_runs import invoke_cli, run_cli
from typer.testing import CliRunner

from docattn.cli import app
from docattn.cli.train import FILE_KEYS
from docattn.config_file import read_config_file
from docattn.data import synthetic
from docattn.errors import ConfigError

ALIASES = {"epochs": "max_epochs", "val_every": "val_every_n_steps"}
TINY_TOML = """
epochs = 1
embeddings = "random"
min-count = 2

[set]
embedding_dim = 16
hidden_size = 8
context_dim = 8
progress = false
guardrail = false
"""


def _show(*args) -> dict:
    res = CliRunner().invoke(app, ["config", "show", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["options"]


def _write_data(folder) -> None:
    splits = synthetic.make_splits(n_train=240, n_test=60, seed=5)
    for name in ("train", "test"):
        with open(folder / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for text, label in zip(splits[name].texts, splits[name].labels):
                f.write(json.dumps({"text": text, "label": label}) + "\n")


def test_a_toml_file_takes_command_line_names_and_set_options(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        'train = "data/train.csv"\nout = "runs/a"\nbatch-size = 32\nepochs = 3\ntext-col = ["title", "body"]\n'
        "label_col = 0\nmulti-label = true\nlr = 0.01\n[set]\nhidden_size = 50\nword2vec-epochs = 10\n"
    )
    file = read_config_file(path, FILE_KEYS, ALIASES)
    assert file.command == {
        "train": "data/train.csv",
        "out": "runs/a",
        "text_col": "title,body",
        "label_col": "0",
        "multi_label": True,
    }
    assert file.options == {"batch_size": 32, "max_epochs": 3, "lr": 0.01, "hidden_size": 50, "word2vec_epochs": 10}


@pytest.mark.parametrize(
    "text, message",
    [
        ("lr = 0.1\nlr =\n", "not valid TOML (Invalid value (at line 2, column 5)); fix that line"),
        ("epochs = 2\n[set]\nmax_epochs = 3\n", "[set] 'max_epochs' sets 'max_epochs', which 'epochs' sets already"),
        ("lr = 0.1\nlr-x = 1\n[set]\nlr = 0.2\n", "which 'lr' sets already; keep one of them"),
        ("train = 5\n", "'train' must be a string, got 5"),
        ("resume = 1\n", "'resume' must be true or false, got 1"),
        ('set = "x"\n', "'set' must be a table of options"),
    ],
)
def test_a_malformed_file_is_one_error_naming_the_file_and_the_key(tmp_path, text, message):
    path = tmp_path / "run.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_config_file(path, FILE_KEYS, ALIASES)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value) and "\n" not in str(err.value)


def test_bad_keys_and_values_are_refused_in_one_line_before_anything_is_written(tmp_path):
    cases = {
        'trian = "x.jsonl"\n': "unknown key 'trian' for han; did you mean 'train'?",
        "hiden_size = 8\n": "unknown key 'hiden_size' for han; did you mean 'hidden_size'?",
        'lr = "fast"\n': "lr must be a number, got 'fast'",
        "[set]\nbatch_size = 0\n": "batch_size must be at least 1, got 0",
        'logger = "tensorbord"\n': "(did you mean 'tensorboard'?)",
    }
    for i, (text, message) in enumerate(cases.items()):
        path = tmp_path / "run.toml"
        path.write_text(text)
        run = run_cli if i == 0 else invoke_cli  # the first as a shell runs it; the others in this process
        res = run("train", "--config", str(path), "--train", "absent.jsonl", "--out", str(tmp_path / "run"))
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), res.stderr
        assert message in res.stderr, (text, res.stderr)
        assert not (tmp_path / "run").exists()
    res = invoke_cli("train", "--config", str(tmp_path / "absent.toml"))
    assert res.returncode == 2 and f"--config {tmp_path / 'absent.toml'}: no such file" in res.stderr
    (tmp_path / "run.toml").write_text("lr = 0.01\n")
    res = invoke_cli("train", "--config", str(tmp_path / "run.toml"))
    assert res.returncode == 2 and "train needs --train and --out" in res.stderr


def test_config_show_tells_each_value_and_its_source(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('model = "han"\nout = "runs/a"\nepochs = 4\nlr = 0.01\n[set]\nhidden_size = 32\nseed = 3\n')
    shown = _show("--config", str(path), "--set", "lr=0.02", "--set", "min_count=1")
    assert shown["model"] == {"value": "han", "group": "run", "source": "file"}
    assert shown["out"]["value"] == "runs/a" and shown["out"]["source"] == "file"
    assert shown["lr"] == {"value": 0.02, "group": "training", "source": "cli"}  # the command line wins
    assert shown["max_epochs"] == {"value": 4, "group": "training", "source": "file"}
    assert shown["hidden_size"] == {"value": 32, "group": "model", "source": "file"}
    assert shown["min_count"] == {"value": 1, "group": "data", "source": "cli"}
    assert shown["batch_size"]["source"] == "model"  # HAN's registered training settings
    assert shown["momentum"] == {"value": 0.9, "group": "training", "source": "default"}
    assert shown["lowercase"]["group"] == "text" and shown["logger"]["value"] is None
    # under the auto recipe a model's registered epochs are its shortest run
    assert shown["min_epochs"]["source"] == "model"
    other = _show("--model", "HCAN", "--set", "accelerator=cpu")
    assert other["model"] == {"value": "hcan", "group": "run", "source": "cli"}
    assert other["d_model"]["source"] == "model (cpu)" and other["pooling"]["source"] == "model"
    paper = _show("--model", "hcan", "--set", "recipe=paper", "--set", "accelerator=cpu")
    assert paper["d_model"]["source"] == "default" and paper["d_model"]["value"] > other["d_model"]["value"]
    table = CliRunner().invoke(app, ["config", "show", "--config", str(path)])
    assert table.exit_code == 0 and "hidden_size" in table.stdout and "file" in table.stdout


def test_train_from_a_file_and_again_from_the_run_it_wrote(tmp_path):
    _write_data(tmp_path)
    (tmp_path / "run.toml").write_text(f'train = "train.jsonl"\ntest = "test.jsonl"\nout = "runs/a"\n{TINY_TOML}')
    env = {**os.environ, "DOCATTN_CACHE": str(tmp_path / "cache")}
    res = run_cli("train", "--config", "run.toml", "--set", "seed=7", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    first = json.loads((tmp_path / "runs" / "a" / "config.json").read_text())
    assert first["hparams"]["hidden_size"] == 8 and first["training"]["seed"] == 7  # the file's, and the CLI's
    assert first["training"]["max_epochs"] == 1 and first["data"]["min_count"] == 2
    # a run's folder (or its config.json) as --config repeats it: same settings, same curve
    shown = _show("--config", str(tmp_path / "runs" / "a"))
    assert shown["seed"] == {"value": 7, "group": "training", "source": "file"}
    assert shown["hidden_size"]["source"] == "file" and shown["model"]["source"] == "file"
    res = run_cli(
        "train", "--config", "runs/a/config.json", "--train", "train.jsonl", "--out", "runs/b", cwd=tmp_path, env=env
    )
    assert res.returncode == 0, res.stderr[-2000:]
    again = json.loads((tmp_path / "runs" / "b" / "config.json").read_text())
    assert again["training"] == first["training"] and again["hparams"] == first["hparams"]
    assert again["results"]["history"][-1]["val_loss"] == pytest.approx(first["results"]["history"][-1]["val_loss"])
    # varied: another model keeps the run's training and data settings, not its hyper-parameters
    other = _show("--config", str(tmp_path / "runs" / "a" / "config.json"), "--model", "han-max")
    assert other["seed"] == {"value": 7, "group": "training", "source": "file"}
    assert other["hidden_size"]["source"] != "file" and other["pooling"] == {
        "value": "max",
        "group": "model",
        "source": "model",
    }


def test_the_python_api_builds_a_classifier_from_a_file_or_a_run(tmp_path):
    from docattn.classifier import DocumentClassifier
    from docattn.cli.train import _AS_OPTION
    from docattn.config_file import ALIASES as KNOWN

    assert {k: v for k, v in _AS_OPTION.items() if k != v} == KNOWN  # one table of renamed options
    path = tmp_path / "run.toml"
    path.write_text(f'train = "train.jsonl"\nout = "runs/a"\nmodel = "HAN"\n{TINY_TOML}')
    clf = DocumentClassifier.from_config(path, seed=3)  # keywords override the file, data keys are the CLI's
    assert clf.model_name == "han" and clf.hparams["hidden_size"] == 8 and clf.train_config.max_epochs == 1
    assert clf.train_config.seed == 3 and clf.data_settings.min_count == 2
    splits = synthetic.make_splits(n_train=240, n_test=60, seed=5)
    clf.fit(splits["train"].sentences, splits["train"].labels, run_dir=tmp_path / "run")
    again = DocumentClassifier.from_config(tmp_path / "run")  # a run's folder repeats it...
    assert again.get_params()["hidden_size"] == 8 and again.train_config.seed == 3
    other = DocumentClassifier.from_config(tmp_path / "run", model="han-max")  # ...or varies it
    assert other.train_config.seed == 3 and "hidden_size" not in other.get_params()
    path.write_text("hiden_size = 8\n")
    with pytest.raises(ConfigError, match="unknown key 'hiden_size' for han; did you mean 'hidden_size'"):
        DocumentClassifier.from_config(path)
