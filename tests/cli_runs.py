"""The docattn command as a user runs it, in a child process, with settings that train in seconds."""

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
