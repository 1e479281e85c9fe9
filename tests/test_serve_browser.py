"""The web page in a real browser: Playwright drives Debian's chromium against a live server on 127.0.0.1."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="serving needs the serve extra: pip install 'docattn[serve]'")
pytest.importorskip("uvicorn", reason="serving needs the serve extra: pip install 'docattn[serve]'")
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the browser test needs playwright: pip install playwright"
)

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (apt-get install -y chromium)")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOC = "The plot was dull and slow. I found the acting superb. The ending was moving."


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import uvicorn
    from tiny_runs import train_tiny_run

    from docattn.serve import create_app

    root = tmp_path_factory.mktemp("browser")
    app = create_app([train_tiny_run("han", root / "han"), train_tiny_run("sanet", root / "sanet")])
    with socket.socket() as s:  # a free loopback port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the server did not start within 30 s"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _classify(page, text: str, model: str | None = None) -> None:
    if model:
        page.select_option("#model", model)
    page.fill("#text", text)
    page.keyboard.press("Tab")  # to the file input, then the button: the form works from the keyboard
    page.focus("#submit")
    page.keyboard.press("Enter")
    page.wait_for_selector("#result:not([hidden])", timeout=30_000)


def test_typing_a_document_shows_its_prediction_and_shaded_words(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    page.goto(server + "/")
    page.wait_for_selector("#model-row:not([hidden])")  # two runs served: the picker shows
    _classify(page, DOC, "han")
    prediction = page.text_content("#prediction")
    assert prediction in ("boring", "exciting", "negative", "positive")
    assert page.locator("#probabilities .row").count() == 4
    item = page.request.post(server + "/explain", data={"text": DOC, "model": "han"}).json()["explanations"][0]
    tokens = sum(len(s["tokens"]) for s in item["sentences"])  # the words as the tokenizer splits them
    words = page.locator('.view[data-view="attention"] span.w')
    assert words.count() == tokens
    # every word carries its weight and is shaded by the report's colour rule (alpha 1 reads as rgb, 0 as transparent)
    shades = words.evaluate_all("els => els.map(e => [e.dataset.w, e.style.backgroundColor])")
    assert len(shades) == tokens and all(w is not None and "255, 80, 0" in c for w, c in shades if float(w) > 0.001)
    assert max(float(w) for w, _ in shades) == 1.0
    assert page.locator('.view[data-view="attention"] .sent').count() == len(item["sentences"])  # a bar per sentence
    page.select_option("#view", "gradient x input")  # the toggle between attention and gradient x input
    assert page.locator('.view[data-view="gradient x input"]').is_visible()
    assert not page.locator('.view[data-view="attention"]').is_visible()
    page.screenshot(path=str(tmp_path / "explain.png"), full_page=True)
    assert (tmp_path / "explain.png").stat().st_size > 1000


def test_the_page_is_readable_at_phone_width_and_reports_errors(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 360, "height": 740})
    page.goto(server + "/")
    _classify(page, "A flat model reads one sequence. It was superb.", "sanet")
    assert page.locator('.view[data-view="attention"] span.w').count() > 0
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360 + 1  # nothing forces sideways scrolling
    page.screenshot(path=str(tmp_path / "phone.png"), full_page=True)
    page.fill("#text", "x" * 100_001)
    page.click("#submit")
    page.wait_for_function("document.getElementById('status').textContent.includes('characters')")
    assert "error" in page.get_attribute("#status", "class")
