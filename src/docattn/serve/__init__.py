"""Serving trained runs over HTTP (FastAPI + uvicorn, ``pip install 'docattn[serve]'``).

``create_app(runs)`` returns the FastAPI app, ``serve(runs, host, port)`` runs it. Neither fastapi nor
uvicorn is imported until one of them is called.
"""

from __future__ import annotations


def create_app(runs, api_key=None, micro_batch_ms: float = 5, **limits):
    """See ``docattn.serve.app.create_app``."""
    from docattn.serve.app import create_app as build

    return build(runs, api_key, micro_batch_ms, **limits)


def serve(runs, host: str = "127.0.0.1", port: int = 8000, workers: int = 1, api_key=None, **options) -> None:
    """See ``docattn.serve.app.serve``."""
    from docattn.serve.app import serve as run

    run(runs, host, port, workers, api_key, **options)


__all__ = ["create_app", "serve"]
