"""How long a test waits for something before it fails, on a busy machine too.

Every wait in the suite is for an event: a frame, a row's state, an element in the page, a
log line. ``WAIT_S`` is only the safety net that turns a hang into a failure: it is long
because a loaded machine is slow (``bench/busy.py`` runs the tests at a load of about 5 on
2 cores), and no test's outcome may depend on it. A test that passes only because
something happened within a given time, or had not happened yet, is a wrong test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_S = 60.0
WAIT_MS = int(WAIT_S * 1000)


def wait_until(predicate: Callable[[], T], what: str, *, timeout_s: float = WAIT_S) -> T:
    """Call ``predicate`` every 50 ms until it returns something truthy; return that.

    Raises AssertionError naming ``what`` after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s:g} s waiting for {what}"
        time.sleep(0.05)
