"""Fake model servers as strict as real ones (the rules of scripts/strict_rules.py).

:class:`StrictServer` is :class:`tests.fake_openai.FakeOpenAI` with rules: each request
is checked by every rule before the script is played, and the first refusal is answered
(and its words kept in ``refused``) instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scripts.strict_rules import (
    Rule,
    first_refusal,
    mistral_ids,
    reasoning_back,
    refuses,
    role_order,
    unique_ids,
)
from tests.fake_openai import FakeOpenAI, Reply

__all__ = ["StrictServer", "mistral_ids", "reasoning_back", "refuses", "role_order", "unique_ids"]


class StrictServer(FakeOpenAI):
    """A :class:`FakeOpenAI` that checks each request with ``rules`` before its script.

    ``refused`` keeps each refusal's words, in order; a refused request is kept in
    ``requests`` too and takes no reply of the script.
    """

    def __init__(self, rules: Iterable[Rule], script: list[Reply] | None = None) -> None:
        super().__init__(script)
        self.rules = list(rules)
        self.refused: list[str] = []

    def take(self, body: dict[str, Any]) -> Reply:
        refusal = first_refusal(self.rules, body)
        if refusal is None:
            return super().take(body)
        with self._lock:
            self.requests.append(body)
            self.refused.append(refusal.words)
        return Reply(status=refusal.status, body=refusal.body)
