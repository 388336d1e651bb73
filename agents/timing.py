"""How the runtime times its work: a wall-clock start, a monotonic duration.

A step's start, finish and duration are measured where its work happens (around the
model's stream in :mod:`agents.model_turn`, around the tool's ``ainvoke`` in
:mod:`agents.tool_calls`) and carried on the events; the recorder stores them as they
come. The duration is read from the monotonic clock (a wall clock may jump) and the
finish is the start plus that duration, so ``finished_at - started_at`` is exactly
``duration_ms`` milliseconds wherever the two are compared.

A model turn's time limit is a :class:`Deadline`: a budget spent only while waiting for
the model, which cancels only such a wait.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from agents.events import utcnow

ONE_MS = timedelta(milliseconds=1)
T = TypeVar("T")


def whole_ms(delta: timedelta) -> int:
    """Return ``delta`` in whole milliseconds (rounded down), by integer arithmetic.

    ``int(delta.total_seconds() * 1000)`` can come out one short (0.431 s is
    430.99999999999994 ms as a float); ``delta // ONE_MS`` never does.
    """
    return delta // ONE_MS


class Stopwatch:
    """Time one piece of work from the moment it is made.

    ``started_at`` is an aware UTC datetime; :meth:`elapsed_ms` and :meth:`stop` read a
    monotonic clock.
    """

    def __init__(self) -> None:
        self.started_at: datetime = utcnow()
        self._start = time.monotonic()

    def elapsed_ms(self) -> int:
        """Return the whole milliseconds since the start."""
        return int((time.monotonic() - self._start) * 1000)

    def stop(self) -> tuple[datetime, int]:
        """Return ``(finished_at, duration_ms)``: the finish is the start plus the duration.

        May be called more than once; each call reads the clock anew.
        """
        duration_ms = max(0, int((time.monotonic() - self._start) * 1000))
        return self.started_at + ONE_MS * duration_ms, duration_ms


class Deadline:
    """A model turn's time budget, spent only while the task waits for the model.

    An async context manager over one ``asyncio.timeout``: :meth:`arm` before awaiting
    the model arms it (``reschedule``) for the seconds left; :meth:`pause`, before
    control goes back to the caller (an async generator's ``yield``), disarms it and
    keeps what is left. So the block may span the ``yield`` statements of a stream, and
    the time the caller spends between waits (handling a delta, writing a row, queueing
    for the database thread) is never charged and never cut short. ``budget_s`` seconds
    in all; when they run out during a wait, the wait is cancelled and the block raises
    ``TimeoutError`` (the standard library tells its own cancel from a Stop by the task's
    cancel count). :meth:`arm` and :meth:`pause` raise ``TimeoutError`` too once the
    budget is spent, or when the awaited code swallowed the cancel and returned.
    """

    def __init__(self, budget_s: float) -> None:
        self._timeout = asyncio.timeout(None)
        self._left = budget_s  # seconds left, as of the last pause
        self._since: float | None = None  # the loop's time when armed; None while paused

    async def __aenter__(self) -> Deadline:
        await self._timeout.__aenter__()
        self._time = asyncio.get_running_loop().time
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._timeout.__aexit__(*exc_info)

    @property
    def expired(self) -> bool:
        """Return True once the budget has run out (during a wait or before one)."""
        return self._timeout.expired() or (self._since is None and self._left <= 0)

    def arm(self) -> None:
        """Spend the budget from now on (a wait for the model begins); raise
        ``TimeoutError`` if it is spent."""
        timeout = self._timeout
        if timeout.expired():
            raise TimeoutError
        if self._since is None:
            if self._left <= 0:
                raise TimeoutError
            self._since = now = self._time()
            timeout.reschedule(now + self._left)

    def pause(self) -> None:
        """Stop spending the budget until the next :meth:`arm`; raise ``TimeoutError``
        if it ran out (its cancel was swallowed by what the task awaited)."""
        if self._since is not None:
            timeout = self._timeout
            if timeout.expired():
                raise TimeoutError
            self._left -= self._time() - self._since
            self._since = None
            timeout.reschedule(None)

    async def wait(self, awaitable: Awaitable[T]) -> T:
        """Return what ``awaitable`` gives, armed while it waits (:meth:`arm`, then
        :meth:`pause`); raise ``TimeoutError`` if the budget ran out before or while it
        waited."""
        try:
            self.arm()
        except TimeoutError:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never awaited: no "was never awaited" warning
            raise
        result = await awaitable
        self.pause()
        return result
