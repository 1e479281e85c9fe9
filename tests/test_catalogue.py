"""The torch-free model catalogue says what the registry says, and finds the name a user meant."""

from __future__ import annotations

import subprocess
import sys

import pytest

from docattn.errors import ConfigError
from docattn.models import get_spec, list_models
from docattn.models.catalogue import CATALOGUE, CPU_SIZES, TRUNCATIONS, closest_model, closest_models, list_catalogue


def test_catalogue_equals_the_registry():
    """Every registered name, and only those, with its layout, paper, description, truncation and sizes."""
    assert sorted(CATALOGUE) == list_models()
    for name in list_models():
        spec, entry = get_spec(name), CATALOGUE[name]
        assert (entry.name, entry.layout, entry.paper, entry.description) == (
            spec.name,
            spec.layout,
            spec.paper,
            spec.description,
        ), name
        assert entry.truncation == {k: v for k, v in spec.training.items() if k in TRUNCATIONS}, name
        assert entry.cpu_sizes == {k: v for k, v in spec.cpu.items() if k in CPU_SIZES}, name
        assert entry.large_sizes == spec.large and entry.small_sizes == spec.small, name
        assert entry.beyond_small_sizes == spec.beyond_small and entry.few_tokens_sizes == spec.few_tokens, name


def test_catalogue_imports_no_torch():
    """`docattn models` and name suggestions must not pay for importing torch."""
    code = (
        "import sys, docattn.models.catalogue; print(any(m == 'torch' or m.startswith('torch.') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_list_catalogue_globs_like_list_models():
    assert [e.name for e in list_catalogue("han*")] == list_models("han*") == ["han", "han-ave", "han-max"]
    assert [e.name for e in list_catalogue("HCAN*")] == list_models("hcan*")
    assert list_catalogue("nothing-like-this*") == []


@pytest.mark.parametrize(
    "typed, meant",
    [
        ("han", "han"),
        ("HAN", "han"),
        ("Han-Max", "han-max"),
        ("hann", "han"),
        ("sanet_big", "sanet-big"),
        (" cspan ", "cspan"),
        ("kimcnn", "kim-cnn"),
    ],
)
def test_closest_model(typed, meant):
    assert closest_model(typed) == meant


def test_closest_model_gives_up_on_nonsense():
    assert closest_model("zzzzzzzz") is None
    assert closest_models("zzzzzzzz") == []
    assert closest_models("HCAN") == ["hcan"]  # an exact match in another case stands alone


def test_get_spec_accepts_any_case_and_names_the_closest():
    assert get_spec("HAN") is get_spec("han")
    assert get_spec("Hcan-Two-Target").name == "hcan-two-target"
    with pytest.raises(ConfigError, match=r"unknown model 'hann'; did you mean 'han'") as err:
        get_spec("hann")
    assert "sanet" not in str(err.value)  # the closest names, not all of them
    with pytest.raises(ConfigError, match=r"^unknown model 'zzzzzzzz' \(docattn models lists them all\)$"):
        get_spec("zzzzzzzz")
