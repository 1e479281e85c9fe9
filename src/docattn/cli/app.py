"""The Typer app, and how docattn's errors reach a shell: one line on stderr and an exit status."""

from __future__ import annotations

import os
import sys

import typer

from docattn.errors import DocattnError, Interrupted

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="Attention-based document classification: train, evaluate, predict and explain.",
    pretty_exceptions_enable=False,
)
data_app = typer.Typer(add_completion=False, help="Standard data sets and corpus statistics.")
app.add_typer(data_app, name="data")
config_app = typer.Typer(
    add_completion=False, help="Training options: each one's value, and whether the default, model, file or CLI set it."
)
app.add_typer(config_app, name="config")

USER_ERROR = 2  # what a DocattnError exits with; Interrupted exits 128 + the signal's number (130, 143)


def console(stderr: bool = True):
    """A Rich console: progress and notes on stderr, so stdout carries only a command's results."""
    from rich.console import Console

    return Console(stderr=stderr)


def _strict_option_suggestions() -> None:
    """Click suggests any option within difflib's 0.6 similarity ("--bogus": "--out"); suggest only names
    that are near misspellings of the one typed. Typer from 0.29 raises its own copy of click's error."""
    from difflib import get_close_matches

    import click

    classes = [click.exceptions.NoSuchOption]
    try:
        from typer._click.exceptions import NoSuchOption as TyperNoSuchOption

        classes.append(TyperNoSuchOption)
    except ImportError:
        pass
    for cls in classes:
        original = cls.__init__

        def init(self, option_name, message=None, possibilities=None, ctx=None, _original=original):
            _original(self, option_name, message, possibilities, ctx)
            near = get_close_matches(option_name, list(self.possibilities or []), n=3, cutoff=0.8)
            self.possibilities = near or None

        cls.__init__ = init


def main() -> None:
    """Entry point: user errors print one line (exit 2), never a traceback."""
    _strict_option_suggestions()
    if not sys.stdout.isatty():  # piped or logged: Rich would cut its tables at 80 columns ("negat…")
        os.environ.setdefault("COLUMNS", "200")
    try:
        app(standalone_mode=True)
    except Interrupted as err:  # the shell's convention: 128 + the signal's number
        typer.echo(f"interrupted: {err}", err=True)
        sys.exit(128 + err.signal)
    except DocattnError as err:
        # plain text, never wrapped: a path or line number in the message must stay whole
        typer.echo(f"error: {err}", err=True)
        sys.exit(USER_ERROR)
