"""Publish a run's fragments to every socket watching its conversation."""

from __future__ import annotations

from typing import Any

from chat import fragments
from chat.recorder import Update

FRAGMENT_MESSAGE_TYPE = "run.fragment"


def group_name(conversation_id: int) -> str:
    """Return the channel-layer group of a conversation's sockets."""
    return f"conversation-{conversation_id}"


class GroupPublisher:
    """A run listener that renders each update and sends it to the conversation's group."""

    def __init__(self, channel_layer: Any, conversation_id: int) -> None:
        self.channel_layer = channel_layer
        self.group = group_name(conversation_id)

    async def publish(self, html: str) -> None:
        """Send ``html`` to every socket of the group."""
        await self.channel_layer.group_send(
            self.group, {"type": FRAGMENT_MESSAGE_TYPE, "html": html}
        )

    async def __call__(self, update: Update) -> None:
        html = fragments.for_update(update)
        if html:
            await self.publish(html)
