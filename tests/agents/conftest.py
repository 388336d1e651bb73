"""Fixtures for the agents tests (no network, no Django)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_openai import FakeOpenAI


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    """A :class:`tests.fake_openai.FakeOpenAI` serving until the test ends."""
    with FakeOpenAI() as httpd:
        yield httpd
    assert not httpd.unscripted, "the client sent more requests than the test scripted"
