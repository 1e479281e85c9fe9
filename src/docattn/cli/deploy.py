"""``docattn serve`` and ``docattn export``: a trained run behind HTTP, or as ONNX where PyTorch is absent."""

from __future__ import annotations

from pathlib import Path

import typer

from docattn.cli.app import app, console


@app.command()
def serve(
    runs: list[Path] = typer.Argument(..., help="Run folders to serve; the first answers requests that name none."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on: this machine only unless you give another (0.0.0.0: all)."
    ),
    port: int = typer.Option(8000, "--port", help="TCP port."),
    workers: int = typer.Option(1, "--workers", help="Server processes, each with its own copy of the runs."),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        envvar="DOCATTN_API_KEY",
        show_default="none: no key asked",
        help="Require this key in an X-API-Key (or Authorization: Bearer) header; also read from $DOCATTN_API_KEY.",
    ),
    micro_batch_ms: float = typer.Option(
        5.0,
        "--micro-batch-ms",
        help="How long a request waits for others to share its batch (0: batching off); a model process waits "
        "only while another computes.",
    ),
    model_processes: int | None = typer.Option(
        None,
        "--model-processes",
        show_default="one per usable core, shared among the workers",
        help="Processes that compute predictions, each with its own copy of the runs, while the server process "
        "answers HTTP (0: in the server process).",
    ),
):
    """Serve runs over HTTP: POST /predict and /explain, GET /models, /health, a web page at / and docs at /docs."""
    from docattn.serve import serve as run

    names = ", ".join(p.name for p in runs)
    console().print(f"serving {names} on http://{host}:{port} (web page at /, API docs at /docs); Ctrl-C stops")
    run(
        runs,
        host=host,
        port=port,
        workers=workers,
        api_key=api_key,
        micro_batch_ms=micro_batch_ms,
        model_processes=model_processes,
    )


@app.command()
def export(
    run: Path = typer.Argument(..., help="A run folder written by docattn train."),
    out: Path = typer.Option(..., "--out", help="Folder for model.onnx, vocab.json, labels.json and config.json."),
    format: str = typer.Option("onnx", "--format", help="Export format; onnx is the one there is."),
    attention: bool = typer.Option(
        True, "--attention/--no-attention", help="Also output the attention weights beside the probabilities."
    ),
):
    """Export a run for machines without PyTorch: docattn.onnx.OnnxPredictor(OUT) predicts with onnxruntime."""
    from docattn.errors import ConfigError

    if format != "onnx":
        raise ConfigError(f"--format {format!r}: onnx is the only export format")
    from docattn.export import export_onnx

    path = export_onnx(run, out, attention=attention)
    console(stderr=False).print(f"wrote {path} (load it with docattn.onnx.OnnxPredictor({str(out)!r}))")
