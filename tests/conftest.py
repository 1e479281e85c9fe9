"""Shared fixtures: the real benchmark data beside the project, skipped where a clone lacks it."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests using it skip with the reason when it is absent (a user's clone)."""
    if not (SHARED_DATA / "README.md").exists():
        pytest.skip(f"real benchmark data not found at {SHARED_DATA} (present in CI, absent in a user's clone)")
    return SHARED_DATA
