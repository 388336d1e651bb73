"""Fixtures for the agents tests (no network, no Django)."""

from __future__ import annotations

import pytest

from agents.models.demo import DemoChatModel
from tests.agents.demo_support import TOOLS


@pytest.fixture
def model():
    """Return the demo chat model bound to the stand-in tools."""
    return DemoChatModel().bind_tools(TOOLS)
