"""Shared fixtures: the real benchmark data beside the project, skipped where a clone lacks it."""

from __future__ import annotations

from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests using it skip with the reason when it is absent (a user's clone)."""
    if not (SHARED_DATA / "README.md").exists():
        pytest.skip(f"real benchmark data not found at {SHARED_DATA} (present in CI, absent in a user's clone)")
    return SHARED_DATA


@pytest.fixture(scope="module")
def data():
    """The training tests' synthetic corpus, prepared: 300 training and 100 test documents."""
    from docattn.data import synthetic
    from docattn.data.prepare import DataSettings, prepare

    sp = synthetic.make_splits(n_train=300, n_test=100, seed=5)
    return prepare(sp["train"], None, sp["test"], DataSettings(min_count=2))


def train_briefly(model, train, test, steps: int, optimizer, batch_size: int = 32) -> float:
    """Test accuracy of ``model`` after ``steps`` bare optimiser steps on random batches of ``train``.

    Runs on one torch thread: models this small gain nothing from more, and on busy shared
    cores intra-op threads make each step an order of magnitude slower.
    """
    import numpy as np
    import torch

    from docattn.training.inference import make_batch

    rng = np.random.default_rng(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model.train()
        for _ in range(steps):
            batch = make_batch(train, rng.choice(len(train), batch_size, replace=False), model.layout, {})
            loss = torch.nn.functional.cross_entropy(model(batch).logits, batch.labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            batch = make_batch(test, np.arange(len(test)), model.layout, {})
            return float((model(batch).logits.argmax(1) == batch.labels).float().mean())
    finally:
        torch.set_num_threads(threads)


def without_the_fast_tar_reader(monkeypatch) -> None:
    """Make the readers fall back to Python's tarfile, as they do for a tar their own parser does not take."""
    from docattn.data import readers

    def not_plain(_path):
        raise readers._NotPlainTar
        yield

    monkeypatch.setattr(readers.plain_tar, "members", not_plain)


@contextmanager
def killed_in_epoch(monkeypatch, epoch: int):
    """In the block a fit crashes (RuntimeError "killed") as its epoch ``epoch`` starts, after the checkpoint of
    the epoch before; the block must raise it."""
    from docattn.training import engine

    real = engine.MetricsLog.on_train_epoch_start

    def crash(self, trainer, pl_module):
        if trainer.current_epoch == epoch:
            raise RuntimeError("killed")
        real(self, trainer, pl_module)

    monkeypatch.setattr(engine.MetricsLog, "on_train_epoch_start", crash)
    try:
        with pytest.raises(RuntimeError, match="killed"):
            yield
    finally:
        monkeypatch.setattr(engine.MetricsLog, "on_train_epoch_start", real)


@contextmanager
def fifo_writer(*fifos, every: float = 0.1):
    """While the block runs, a thread keeps opening each FIFO for writing: a reader that (wrongly) opens one
    then gets its end of file instead of waiting for ever, so a regression fails rather than hangs."""
    import os
    import threading

    done = threading.Event()

    def writer():
        while not done.wait(every):
            for fifo in fifos:
                with suppress(OSError):  # ENXIO until a reader waits
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def write_tar(path: Path, members: dict[str, str | tuple], mode: str = "w:gz") -> Path:
    """Members in order; a (type, link target) value is a link, a device or a named pipe."""
    import io
    import tarfile

    with tarfile.open(path, mode) as archive:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                info.type, info.linkname = content
                info.devmajor, info.devminor = (1, 3) if info.type == tarfile.CHRTYPE else (0, 0)  # /dev/null's numbers
                archive.addfile(info)
            else:
                data = content.encode("utf-8")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return path
