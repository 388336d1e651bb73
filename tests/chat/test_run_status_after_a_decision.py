"""A run that waited for a decision says it runs again, on every tab, as soon as it is
resumed: the pages had its "Waiting for your decision" line, and kept it (and the composer
its Send) until the run ended, while a reload showed it running."""

from __future__ import annotations

import re

import pytest

from tests.chat.conftest import wait_for_runs
from tests.chat.test_approvals import BOOKING, ask_and_wait, decision, is_waiting, rows
from tests.chat.test_consumer import connect, make_conversation, receive_until

pytestmark = pytest.mark.django_db(transaction=True)

ENDED = re.compile(r'class="run-status status-(?!running|waiting)')


def statuses(frames: list[str]) -> list[str]:
    """Return the status lines' statuses, in the order the frames brought them."""
    return re.findall(r'class="run-status status-(\w+)', "".join(frames))


@pytest.fixture(autouse=True)
def _ask_for_booking(settings):
    settings.AGENT_TOOL_POLICIES = {BOOKING: "ask"}
    settings.AGENT_APPROVAL_TIMEOUT_S = 3600


@pytest.mark.parametrize("choice", ["approve", "deny"])
async def test_every_tab_is_told_the_run_goes_on_once_it_is_decided(choice):
    user, conversation = await make_conversation()
    tab, _ = await ask_and_wait(conversation, user)
    other = await connect(conversation.pk, user)
    await other.connect()
    await receive_until(other, is_waiting)
    _, step, _ = await rows(conversation.pk)

    await tab.send_to(text_data=decision(step.pk, choice))
    seen = {}
    for name, communicator in (("tab", tab), ("other", other)):
        seen[name] = await receive_until(communicator, lambda frame: bool(ENDED.search(frame)))
    await wait_for_runs()

    for frames in seen.values():
        # The decided card first, then the run running again, then its end: once each.
        assert statuses(frames) == ["running", "succeeded"]
        running = next(i for i, f in enumerate(frames) if "status-running" in f)
        assert running < len(frames) - 1
        assert f'id="step-{step.pk}"' in "".join(frames[: running + 1])
    for communicator in (tab, other):
        await communicator.disconnect()


async def test_the_waiting_status_line_names_the_model_and_strategy_as_the_running_one_did():
    """Found by a new-user walk: while waiting, the status line dropped the strategy."""
    user, conversation = await make_conversation()
    tab, frames = await ask_and_wait(conversation, user)
    waiting = next(frame for frame in frames if is_waiting(frame))
    running = next(frame for frame in frames if 'class="run-status status-running' in frame)
    for shown in (running, waiting):
        assert 'class="model-name"' in shown
        assert '<span class="strategy-name">Native tool calling</span>' in shown
    await tab.disconnect()
