"""The docattn command's options: their help and defaults, model names, one-line errors, report lines and titles."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_runs import invoke_cli, run_cli

from docattn.cli import app


def test_errors_are_one_line_without_traceback(tmp_path):
    res = run_cli("train", "--train", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "run"))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and "missing.csv" in res.stderr
    res = invoke_cli("evaluate", str(tmp_path / "no-run"), "--data", str(tmp_path / "x.jsonl"))
    assert res.returncode == 2 and "Traceback" not in res.stderr and "run directory" in res.stderr
    res = invoke_cli("train", "--train", str(tmp_path), "--out", str(tmp_path / "r"), "--model", "nope")
    assert res.returncode == 2 and "unknown model" in res.stderr


def test_benchmark_seeds_out_of_range_are_refused_before_any_trial(tmp_path):
    for extra, word in (
        (["--first-seed", "-1"], "seeds -1 to 1"),
        (["--first-seed", "4294967295", "--seeds", "2"], "seeds 4294967295 to 4294967296"),
    ):
        res = invoke_cli(
            "benchmark", "--data", str(tmp_path / "absent.csv"), "--models", "nb", *extra, "--out", str(tmp_path / "b")
        )
        assert res.returncode == 2 and "Traceback" not in res.stderr and word in res.stderr, res.stderr[-1500:]
        assert not (tmp_path / "b").exists()


def test_model_names_take_any_case_and_a_typo_names_the_closest():
    from docattn.cli.options import model_name
    from docattn.errors import ConfigError

    assert model_name("HAN") == "han" and model_name(" Han-Max ") == "han-max"
    with pytest.raises(ConfigError) as err:
        model_name("hna")
    assert "unknown model 'hna'; did you mean 'han'?" in str(err.value) and "hcan" not in str(err.value)
    res = run_cli("train", "--train", "x.jsonl", "--out", "never-written", "--model", "hna")
    assert res.returncode == 2 and "did you mean 'han'?" in res.stderr and not Path("never-written").exists()


def test_every_option_has_help_and_says_its_default():
    import typer.main

    def commands(group, prefix=""):
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from commands(command, f"{prefix}{name} ")
            else:
                yield f"{prefix}{name}", command

    for name, command in commands(typer.main.get_command(app)):
        for param in command.params:
            if param.param_type_name != "option" or param.name == "help":
                continue
            assert param.help, f"{name} {param.opts[0]} has no help"
            if not param.required and not param.is_flag and param.default in (None, []) and param.name != "sets":
                assert isinstance(param.show_default, str) and param.show_default, (
                    f"{name} {param.opts[0]}: default unsaid"
                )
    shown = run_cli("train", "--help", env={**os.environ, "COLUMNS": "300", "TERMINAL_WIDTH": "300"}).stdout
    for words in (
        "[default: (recipe auto: sized to the data",
        "[default: (0.1, or the model's own)]",
        "[default: (text)]",
        "[default: (detected",
    ):
        assert words in shown, words


def test_train_report_lines_read_as_text():
    from types import SimpleNamespace

    from docattn.cli.report import data_line, human_epoch

    data = SimpleNamespace(info={"documents": {"train": 1200, "valid": 300}}, vocab=range(5432), labels=range(2))
    assert data_line(data) == (
        "data: 1,500 documents (train 1,200, valid 300), vocabulary 5,432 words, 2 classes (cache: off)"
    )
    assert human_epoch(0) == "1" and human_epoch(None) == "?"


def test_benchmark_tables_are_titled_by_what_they_show():
    from docattn.cli.benchmark import _title

    assert _title("imdb", ["han", "nb"], 3, None, None, None) == (
        "han, nb on IMDB Large Movie Review: tested on its test split, 3 seeds each"
    )
    assert _title("all.jsonl", ["nb"], 1, 5, None, None) == "nb on all.jsonl: 5-fold cross-validation, 1 seed each"
    assert "tested on a held-out 20%" in _title("all.jsonl", ["nb"], 1, None, None, 0.2)
