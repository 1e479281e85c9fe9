"""docattn: attention-based document classification you can train, trust and explain."""

import os

from docattn.version import __version__

# OpenMP threads that spin while waiting make torch many times slower when another process shares the
# cores; sleeping costs little on an idle machine. Set before torch is imported; a user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

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
