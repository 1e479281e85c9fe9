"""The HTTP service: ``create_app(runs)`` builds it, ``serve(runs)`` runs it with uvicorn.

    POST /predict   {"texts": [...]} or {"text": "..."}  -> labels and probabilities
    POST /explain   the same body                        -> + sentence and word weights (``docattn explain``'s JSON)
    GET  /models    every served run: model, classes, data settings, scores, docattn version
    GET  /models/{name}/card                             -> the run's model card (Markdown)
    GET  /health    GET /docs (OpenAPI)                  GET / (the web page)

Requests name a run by ``"model"`` in the body or ``?model=`` (default: the first). Every error is one
line of JSON, ``{"error": "..."}``. A request carries only text: nothing in it names a file to read.
This module imports fastapi: ``docattn.serve`` imports it only when an app is built.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fastapi import Body, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, Field

from docattn.errors import DocattnError

STATIC = Path(__file__).parent / "static"
PUBLIC = ("/", "/health", "/docs", "/openapi.json", "/docs/oauth2-redirect", "/static/")


class Documents(BaseModel):
    """A request's body: ``texts`` or ``text``, and optionally the run to use."""

    texts: list[str | list[str]] | None = Field(None, description="Documents: strings, or lists of sentences")
    text: str | None = Field(None, description="One document")
    model: str | None = Field(None, description="Served run to use (default: the first)")
    html: bool = Field(False, description="/explain only: add each document rendered as `docattn explain` renders it")


