"""docattn: attention-based document classification you can train, trust and explain."""

from docattn.threads import apply_defaults
from docattn.version import __version__

# OpenMP's waiting policy and torch's threads: sleeping waiters, one thread per core no other process is using
# (docattn/threads.py; measured by benchmarks/threads.py). Before torch is imported; a user's own setting wins.
apply_defaults()

__all__ = ["DocumentClassifier", "create_model", "list_models", "__version__"]


def __getattr__(name):
    # imported on first use so `docattn --help` does not pay for torch
    if name == "DocumentClassifier":
        from docattn.classifier import DocumentClassifier

        return DocumentClassifier
    if name in ("create_model", "list_models"):
        from docattn import models

        return getattr(models, name)
    raise AttributeError(f"module 'docattn' has no attribute {name!r}")
