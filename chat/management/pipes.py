"""What the commands that write to a pipe share (``ask ... | head``)."""

from __future__ import annotations

import contextlib
import os
import sys


def silence_stdout() -> None:
    """Point standard output at /dev/null once its reader has gone away.

    Python flushes stdout at exit and would report the broken pipe again, with a
    traceback; a stand-in without a file descriptor (a test's) is left as it is.
    """
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
