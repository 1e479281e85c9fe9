"""CLI commands of the explain package, added to the main app by ``register(app)``.

Only typer is imported here; each command imports what it needs when it runs.
"""

from __future__ import annotations


def register(app) -> None:
    """Add the explanation commands to ``app``."""
