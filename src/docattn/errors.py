"""User-facing errors: one clear line saying what was wrong and what was expected."""

from __future__ import annotations


class DocattnError(Exception):
    """Base of every error docattn reports to a user (the CLI prints it as one line, exit 2)."""


class DataError(DocattnError):
    """Input data is malformed, empty or inconsistent (names the file, line or member)."""


class CheckpointError(DocattnError):
    """A run directory or weights file is missing, truncated or does not match its config."""


class ConfigError(DocattnError, ValueError):
    """An option or hyper-parameter has an invalid value (a ValueError too, as Python code expects)."""
