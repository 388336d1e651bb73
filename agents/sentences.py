"""Put text from elsewhere (a server's message, an exception's) inside a sentence of ours."""

from __future__ import annotations

_STOPS = ".。"


def clause(text: object) -> str:
    """Return ``text`` as a clause: without the full stop it may end with.

    For a template that puts its own stop after the text ("...: {detail}. Try again."):
    a server's "The provider had an internal error." read "internal error.. Try again".
    """
    return str(text).rstrip().rstrip(_STOPS).rstrip()
