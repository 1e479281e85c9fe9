"""Micro-batching: requests arriving close together share one forward pass.

A model's cost per batch is mostly fixed overhead on small requests, so 32 single-document requests
gathered into one batch take little longer than one. Batches run in worker threads, so the event loop
keeps accepting requests meanwhile, at most ``depth`` at once. With a model in processes of its own
(``eager``) a free slot takes the waiting requests as soon as they make its share (below), or ``wait_ms``
after the first of them. In the server's own process the first request of a batch starts a timer of
``wait_ms``, and the batch runs when it fires or holds ``max_documents``; requests that arrive while it
runs wait for it, and the next batch starts ``wait_ms`` after it ends, so that the clients it answered
can join (timer slices would otherwise queue behind the run's lock as many small batches, each paying a
forward pass's fixed cost). ``wait_ms=0`` runs each request alone.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Executor

import numpy as np


class MicroBatcher:
    """Gathers ``submit(documents)`` calls into calls of ``predict(all documents) -> (n, C) array``.

    ``depth``: batches computed at once (one per model process; 1 in the server's own process).
    ``eager``: a free slot starts a batch at once when no other computes, and otherwise as soon as the
    waiting documents are its share of all those waiting or computing (or ``wait_ms`` after the first of
    them). That suits a model in processes of its own: requests gather while every slot computes, so
    batches grow with the load, the slots' batches stay even (a small one costs more a document), and no
    slot idles while the server answers the batch before. In the server's own process the model and the
    event loop share one GIL, so there a batch starts ``wait_ms`` after its first request, or after the
    batch before ends.
    """

    def __init__(
        self,
        predict: Callable[[list], np.ndarray],
        executor: Executor,
        wait_ms: float = 5.0,
        max_documents: int = 256,
        depth: int = 1,
        eager: bool = False,
    ):
        self.predict = predict
        self.executor = executor
        self.wait_s = max(float(wait_ms), 0.0) / 1000.0
        self.max_documents = max_documents
        self.depth = max(int(depth), 1)
        self.eager = eager
        self._pending: list[tuple[list, asyncio.Future]] = []
        self._count = 0
        self._timer: asyncio.TimerHandle | None = None
        self._running = 0  # batches in flight
        self._computing = 0  # their documents

    async def submit(self, documents: list) -> np.ndarray:
        loop = asyncio.get_running_loop()
        if self.wait_s == 0:
            return await loop.run_in_executor(self.executor, self.predict, documents)
        future = loop.create_future()
        self._pending.append((documents, future))
        self._count += len(documents)
        if self._running < self.depth:  # otherwise a batch in flight starts this one when it ends
            if self._count >= self.max_documents or (self.eager and self._fair_share()):
                self._flush()
            elif self._timer is None:
                self._timer = loop.call_later(self.wait_s, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._running >= self.depth or not self._pending:
            return
        # whole requests up to max_documents (at least one); the rest wait for the next batch
        taken, total = 1, len(self._pending[0][0])
        while taken < len(self._pending) and total + len(self._pending[taken][0]) <= self.max_documents:
            total += len(self._pending[taken][0])
            taken += 1
        batch, self._pending = self._pending[:taken], self._pending[taken:]
        self._count -= total
        self._running += 1
        self._computing += total
        # handed to a worker thread now, not at the loop's next turn
        documents = [d for docs, _ in batch for d in docs]
        done = asyncio.get_running_loop().run_in_executor(self.executor, self.predict, documents)
        done.add_done_callback(functools.partial(self._answer, batch))

    def _fair_share(self) -> bool:
        """Whether the waiting documents make a free slot's share of all those waiting or computing (always when
        no slot computes)."""
        return self._running == 0 or self._count * self.depth >= self._count + self._computing

    def _answer(self, batch: list[tuple[list, asyncio.Future]], done: asyncio.Future) -> None:
        self._running -= 1
        self._computing -= sum(len(docs) for docs, _ in batch)
        # the next batch starts before this one's clients are answered, so the model does not wait on them
        if self._pending:
            if self._count >= self.max_documents or (self.eager and self._fair_share()):
                self._flush()
            elif self._timer is None:
                # the clients about to be answered send again within the wait, and their requests join the
                # ones that arrived meanwhile rather than wait behind a batch of those few
                self._timer = asyncio.get_running_loop().call_later(self.wait_s, self._flush)
        err = done.exception()
        if err is not None:  # every request of the batch gets the error (inputs were checked before)
            for _, future in batch:
                if not future.done():
                    future.set_exception(err)
            return
        probs, start = done.result(), 0
        for docs, future in batch:
            if not future.done():  # a client that went away cancelled its future
                future.set_result(probs[start : start + len(docs)])
            start += len(docs)
