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


class OwnCancel:
    """What :class:`Deadline` and ``agents.tool_calls.ToolTimer`` share: they cancel a
    task for their own reason (a time limit) and must tell that cancellation from
    anyone else's, as ``asyncio.timeout`` does, by the task's cancel count.

    :meth:`_cancel` cancels for our reason; :meth:`_awaited` awaits and turns our own
    cancellation into ``TimeoutError``, lets another (a Stop) through as
    ``CancelledError``, and takes our cancel back when the awaited call swallowed it
    (returned, or raised something else): else the task would stay "cancelling", and Stop,
    which skips such a task, would never reach it.
    """

    _cancelled_task = False

    def _cancel(self, task: asyncio.Task[Any]) -> None:
        self._cancelled_task = True
        task.cancel()

    async def _awaited(self, awaitable: Awaitable[T], task: asyncio.Task[Any] | None) -> T:
        self._cancelled_task = False
        cancelling = task.cancelling() if task is not None else 0
        try:
            return await awaitable
        except asyncio.CancelledError:
            if self._cancelled_task and task is not None:
                self._cancelled_task = False
                if task.uncancel() <= cancelling:
                    raise TimeoutError from None
            raise
        finally:
            if self._cancelled_task and task is not None:
                self._cancelled_task = False
                task.uncancel()


class Deadline(OwnCancel):
    """A model turn's time budget, spent only while the task :meth:`wait`s for the model.

    ``budget_s`` seconds of waiting in all, however the waits are spread: the time the
    caller spends between waits (handling a yielded delta, writing a row, queueing behind
    other runs for the database thread) is never charged, so a loaded server cannot turn
    its own queue into a model time-out (runs of the local demo model "did not answer
    within 120 seconds" under load, bench/load.py). When the budget runs out during a
    wait, the wait is cancelled and raises ``TimeoutError`` (as ``asyncio.Timeout`` does,
    telling its own cancellation from another by the task's cancel count), and so does
    every later :meth:`wait`. Call :meth:`cancel` when done.

    One timer, set by the first wait for when the budget would end, instead of an
    ``asyncio.timeout`` around each chunk's wait (a timer set and cancelled per chunk:
    about 9 µs each, ``bench/loop.py``). When it comes due outside a wait it is dropped
    (the next wait sets a new one); when it comes due during a later wait, early because
    time passed outside the waits in between, it is set again for what is left.
    """

    def __init__(self, budget_s: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._left = budget_s  # seconds of waiting left, as of the end of the last wait
        self._since: float | None = None  # the loop's time the current wait began
        self._handle: asyncio.TimerHandle | None = None
        self.expired = False

    def _on_time(self) -> None:
        self._handle = None
        if self._since is None:
            return  # not waiting: no budget was spent since the timer was set
        now = self._loop.time()
        left = self._left - (now - self._since)
        if left > 0:
            self._handle = self._loop.call_at(now + left, self._on_time)
            return
        self.expired = True
        if self._task is not None:
            self._cancel(self._task)

    async def wait(self, awaitable: Awaitable[T]) -> T:
        """Return what ``awaitable`` gives; raise ``TimeoutError`` if the budget ran out
        before or while it waited."""
        if self.expired or self._left <= 0:
            self.expired = True
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never awaited: no "was never awaited" warning
            raise TimeoutError
        self._since = now = self._loop.time()
        if self._handle is None:
            self._handle = self._loop.call_at(now + self._left, self._on_time)
        try:
            return await self._awaited(awaitable, self._task)
        finally:
            self._left -= self._loop.time() - self._since
            self._since = None

    def renew(self, budget_s: float) -> Deadline:
        """Give the next waits (the next model turn of the same run) a new budget of
        ``budget_s`` seconds and return self: one timer serves every turn of a run.

        The timer already set is kept unless it would come due after the new budget's
        end: due earlier (every turn gets the same budget, so the last turn's timer
        always is), it is set again for what is left when it comes due during a wait, as
        within a turn, and dropped when it comes due between waits. A timer set and
        cancelled per turn cost an ``asyncio.TimerHandle``, a push onto the loop's heap
        and the heap's clean-up of the cancelled handle (``bench/loop.py``). The task
        cancelled on expiry is the one renewing, as at construction.
        """
        self._task = asyncio.current_task()
        self._left = budget_s
        self.expired = False
        handle = self._handle
        if handle is not None and handle.when() > self._loop.time() + budget_s:
            handle.cancel()
            self._handle = None
        return self

    def cancel(self) -> None:
        """Stop the timer."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
