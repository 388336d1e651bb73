"""Publish a run's fragments to every socket watching its conversation."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from chat import fragments
from chat.models import AgentRun
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


async def publish_run_statuses(channel_layer: Any, runs: Iterable[AgentRun]) -> None:
    """Send each ended run to its conversation's sockets (e.g. once interrupted)."""
    for run in runs:
        await GroupPublisher(channel_layer, run.conversation_id).publish(fragments.run_ended(run))


def publish_run_statuses_sync(runs: list[AgentRun]) -> None:
    """Like :func:`publish_run_statuses`, from sync code (views), on the default layer."""
    if runs:
        async_to_sync(publish_run_statuses)(get_channel_layer(), runs)
