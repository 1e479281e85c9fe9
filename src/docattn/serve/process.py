"""The served runs' predictions in processes of their own, so the HTTP side and the model never share one GIL.

In one process the model's thread and the event loop take turns: the model releases the GIL for each
kernel and must win it back from a loop busy parsing and answering requests, which the interpreter
grants only every switch interval (5 ms). A HAN batch is hundreds of small kernels, so beside a busy
loop it crawls (benchmarks/serve_gil.py), and the server stayed at about one core however many it had.
Here model processes compute while the server process answers. Each is ``python -m docattn.serve.process``
(nothing of the server's own script is run again) talking over two pipes in length-prefixed frames: JSON
one way, JSON and raw float64 bytes the other. Nothing is pickled.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from docattn.errors import DocattnError


class ModelProcessGone(RuntimeError):
    """A model process exited (killed, out of memory): the server cannot predict with it until restarted."""


class ModelProcesses:
    """``predict_proba(run name, documents)`` answered by child processes, each holding its own copy of the runs.

    Each child computes one batch at a time; a call takes an idle child (or waits for one), sends it the
    documents and waits for the answer. A child reads the end of its input when the server closes or dies,
    and exits.
    """

    def __init__(self, runs: dict[str, Path], count: int = 1, torch_threads: int | None = None):
        paths = json.dumps({name: str(path) for name, path in runs.items()})
        self._children: list[_Child] = []
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(max(count, 1)):  # all start loading at once
            self._children.append(_Child.start(paths, torch_threads))
        for child in self._children:
            try:
                ready = json.loads(child.receive())
            except EOFError:
                self.close()
                raise DocattnError(
                    f"a model process exited while loading the runs (exit code {child.exit_code()})"
                ) from None
            if "error" in ready:
                self.close()
                raise DocattnError(ready["error"])
            self._idle.put(child)
        self._alive, self._alive_lock = len(self._children), threading.Lock()

    def predict_proba(self, name: str, documents: list) -> np.ndarray:
        child = self._idle.get()
        if child is None:  # every child has died
            self._idle.put(None)
            raise ModelProcessGone("the model processes exited; restart docattn serve")
        try:
            child.send(json.dumps({"run": name, "documents": documents}).encode())
            head = json.loads(child.receive())
            values = None if "error" in head else np.frombuffer(child.receive(), dtype=np.float64)
        except (EOFError, OSError, ValueError):  # ValueError: the server closed the pipe while shutting down
            with self._alive_lock:
                self._alive -= 1
                if self._alive == 0:
                    self._idle.put(None)  # wakes every caller still waiting for a child
            raise ModelProcessGone(
                f"a model process exited (exit code {child.exit_code()}); restart docattn serve"
            ) from None
        self._idle.put(child)  # a dead child is not put back: the others keep serving
        if values is None:  # this batch failed; the child keeps serving
            raise DocattnError(head["error"])
        return values.reshape(head["shape"])

    @property
    def pids(self) -> list[int]:
        return [child.proc.pid for child in self._children]

    def close(self) -> None:
        for child in self._children:
            child.close()


class _Child:
    """One ``python -m docattn.serve.process`` and the two pipes to it."""

    def __init__(self, proc: subprocess.Popen, to_child, from_child):
        self.proc, self._to, self._from = proc, to_child, from_child

    @classmethod
    def start(cls, runs_json: str, torch_threads: int | None) -> _Child:
        down_r, down_w = os.pipe()  # server -> child
        up_r, up_w = os.pipe()  # child -> server
        # the child imports this docattn, wherever the server found it
        home = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [home, os.environ.get("PYTHONPATH")]))}
        proc = subprocess.Popen(
            [sys.executable, "-m", "docattn.serve.process", str(down_r), str(up_w), str(torch_threads or 0), runs_json],
            pass_fds=(down_r, up_w),
            stdin=subprocess.DEVNULL,
            env=env,
        )
        os.close(down_r)
        os.close(up_w)
        return cls(proc, os.fdopen(down_w, "wb"), os.fdopen(up_r, "rb"))

    def send(self, payload: bytes) -> None:
        _send(self._to, payload)

    def receive(self) -> bytes:
        return _receive(self._from)

    def exit_code(self) -> int | None:
        try:
            return self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        for f in (self._to, self._from):
            with contextlib.suppress(OSError):
                f.close()  # the child reads the end of its input and returns
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _send(f, payload: bytes) -> None:
    f.write(len(payload).to_bytes(8, "little"))
    f.write(payload)
    f.flush()


def _receive(f) -> bytes:
    head = f.read(8)
    if len(head) < 8:
        raise EOFError
    size = int.from_bytes(head, "little")
    body = f.read(size)
    if len(body) < size:
        raise EOFError
    return body


def _line(err: Exception) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _answer(requests, answers, runs: dict[str, str], torch_threads: int) -> None:
    """The child: load every run, say ready, then answer predictions until the server closes the pipe."""
    import gc

    import torch

    from docattn.classifier import DocumentClassifier

    if torch_threads:
        torch.set_num_threads(torch_threads)
    try:
        loaded = {name: DocumentClassifier.load(Path(path)) for name, path in runs.items()}
    except Exception as err:  # the server reports it and does not start
        _send(answers, json.dumps({"error": _line(err)}).encode())
        return
    gc.collect()
    gc.freeze()  # the loaded runs stay out of the collector's full passes, as in the server process
    _send(answers, b'{"ready": true}')
    while True:
        try:
            request = json.loads(_receive(requests))
        except EOFError:
            return
        try:
            probs = np.ascontiguousarray(loaded[request["run"]].predict_proba(request["documents"]), dtype=np.float64)
        except Exception as err:  # this batch fails; the process keeps serving
            _send(answers, json.dumps({"error": _line(err)}).encode())
            continue
        _send(answers, json.dumps({"shape": list(probs.shape)}).encode())
        _send(answers, probs.tobytes())


if __name__ == "__main__":
    read_fd, write_fd, threads, runs_json = sys.argv[1:5]
    # the server may go away mid-answer: the child then just ends
    with (
        contextlib.suppress(BrokenPipeError),
        os.fdopen(int(read_fd), "rb") as requests,
        os.fdopen(int(write_fd), "wb") as answers,
    ):
        _answer(requests, answers, json.loads(runs_json), int(threads))
