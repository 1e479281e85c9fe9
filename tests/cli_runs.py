"""The docattn command as a user runs it, in a child process or in this one, with settings that train in seconds."""

from __future__ import annotations

import subprocess
import sys

DOCATTN = [sys.executable, "-m", "docattn.cli"]
TINY = [
    "--set",
    "embedding_dim=16",
    "--set",
    "hidden_size=8",
    "--set",
    "context_dim=8",
    "--embeddings",
    "random",
    "--min-count",
    "2",
    "--set",
    "progress=false",
]


def run_cli(*args, **kw):
    return subprocess.run([*DOCATTN, *args], capture_output=True, text=True, timeout=600, **kw)


def invoke_cli(*args, env=None):
    """The command in this process, its result as `run_cli` gives it: a DocattnError becomes main()'s one line
    and exit 2; any other exception propagates, so a traceback a user would see fails the test. For checks that
    end before training, where a child process would spend its seconds importing torch."""
    from typer.testing import CliRunner

    from docattn.cli import app
    from docattn.cli.app import USER_ERROR
    from docattn.errors import DocattnError, Interrupted

    res = CliRunner(env=env).invoke(app, list(args))
    stderr, code = res.stderr, res.exit_code
    if isinstance(res.exception, DocattnError) and not isinstance(res.exception, Interrupted):
        stderr, code = stderr + f"error: {res.exception}\n", USER_ERROR
    elif res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return subprocess.CompletedProcess(list(args), code, res.stdout, stderr)
