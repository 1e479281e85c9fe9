"""Micro-batching: requests arriving within a few milliseconds of each other share one forward pass.

A model's cost per batch is mostly fixed overhead on small requests, so 32 single-document requests
gathered into one batch take little longer than one. The first request of a batch starts a timer of
``wait_ms``; the batch runs when the timer fires or when it holds ``max_documents``, in a worker
thread, so the event loop keeps accepting requests meanwhile. One batch runs at a time: requests that
arrive while it runs wait for it, and the next batch starts ``wait_ms`` after it ends, so that the clients
it answered can join (timer slices would otherwise queue behind the run's lock as many small batches, each
paying a forward pass's fixed cost). ``wait_ms=0`` runs each request alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor

import numpy as np


class MicroBatcher:
    """Gathers ``submit(documents)`` calls into calls of ``predict(all documents) -> (n, C) array``."""

    def __init__(
        self, predict: Callable[[list], np.ndarray], executor: Executor, wait_ms: float = 5.0, max_documents: int = 256
    ):
        self.predict = predict
        self.executor = executor
        self.wait_s = max(float(wait_ms), 0.0) / 1000.0
        self.max_documents = max_documents
        self._pending: list[tuple[list, asyncio.Future]] = []
        self._count = 0
        self._timer: asyncio.TimerHandle | None = None
        self._running: asyncio.Task | None = None  # the batch in flight, kept so it is not collected mid-flight

    async def submit(self, documents: list) -> np.ndarray:
        loop = asyncio.get_running_loop()
        if self.wait_s == 0:
            return await loop.run_in_executor(self.executor, self.predict, documents)
        future = loop.create_future()
        self._pending.append((documents, future))
        self._count += len(documents)
        if self._running is None:  # otherwise the batch in flight starts this one when it ends
            if self._count >= self.max_documents:
                self._flush()
            elif self._timer is None:
                self._timer = loop.call_later(self.wait_s, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._running is not None or not self._pending:
            return
        # whole requests up to max_documents (at least one); the rest wait for the next batch
        taken, total = 1, len(self._pending[0][0])
        while taken < len(self._pending) and total + len(self._pending[taken][0]) <= self.max_documents:
            total += len(self._pending[taken][0])
            taken += 1
        batch, self._pending = self._pending[:taken], self._pending[taken:]
        self._count -= total
        self._running = asyncio.get_running_loop().create_task(self._run(batch))
        self._running.add_done_callback(self._next)

    def _next(self, _task: asyncio.Task) -> None:
        self._running = None
        if self._count >= self.max_documents:
            self._flush()
        elif self._pending and self._timer is None:
            # the clients just answered send again within the wait: their requests join the ones
            # that arrived meanwhile, rather than wait behind a batch of those few
            self._timer = asyncio.get_running_loop().call_later(self.wait_s, self._flush)

    async def _run(self, batch: list[tuple[list, asyncio.Future]]) -> None:
        documents = [d for docs, _ in batch for d in docs]
        try:
            probs = await asyncio.get_running_loop().run_in_executor(self.executor, self.predict, documents)
        except Exception as err:  # every request of the batch gets the error (inputs were checked before)
            for _, future in batch:
                if not future.done():
                    future.set_exception(err)
            return
        start = 0
        for docs, future in batch:
            if not future.done():  # a client that went away cancelled its future
                future.set_result(probs[start : start + len(docs)])
            start += len(docs)
