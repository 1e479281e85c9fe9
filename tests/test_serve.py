"""The HTTP service end to end with FastAPI's TestClient: every endpoint, every error, micro-batching."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="serving needs the serve extra: pip install 'docattn[serve]'")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx: pip install 'docattn[serve]'")

from fastapi.testclient import TestClient  # noqa: E402
from tiny_runs import train_tiny_run  # noqa: E402

from docattn.serve import create_app  # noqa: E402
from docattn.serve.batching import MicroBatcher  # noqa: E402

DOC = "The plot was dull. I found the acting superb and the ending moving."


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-runs")
    return {"han": train_tiny_run("han", root / "han"), "logreg": train_tiny_run("logreg", root / "logreg")}


@pytest.fixture(scope="module")
def client(runs):
    app = create_app([runs["han"], runs["logreg"]], max_chars=500, max_documents=4, max_body_bytes=20_000)
    with TestClient(app) as c:
        yield c


def test_predict_gives_labels_and_probabilities_in_request_order(client):
    r = client.post("/predict", json={"texts": [DOC, "short", "The acting was superb."]})
    assert r.status_code == 200
    body = r.json()
    assert body["model"] == "han" and len(body["predictions"]) == 3
    for p in body["predictions"]:
        assert p["prediction"] in p["probabilities"]
        assert abs(sum(p["probabilities"].values()) - 1) < 1e-5
    single = client.post("/predict", json={"text": DOC}).json()["predictions"][0]
    assert single["probabilities"] == pytest.approx(body["predictions"][0]["probabilities"], abs=1e-6)
    listed = client.post("/predict", json={"texts": [["The plot was dull.", "I found it moving."]]})
    assert listed.status_code == 200 and len(listed.json()["predictions"]) == 1


def test_predict_matches_the_classifier(client, runs):
    from docattn.classifier import DocumentClassifier

    clf = DocumentClassifier.load(runs["han"])
    want = clf.predict_proba([DOC])[0]
    got = client.post("/predict", json={"text": DOC}).json()["predictions"][0]["probabilities"]
    assert np.allclose([got[str(c)] for c in clf.classes_], want, atol=1e-6)


def test_runs_are_picked_by_body_or_query(client):
    assert client.post("/predict", json={"text": DOC, "model": "logreg"}).json()["model"] == "logreg"
    assert client.get("/models").json()["models"][0]["trained_with_docattn"]
    assert client.post("/predict?model=logreg", json={"text": DOC}).json()["model"] == "logreg"
    r = client.post("/predict", json={"text": DOC, "model": "../han"})
    assert r.status_code == 404 and "no served run named" in r.json()["error"]


def test_explain_has_the_explain_json_schema_and_a_gradient_view(client):
    r = client.post("/explain", json={"text": DOC, "html": True})
    assert r.status_code == 200
    item = r.json()["explanations"][0]
    assert {"id", "prediction", "probabilities", "layout", "sentences", "sentences_read", "sentence_count"} <= set(item)
    assert item["layout"] == "hierarchical"
    for s in item["sentences"]:
        assert len(s["word_weights"]) == len(s["tokens"]) and 0 <= s["weight"] <= 1
    grad = [v for v in item["views"] if v["name"] == "gradient x input"]
    assert grad and len(grad[0]["word_weights"]) == len(item["sentences"])
    assert 'class="doc"' in item["html"] and 'data-view="gradient x input"' in item["html"]


def test_explain_refuses_a_bag_of_words_model(client):
    r = client.post("/explain", json={"text": DOC, "model": "logreg"})
    assert r.status_code == 422 and "no attention" in r.json()["error"]


def test_models_health_card_and_docs(client):
    models = client.get("/models").json()
    han = models["models"][0]
    assert models["default"] == "han" and [m["name"] for m in models["models"]] == ["han", "logreg"]
    assert han["model"] == "han" and len(han["classes"]) == 4 and han["validation"]["accuracy"] is not None
    assert {"data", "test", "baseline", "docattn_version"} <= set(han)
    card = client.get("/models/han/card")
    assert card.status_code == 200 and card.text.startswith("# Model card: han")
    assert card.headers["content-type"].startswith("text/markdown")
    assert client.get("/models/nope/card").status_code == 404
    assert client.get("/health").json()["status"] == "ok"
    assert client.get("/docs").status_code == 200
    assert "/predict" in client.get("/openapi.json").json()["paths"]


def test_the_page_and_its_assets_come_from_the_package(client):
    page = client.get("/")
    assert page.status_code == 200 and "<form" in page.text
    for asset in ("app.js", "page.css", "report.css", "report.js"):
        assert client.get(f"/static/{asset}").status_code == 200
    assert "rgba(255,80,0," in client.get("/static/report.js").text  # the report's colour rule, reused
    for probe in ("/static/..%2Fapp.py", "/static/config.json", "/static/%2Fetc%2Fpasswd"):
        assert client.get(probe).status_code == 404


@pytest.mark.parametrize(
    "body, status, words",
    [
        ({"texts": []}, 422, "no documents"),
        ({}, 422, "no documents"),
        ({"texts": ["a"], "text": "b"}, 422, "not both"),
        ({"texts": ["a", ["b"]]}, 422, "not both"),
        ({"texts": [1]}, 422, "malformed request"),
        ({"texts": "not a list"}, 422, "malformed request"),
        ({"texts": ["x"] * 5}, 413, "at most 4"),
        ({"text": "x" * 501}, 413, "at most 500"),
        ({"texts": [["y" * 300, "y" * 300]]}, 413, "at most 500"),
    ],
)
def test_bad_requests_are_one_line_json_errors(client, body, status, words):
    for path in ("/predict", "/explain"):
        r = client.post(path, json=body)
        assert r.status_code == status, r.text
        assert words in r.json()["error"] and "\n" not in r.json()["error"]


def test_malformed_json_and_oversized_bodies(client):
    r = client.post("/predict", content=b'{"texts": [', headers={"content-type": "application/json"})
    assert r.status_code == 422 and "error" in r.json()
    r = client.post("/predict", content=b"{" + b" " * 30_000 + b"}", headers={"content-type": "application/json"})
    assert r.status_code == 413 and "bytes" in r.json()["error"]

    def chunks():  # no content-length: counted as it streams
        for _ in range(30):
            yield b" " * 1000

    r = client.post("/predict", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_api_key(runs):
    app = create_app([runs["han"]], api_key="s3cret", micro_batch_ms=0, model_processes=0)
    with TestClient(app) as c:
        assert c.post("/predict", json={"text": DOC}).status_code == 401
        assert c.post("/predict", json={"text": DOC}, headers={"X-API-Key": "wrong"}).status_code == 401
        assert c.post("/predict", json={"text": DOC}, headers={"X-API-Key": "s3cret"}).status_code == 200
        assert c.get("/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/models").json()["error"].startswith("missing or wrong API key")
        assert c.get("/health").status_code == 200 and c.get("/").status_code == 200
        assert c.get("/health").json()["model_processes"] == 0  # computed in the server process


def test_a_bad_run_fails_before_serving(tmp_path):
    from docattn.errors import DocattnError

    with pytest.raises(DocattnError, match="not a run directory"):
        create_app([tmp_path / "missing"])
    with pytest.raises(DocattnError, match="at least one run"):
        create_app([])


def test_micro_batching_gathers_concurrent_requests_into_one_call():
    calls = []

    def predict(docs):
        calls.append(len(docs))
        return np.arange(len(docs), dtype=float)[:, None] * np.ones((1, 2))

    async def burst(wait_ms):
        batcher = MicroBatcher(predict, ThreadPoolExecutor(2), wait_ms=wait_ms, max_documents=100)
        return await asyncio.gather(*(batcher.submit([f"doc {i}", f"doc {i}b"]) for i in range(10)))

    results = asyncio.run(burst(20))
    assert calls == [20]  # ten requests of two documents: one forward pass
    assert [r[:, 0].tolist() for r in results] == [[2 * i, 2 * i + 1] for i in range(10)]  # each gets its own rows
    calls.clear()
    asyncio.run(burst(0))
    assert sorted(calls) == [2] * 10  # micro_batch_ms=0: each request alone


def test_requests_arriving_during_a_batch_form_the_next_one_and_batches_never_overlap():
    calls, running, overlapped = [], [], []

    def predict(docs):
        running.append(1)
        overlapped.append(len(running) > 1)
        time.sleep(0.3)
        calls.append(len(docs))
        running.pop()
        return np.zeros((len(docs), 2))

    async def trickle():
        batcher = MicroBatcher(predict, ThreadPoolExecutor(2), wait_ms=5, max_documents=4)
        first = asyncio.ensure_future(batcher.submit(["a"]))
        await asyncio.sleep(0.05)  # the first batch is running
        later = []
        for i in range(5):  # one every 20 ms, each past the 5 ms timer of the one before
            later.append(asyncio.ensure_future(batcher.submit([f"d{i}"])))
            await asyncio.sleep(0.02)
        await asyncio.wait_for(asyncio.gather(first, *later), 10)

    asyncio.run(trickle())
    assert calls == [1, 4, 1] and not any(overlapped)  # the next batch holds at most max_documents


def test_concurrent_strings_and_sentence_lists_do_not_share_a_batch(runs):
    from concurrent.futures import ThreadPoolExecutor as Pool

    app = create_app([runs["han"]], micro_batch_ms=200)
    with TestClient(app) as c, Pool(4) as pool:
        bodies = [{"text": DOC}, {"texts": [["The plot was dull.", "It moved me."]]}] * 2
        answers = list(pool.map(lambda b: c.post("/predict", json=b), bodies))
    assert [a.status_code for a in answers] == [200] * 4


def test_micro_batching_runs_a_full_batch_at_once_and_passes_errors_on():
    seen = []

    def predict(docs):
        seen.append((len(docs), threading.current_thread().name))
        if "bad" in docs:
            raise ValueError("boom")
        return np.zeros((len(docs), 2))

    async def run():
        batcher = MicroBatcher(
            predict, ThreadPoolExecutor(1, thread_name_prefix="model"), wait_ms=10_000, max_documents=4
        )
        full = await asyncio.wait_for(asyncio.gather(*(batcher.submit(["a", "b"]) for _ in range(2))), 5)
        with pytest.raises(ValueError, match="boom"):
            await asyncio.wait_for(asyncio.gather(batcher.submit(["bad", "c"]), batcher.submit(["d", "e"])), 5)
        return full

    assert len(asyncio.run(run())) == 2
    assert all(n == 4 and name.startswith("model") for n, name in seen)  # never on the event loop's thread


def test_model_processes_answer_as_the_classifier_does_and_outlive_a_bad_batch_and_a_dead_one(runs, tmp_path):
    from docattn.classifier import DocumentClassifier
    from docattn.errors import DocattnError
    from docattn.serve.process import ModelProcesses, ModelProcessGone

    docs = [DOC, "short", "The acting was superb."]
    pool = ModelProcesses({"han": runs["han"], "logreg": runs["logreg"]}, count=2, torch_threads=1)
    try:
        for name in ("han", "logreg"):
            expected = DocumentClassifier.load(runs[name]).predict_proba(docs)
            np.testing.assert_allclose(pool.predict_proba(name, docs), expected, atol=1e-6)
        with pytest.raises(DocattnError):  # a batch that fails fails alone
            pool.predict_proba("han", [["a sentence list"], "beside a string"])
        assert pool.predict_proba("han", docs).shape == expected.shape  # the child still serves
        first = pool._idle.get()  # the child the next call would take: killed
        pool._idle.put(first)
        first.proc.kill()
        first.proc.wait()
        others = [c for c in pool._children if c is not first]
        with pytest.raises(ModelProcessGone):
            for _ in range(len(pool._children)):  # the dead one is reached within a round of the children
                pool.predict_proba("han", docs)
        for _ in range(3):  # the others keep serving
            assert pool.predict_proba("han", docs).shape == expected.shape
        assert all(c.proc.poll() is None for c in others)
    finally:
        pool.close()
    assert all(p is not None for p in [c.proc.poll() for c in pool._children])  # closed: every child ended
    with pytest.raises(DocattnError, match="not a run directory"):
        ModelProcesses({"gone": tmp_path / "missing"})


def test_a_dead_model_process_is_a_one_line_503(runs):
    import os
    import signal

    app = create_app([runs["han"]], model_processes=1)
    with TestClient(app) as c:
        assert c.post("/predict", json={"text": DOC}).status_code == 200
        assert c.get("/health").json()["model_processes"] == 1
        (pid,) = app.state.model_processes.pids
        os.kill(pid, signal.SIGKILL)
        r = c.post("/predict", json={"text": DOC})
        assert r.status_code == 503 and r.json()["error"].startswith("a model process exited")
        assert c.post("/predict", json={"text": DOC}).json()["error"].startswith("the model processes exited")
        assert c.post("/explain", json={"text": DOC}).status_code == 200  # explanations run in the server process


def test_eager_batches_start_at_once_and_gather_while_every_slot_computes():
    calls, running, most = [], [], [0]

    def predict(docs):
        running.append(1)
        most[0] = max(most[0], len(running))
        calls.append(len(docs))
        time.sleep(0.2)
        running.pop()
        return np.zeros((len(docs), 2))

    async def load(depth):
        batcher = MicroBatcher(predict, ThreadPoolExecutor(4), wait_ms=10_000, max_documents=8, depth=depth, eager=True)
        first = [asyncio.ensure_future(batcher.submit([f"a{i}"])) for i in range(depth)]
        await asyncio.sleep(0.05)  # every slot computes: these wait, then go as one batch
        later = [asyncio.ensure_future(batcher.submit([f"d{i}"])) for i in range(5)]
        await asyncio.wait_for(asyncio.gather(*first, *later), 5)  # far sooner than the 10 s wait

    asyncio.run(load(1))
    assert calls == [1, 5] and most[0] == 1
    calls.clear()
    asyncio.run(load(2))
    assert calls == [1, 1, 5] and most[0] == 2  # two batches at once, one per model process


def test_a_free_slot_waits_for_its_share_while_another_computes_but_not_past_the_wait():
    calls, finished = [], []

    def predict(docs):
        calls.append(len(docs))
        time.sleep(0.3 if docs[0] == "big" else 0.05)
        return np.zeros((len(docs), 2))

    async def load(wait_ms, n):
        batcher = MicroBatcher(predict, ThreadPoolExecutor(4), wait_ms=wait_ms, max_documents=64, depth=2, eager=True)

        async def submit(docs):
            await batcher.submit(docs)
            finished.append(docs[0])

        big = asyncio.ensure_future(submit(["big"] * 6))  # no slot computes: it starts at once
        await asyncio.sleep(0.05)
        trickle = []
        for i in range(n):  # the free slot waits until the waiting documents match the six computing
            trickle.append(asyncio.ensure_future(submit([f"d{i}"])))
            await asyncio.sleep(0.01)
        await asyncio.wait_for(asyncio.gather(big, *trickle), 5)

    asyncio.run(load(10_000, 8))
    assert calls == [6, 6, 2] and finished[-1] == "d7"  # the last two waited for the big batch to end
    calls.clear(), finished.clear()
    asyncio.run(load(20, 2))
    assert calls == [6, 2] and finished == ["d0", "d1", "big"]  # short of their share, they waited 20 ms
