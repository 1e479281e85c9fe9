"""docs/options.md is generated from the option dataclasses: it must be current, and every option explained."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("options_doc", ROOT / "scripts" / "options_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_options_reference_is_current():
    assert (ROOT / "docs" / "options.md").read_text() == _generator().render(), (
        "docs/options.md is stale: run python scripts/options_doc.py"
    )


def test_every_option_has_a_meaning():
    from docattn.data.prepare import DataSettings
    from docattn.data.text import TextConfig
    from docattn.training.config import TrainConfig

    comments = _generator().field_comments
    for cls in (TrainConfig, DataSettings, TextConfig):
        missing = [name for name, text in comments(cls).items() if not text and name != "text"]
        assert not missing, f"{cls.__name__} fields without a comment: {missing}"