class Limits:
    """What one request may hold; past a limit the answer is 413 (or 422 for an empty request)."""

    def __init__(self, max_chars: int = 100_000, max_documents: int = 256, max_body_bytes: int = 4 << 20):
        for name, value in (
            ("max_chars", max_chars),
            ("max_documents", max_documents),
            ("max_body_bytes", max_body_bytes),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise DocattnError(f"{name} must be a whole number >= 1, got {value!r}")
        self.max_chars, self.max_documents, self.max_body_bytes = max_chars, max_documents, max_body_bytes


class BodyLimit:
    """ASGI middleware: a body past ``max_bytes`` (declared or streamed) is 413 before any of it is parsed."""

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def reject(self, send) -> None:
        import json

        body = json.dumps({"error": f"request body over {self.max_bytes:,} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            return await self.reject(send)
        seen, rejected = 0, False

        async def counted():
            nonlocal seen, rejected
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes and not rejected:  # a chunked body that declared no length
                rejected = True
                await self.reject(send)
                return {"type": "http.disconnect"}  # the app stops reading; what it answers is dropped
            return message

        async def answered(message):
            if not rejected:
                await send(message)

        return await self.app(scope, counted, answered)


def _documents(body, limits: Limits) -> list:
    """The request's documents, checked against the limits; raises HTTPException(413/422) with one line."""
    if body.texts is not None and body.text is not None:
        raise HTTPException(422, 'give "texts" (a list of documents) or "text" (one document), not both')
    docs = body.texts if body.texts is not None else ([body.text] if body.text is not None else None)
    if not docs:
        raise HTTPException(422, 'no documents: send {"texts": ["...", ...]} or {"text": "..."}')
    if len(docs) > limits.max_documents:
        raise HTTPException(413, f"{len(docs):,} documents in one request; at most {limits.max_documents:,}")
    if any(isinstance(d, list) for d in docs) and not all(isinstance(d, list) for d in docs):
        raise HTTPException(422, "give every document as a string, or every one as a list of sentences, not both")
    for i, d in enumerate(docs):
        chars = len(d) if isinstance(d, str) else sum(len(s) for s in d)
        if chars > limits.max_chars:
            raise HTTPException(413, f"document {i} has {chars:,} characters; at most {limits.max_chars:,}")
    return docs


def create_app(
    runs: list[Path],
    api_key: str | None = None,
    micro_batch_ms: float = 5,
    max_chars: int = 100_000,
    max_documents: int = 256,
    max_body_bytes: int = 4 << 20,
    threads: int = 2,
    torch_threads: int | None = None,
    model_processes: int | None = None,
):
    """A FastAPI app serving the runs in ``runs`` (each loaded once, here, so a bad run fails before serving).

    ``model_processes``: processes that answer /predict, each with its own copy of the runs, so the model
    computes while this process answers HTTP (None: one per usable core; 0: in this process, in its worker
    threads). ``micro_batch_ms``: how long a request waits for others to share its batch (0: no batching);
    a model process starts at once when no other computes. ``threads``: the worker threads
    (the event loop never runs a model); ``torch_threads``: PyTorch's intra-op threads in each process that
    computes (None: its default here, the cores shared out among model processes; 1 serves best on busy
    shared cores, see serve_load.py).
    """
    from docattn.serve.batching import MicroBatcher
    from docattn.serve.runs import ServedRun, unique_names
    from docattn.threads import usable_cores
    from docattn.version import __version__

    if not runs:
        raise DocattnError("serve needs at least one run folder")
    if model_processes is None:
        model_processes = usable_cores() if os.name == "posix" else 0
    if model_processes < 0:
        raise DocattnError(f"model_processes must be 0 (this process) or more, got {model_processes}")
    if model_processes and os.name != "posix":
        raise DocattnError("model processes talk over inherited pipes, which need Linux or macOS: use 0")
    limits = Limits(max_chars, max_documents, max_body_bytes)
    if torch_threads:
        import torch

        torch.set_num_threads(torch_threads)
    served = {name: ServedRun.load(name, Path(p)) for name, p in zip(unique_names([Path(p) for p in runs]), runs)}
    # a thread per model process, and one more so /explain never waits for a thread
    executor = ThreadPoolExecutor(max_workers=max(threads, model_processes + 1), thread_name_prefix="docattn-model")
    predictor = None
    if model_processes:
        from docattn.serve.process import ModelProcesses

        each = torch_threads or max(usable_cores() // model_processes, 1)
        predictor = ModelProcesses({name: run.path for name, run in served.items()}, model_processes, each)
    # one batcher per run and kind of document: raw strings and sentence lists cannot share a corpus
    batchers = {
        (name, listed): MicroBatcher(
            run.predict_proba if predictor is None else functools.partial(predictor.predict_proba, name),
            executor,
            micro_batch_ms,
            max_documents,
            depth=max(model_processes, 1),
            eager=predictor is not None,
        )
        for name, run in served.items()
        for listed in (False, True)
    }

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        executor.shutdown(wait=False)  # the server stops: no thread is left waiting for work
        if predictor is not None:
            predictor.close()

    app = FastAPI(
        lifespan=lifespan,
        title="docattn",
        version=__version__,
        description="Attention-based document classification: "
        "predictions and their explanations from trained docattn runs.",
    )
    app.state.executor, app.state.runs, app.state.model_processes = executor, served, predictor
    _guard(app, api_key)
    _api_routes(app, served, batchers, limits, executor)
    _static_routes(app)
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)  # outermost: before the key check and parsing
    return app


def _guard(app, api_key: str | None) -> None:
    """The API key check and the error handlers that make every error one line of JSON."""
    from docattn.serve.process import ModelProcessGone

    async def check_key(request: Request, call_next):
        path = request.url.path
        if not (path in PUBLIC or path.startswith("/static/")):
            given = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
            if not hmac.compare_digest(given.encode(), api_key.encode()):  # constant time: no timing hints
                return JSONResponse({"error": "missing or wrong API key (send it as X-API-Key)"}, status_code=401)
        return await call_next(request)

    if api_key is not None:  # without a key no middleware: it costs every request a task group
        app.middleware("http")(check_key)

    @app.exception_handler(HTTPException)
    async def http_error(request, err):
        return JSONResponse({"error": str(err.detail)}, status_code=err.status_code)

    @app.exception_handler(RequestValidationError)
    async def invalid(request, err):
        first = (err.errors() or [{}])[0]
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        return JSONResponse(
            {"error": f"malformed request: {where + ': ' if where else ''}{first.get('msg', 'invalid')}"},
            status_code=422,
        )

    @app.exception_handler(ModelProcessGone)
    async def gone(request, err):
        return JSONResponse({"error": str(err)}, status_code=503)

    @app.exception_handler(DocattnError)
    async def docattn_error(request, err):
        return JSONResponse({"error": str(err).splitlines()[0] if str(err) else type(err).__name__}, status_code=422)


def _api_routes(app, served: dict, batchers: dict, limits: Limits, executor) -> None:
    """/predict, /explain, /models, /models/{name}/card and /health; models run in ``executor``'s threads."""
    import asyncio

    from docattn.serve.runs import jsonable
    from docattn.version import __version__

    default = next(iter(served))

    def pick(body_model: str | None, query_model: str | None):
        name = body_model or query_model or default
        if name not in served:
            raise HTTPException(404, f"no served run named {name!r}; served: {', '.join(served)}")
        return served[name]

    @app.post("/predict")
    async def predict(body: Documents = Body(...), model: str | None = Query(None)):
        """Labels and class probabilities, one entry per document in request order."""
        run = pick(body.model, model)
        docs = _documents(body, limits)
        probs = await batchers[(run.name, isinstance(docs[0], list))].submit(docs)
        classes, labels = run.clf.classes_, run.clf.labels
        decided = labels.decode_sets(labels.decide(probs)) if labels.multi_label else None  # lists of classes
        names = [str(c) for c in classes]
        # a ready JSONResponse: FastAPI's encoder would walk every value again, a sizeable share of a request's cost
        return JSONResponse(
            {
                "model": run.name,
                "predictions": [
                    {
                        "prediction": jsonable(decided[i] if decided is not None else classes[int(p.argmax())]),
                        "probabilities": dict(zip(names, p.tolist())),
                    }
                    for i, p in enumerate(probs)
                ],
            }
        )

    @app.post("/explain")
    async def explain(body: Documents = Body(...), model: str | None = Query(None)):
        """Predictions with sentence and word weights (the JSON `docattn explain --json` writes), plus a
        gradient x input view where the model has a word embedding."""
        run = pick(body.model, model)
        docs = _documents(body, limits)
        if not run.explainable:
            raise HTTPException(
                422, f"model {run.clf.model_name!r} is a bag-of-words baseline: it has no attention to explain"
            )
        items = await asyncio.get_running_loop().run_in_executor(executor, run.explain, docs, body.html)
        return {"model": run.name, "explanations": items}

    @app.get("/models")
    async def models():
        """Every served run: model name, classes, data settings, validation and test scores, docattn version."""
        return {"models": [run.info() for run in served.values()], "default": default}

    @app.get("/models/{name}/card", response_class=PlainTextResponse)
    async def card(name: str):
        """The run's model card, Markdown."""
        from docattn.card import model_card

        run = pick(name, None)
        text = await asyncio.get_running_loop().run_in_executor(executor, model_card, run.path)
        return Response(text, media_type="text/markdown; charset=utf-8")

    @app.get("/health")
    async def health():
        pool = app.state.model_processes
        return {
            "status": "ok",
            "models": list(served),
            "model_processes": 0 if pool is None else len(pool.pids),  # per server process
            "docattn_version": __version__,
        }


def _static_routes(app) -> None:
    """The page and its assets, all from the package; the report's style and colours come from ``explain/html.py``."""
    from docattn.explain import html as report

    files = {"app.js": "text/javascript", "page.css": "text/css"}

    @app.get("/", include_in_schema=False)
    async def page():
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    @app.get("/static/{name}", include_in_schema=False)
    async def asset(name: str):
        if name == "report.css":
            return Response(report._STYLE, media_type="text/css")
        if name == "report.js":
            return Response(report._SCRIPT, media_type="text/javascript")
        if name not in files:  # a fixed list: no path from a request reaches the file system
            return Response('{"error": "not found"}', status_code=404, media_type="application/json")
        return FileResponse(STATIC / name, media_type=files[name])


def serve(
    runs: list[Path],
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    api_key: str | None = None,
    micro_batch_ms: float = 5,
    model_processes: int | None = None,
    **limits,
) -> None:
    """Serve ``runs`` with uvicorn until stopped. ``workers`` > 1 starts that many processes, each loading the runs;
    ``model_processes`` is per worker (None: the usable cores shared out among the workers)."""
    try:
        import uvicorn
    except ImportError:
        raise DocattnError("serving needs fastapi and uvicorn: pip install 'docattn[serve]'") from None
    from docattn.threads import usable_cores

    if workers < 1:
        raise DocattnError(f"workers must be at least 1, got {workers}")
    if model_processes is None and os.name == "posix":
        model_processes = max(usable_cores() // workers, 1)
    if workers == 1:
        app = _frozen(create_app(runs, api_key, micro_batch_ms, model_processes=model_processes, **limits))
        uvicorn.run(app, host=host, port=port, log_level="info")
        return
    import json

    # worker processes build the app from the environment (uvicorn imports a factory by name)
    os.environ["DOCATTN_SERVE"] = json.dumps(
        {
            "runs": [str(p) for p in runs],
            "api_key": api_key,
            "micro_batch_ms": micro_batch_ms,
            "model_processes": model_processes,
            **limits,
        }
    )
    uvicorn.run("docattn.serve.app:app_from_environment", factory=True, host=host, port=port, workers=workers)


def app_from_environment():
    """``serve(workers=N)``'s factory: the settings ``serve`` put in $DOCATTN_SERVE."""
    import json

    settings = json.loads(os.environ["DOCATTN_SERVE"])
    return _frozen(create_app([Path(p) for p in settings.pop("runs")], settings.pop("api_key"), **settings))


def _frozen(app):
    """``app``, with everything alive in this serving process (the loaded runs: torch, the models, vocabularies)
    moved out of the garbage collector's full passes, which walked them all while requests waited: p99 255 ms
    against 89 ms under serve_load.py. Only where the process serves, since it keeps them for good."""
    import gc

    gc.collect()
    gc.freeze()
    return app
