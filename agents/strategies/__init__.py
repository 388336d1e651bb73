"""The four ways a model can ask for a tool, behind one loop (:mod:`agents.runtime`).

========================  ===============================  ==========================
name                      the model writes                 stop sequence
========================  ===============================  ==========================
``tool_calling``          native ``tool_calls``            none
``react``                 Thought / Action / Action Input  ``\\nObservation``
``structured_chat``       ``{"action", "action_input"}``   ``\\nObservation``
``xml``                   ``<tool>`` / ``<tool_input>``    ``</tool_input>``
========================  ===============================  ==========================

See :mod:`agents.strategies.base` for what a strategy supplies and ``docs/strategies.md``.
"""

from __future__ import annotations

from agents.strategies.base import (
    ParseError,
    Strategy,
    StrategyOptions,
    ToolAgentAction,
)
from agents.strategies.react import ReActStrategy
from agents.strategies.structured_chat import StructuredChatStrategy
from agents.strategies.tool_calling import ToolCallingStrategy
from agents.strategies.xml import XmlStrategy

__all__ = [
    "DEFAULT_STRATEGY",
    "STRATEGIES",
    "ParseError",
    "Strategy",
    "StrategyOptions",
    "ToolAgentAction",
    "get_strategy",
]

STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls
    for cls in (ToolCallingStrategy, ReActStrategy, StructuredChatStrategy, XmlStrategy)
}
"""Strategy classes by name, the default first."""

DEFAULT_STRATEGY = ToolCallingStrategy.name


def get_strategy(name: str, options: StrategyOptions | None = None) -> Strategy:
    """Return a new strategy named ``name`` with ``options``.

    Raises ``ValueError`` for an unknown name (the message lists the known ones).
    """
    try:
        cls = STRATEGIES[name]
    except KeyError:
        known = ", ".join(STRATEGIES)
        raise ValueError(f"unknown strategy {name!r}; known strategies: {known}") from None
    return cls(options)
