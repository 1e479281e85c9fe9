"""The ``docattn`` command line: one module per group of commands, registered on one Typer app.

Only typer and light docattn modules load here, so ``docattn --help`` stays fast; each command
imports torch, Lightning or scikit-learn when it runs.
"""

# isort: off
# imported for the commands they register, in the order `docattn --help` lists them
from docattn.cli import demo, train, evaluate, explain, benchmark, data, deploy, config  # noqa: F401
from docattn.cli.app import app, main
from docattn.cli.demo import _default_reach

# isort: on

__all__ = ["app", "main", "_default_reach"]
