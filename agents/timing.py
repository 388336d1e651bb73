"""How the runtime times its work: a wall-clock start, a monotonic duration.

A step's start, finish and duration are measured where its work happens (around the
model's stream in :mod:`agents.model_turn`, around the tool's ``ainvoke`` in
:mod:`agents.tool_calls`) and carried on the events; the recorder stores them as they
come. The duration is read from the monotonic clock (a wall clock may jump) and the
finish is the start plus that duration, so ``finished_at - started_at`` is exactly
``duration_ms`` milliseconds wherever the two are compared.

A model turn's time limit is a :class:`Deadline`: it cancels only a wait for the model.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable
from datetime import datetime, timedelta
from typing import TypeVar

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
        duration_ms = max(0, self.elapsed_ms())
        return self.started_at + timedelta(milliseconds=duration_ms), duration_ms


class Deadline:
    """A deadline that cancels the current task only while it :meth:`wait`s.

    One timer for a whole model turn, instead of an ``asyncio.timeout_at`` around each
    chunk's wait (a timer set and cancelled per chunk: about 9 µs each, three per
    tool-call turn, ``bench/loop.py``). When the time comes while the task waits, the
    wait is cancelled and raises ``TimeoutError`` (as ``asyncio.Timeout`` does, telling
    its own cancellation from another by the task's cancel count); when it comes while the
    task is elsewhere (the caller handling a yielded delta), nothing is cancelled there
    and the next :meth:`wait` raises ``TimeoutError`` at once. Call :meth:`cancel` when
    done. ``when`` is in the event loop's clock (``loop.time()``).
    """

    def __init__(self, when: float) -> None:
        self._task = asyncio.current_task()
        self._waiting = False
        self._cancelled_task = False
        self.expired = False
        self._handle = asyncio.get_running_loop().call_at(when, self._on_time)

    def _on_time(self) -> None:
        self.expired = True
        if self._waiting and self._task is not None:
            self._cancelled_task = True
            self._task.cancel()

    async def wait(self, awaitable: Awaitable[T]) -> T:
        """Return what ``awaitable`` gives; raise ``TimeoutError`` if the deadline passed
        before or while it waited."""
        if self.expired:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never awaited: no "was never awaited" warning
            raise TimeoutError
        task = self._task
        cancelling = task.cancelling() if task is not None else 0
        self._waiting = True
        try:
            return await awaitable
        except asyncio.CancelledError:
            if self._cancelled_task and task is not None and task.uncancel() <= cancelling:
                raise TimeoutError from None
            raise
        finally:
            self._waiting = False

    def cancel(self) -> None:
        """Stop the timer."""
        self._handle.cancel()
