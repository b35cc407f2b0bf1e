"""Typed round trips: independent requests sent concurrently, as one round trip.

``head = rt.submit(store.head, key)``, then ``rt.wait()``, then ``head.result()``. A round
trip of one request runs it on the calling thread, and so does every round trip of a store
that is not ``concurrent`` (a local one: threads would only add overhead), one call after
the other inside the store's ``batch()``. Never submit a call that itself waits on a round
trip of the same pool: with one worker it would wait for itself.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Generic, ParamSpec, TypeVar

from . import _telemetry

T = TypeVar("T")
P = ParamSpec("P")


class Pending(Generic[T]):
    """The result of one request of a :class:`RoundTrip`, readable once the round trip is over."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._call = call
        self._future: Future[T] | None = None

    def result(self) -> T:
        """The request's result (or its exception, raised)."""
        if self._future is None:
            raise RuntimeError("a round trip's result was read before its wait()")
        return self._future.result()


class RoundTrip:
    """Requests submitted together and sent concurrently by :meth:`wait`."""

    def __init__(
        self,
        pool: Callable[[], ThreadPoolExecutor],
        *,
        inline: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
    ) -> None:
        """``inline``: run the calls on the calling thread, in submission order, inside the
        context it makes (a store's ``batch``), instead of on ``pool``."""
        self._pool = pool
        self._inline = inline
        self._pending: list[Pending[Any]] = []
        self._waited = False

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Pending[T]:
        """Add ``fn(*args, **kwargs)`` to this round trip; it runs at :meth:`wait`."""
        if self._waited:
            raise RuntimeError("a round trip cannot take requests after its wait()")
        pending = Pending(functools.partial(fn, *args, **kwargs))
        self._pending.append(pending)
        return pending

    def wait(self) -> None:
        """Run every request; raise the first error (in submission order) after all finish."""
        self._waited = True
        counted = _telemetry.fork()
        if counted is None:
            self._run()
            return
        for pending in self._pending:  # on worker threads too, in the command's count and span
            pending._call = counted.bind(pending._call)
        try:
            self._run()
        finally:
            counted.join()

    def _run(self) -> None:
        if self._inline is not None:
            self._wait_inline(self._inline)
            return
        if len(self._pending) == 1:  # no thread for a lone request
            (only,) = self._pending
            done: Future[Any] = Future()
            done.set_result(only._call())  # an error propagates from here, as from the call
            only._future = done
            return
        pool = self._pool()
        for pending in self._pending:
            pending._future = pool.submit(pending._call)
        wait([p._future for p in self._pending if p._future is not None])
        for pending in self._pending:
            pending.result()

    def _wait_inline(self, batch: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
        """Every call in turn, as the pool would run them: one's error does not stop the
        others. The batch is left (its writes made durable) before any error is raised."""
        with batch():
            for pending in self._pending:
                done: Future[Any] = Future()
                try:
                    done.set_result(pending._call())
                except Exception as exc:  # kept for result(), as a worker's future keeps it
                    done.set_exception(exc)
                pending._future = done
        for pending in self._pending:
            pending.result()


def reporting(calls: Sequence[Callable[[], T]], progress: Callable[[int, int], None]) -> list[Callable[[], T]]:
    """``calls``, each reporting ``progress(done, total)`` when it returns."""
    lock = threading.Lock()
    done = 0

    def reported(call: Callable[[], T]) -> T:
        nonlocal done
        result = call()
        with lock:
            done += 1
            progress(done, len(calls))
        return result

    return [functools.partial(reported, call) for call in calls]
