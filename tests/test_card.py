"""The model card: written from a run's own records, read-only until write_card, honest about what is missing."""

from __future__ import annotations

import json

import pytest
from tiny_runs import train_tiny_run

from docattn.card import CARD_FILE, model_card, write_card
from docattn.errors import CheckpointError


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return train_tiny_run("han", tmp_path_factory.mktemp("card") / "han")


def test_the_card_covers_model_data_scores_training_and_limits(run):
    card = model_card(run)
    assert card.startswith("# Model card: han")
    for heading in (
        "## Model",
        "## Data",
        "## Options that differ from the defaults",
        "## Scores",
        "## Training",
        "## Intended use and limits",
        "### What an explanation means",
        "### Faithfulness",
    ):
        assert heading in card
    assert "Yang et al. 2016" in card  # the paper
    assert "Documents per split: train 216, valid 24" in card
    assert "`boring`, `exciting`, `negative`, `positive`" in card
    assert (
        "`embedding_dim=16`" in card and "`hidden_size=8`" in card and "`lr=" not in card
    )  # HAN's own lr is its default
    config = json.loads((run / "config.json").read_text())
    baseline = config["results"]["baseline"]["valid"]["accuracy"]
    assert f"| validation | accuracy {config['results']['best']['val_acc']:.4f}" in card
    assert f"accuracy {baseline:.4f}" in card  # beside the tf-idf baseline's
    assert "| test | not recorded | not recorded |" in card
    assert "sqrt(p_sentence)" in card and "1000 sentences" in card
    assert "No faithfulness measurement" in card
    assert not (run / CARD_FILE).exists()  # model_card writes nothing


def test_a_stored_faithfulness_result_is_reported(run, tmp_path):
    import shutil

    copy = shutil.copytree(run, tmp_path / "run")
    methods = {
        "attention": {"available": True, "aopc_comprehensiveness": 0.25, "aopc_sufficiency": 0.05},
        "gradient_x_input": {"available": False, "reason": "no embedding"},
    }
    (copy / "faithfulness.json").write_text(json.dumps({"model": "han", "documents": 50, "methods": methods}))
    card = model_card(copy)
    assert "on 50 documents" in card and "| attention | 0.2500 | 0.0500 |" in card
    assert "not available: no embedding" in card


def test_a_model_under_the_baseline_is_flagged(run, tmp_path):
    import shutil

    copy = shutil.copytree(run, tmp_path / "run")
    config = json.loads((copy / "config.json").read_text())
    config["results"]["guardrail"] = {"behind": True}
    config["results"]["test"] = {"documents": 60, "accuracy": 0.5, "macro_f1": 0.4}
    (copy / "config.json").write_text(json.dumps(config))
    card = model_card(copy)
    assert "**Warning:**" in card and "| test | accuracy 0.5000, macro-F1 0.4000 (60 documents)" in card


def test_write_card_writes_atomically_and_refuses_non_runs(run, tmp_path):
    path = write_card(run)
    assert path == run / CARD_FILE and path.read_text(encoding="utf-8") == model_card(run)
    assert not list(run.glob(".*.tmp"))
    with pytest.raises(CheckpointError, match="not a run directory"):
        write_card(tmp_path)
    assert not (tmp_path / CARD_FILE).exists()


def test_a_bag_of_words_run_gets_a_card_too(tmp_path):
    card = model_card(train_tiny_run("logreg", tmp_path / "logreg"))
    assert "bag-of-words model" in card and "exact share" in card and "## Scores" in card
