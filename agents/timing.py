"""How the runtime times its work: a wall-clock start, a monotonic duration.

A step's start, finish and duration are measured where its work happens (around the
model's stream in :mod:`agents.model_turn`, around the tool's ``ainvoke`` in
:mod:`agents.tool_calls`) and carried on the events; the recorder stores them as they
come. The duration is read from the monotonic clock (a wall clock may jump) and the
finish is the start plus that duration, so ``finished_at - started_at`` is exactly
``duration_ms`` milliseconds wherever the two are compared.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from agents.events import utcnow

ONE_MS = timedelta(milliseconds=1)


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
