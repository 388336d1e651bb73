"""A conversation, run or step id no database can hold, in a page URL or a socket's path,
is refused (404, 400 or 4404), never a server error."""

from __future__ import annotations

import pytest

from tests.chat.test_refused_sockets import closed_with, communicator
from tests.chat.test_socket_access import logged_in

pytestmark = pytest.mark.django_db(transaction=True)


HUGE = "9" * 30  # Django's <int:> converter takes any number of digits


@pytest.mark.parametrize(
    "path",
    [
        f"/c/{HUGE}/",
        f"/c/{HUGE}/earlier/?before=1",
        "/c/{pk}/earlier/?before=" + "9" * 18,
        f"/c/{{pk}}/runs/{HUGE}/steps/?before=1",
        "/c/{pk}/runs/{run}/steps/?before=" + "9" * 18,
        f"/c/{{pk}}/runs/{HUGE}/timeline/",
        f"/c/{HUGE}/menu/",
        f"/c/{HUGE}/strategy/",
    ],
)
def test_a_huge_id_in_a_page_url_is_404_or_400_not_a_server_error(alice, path):
    from tests.chat.test_growth import exchanges

    client, conversation = alice
    run = exchanges(conversation, 1)[0]
    client.raise_request_exception = False
    response = client.get(path.format(pk=conversation.pk, run=run))
    assert response.status_code in (200, 400, 404, 405)


async def test_a_huge_conversation_id_on_the_socket_is_closed_with_4404(client, caplog):
    _, _, session_id = await logged_in(client, "alice")
    assert await closed_with(communicator(f"/ws/chat/{HUGE}/", session_id=session_id)) == 4404


async def test_a_decisions_step_of_5000_digits_is_refused_and_the_socket_stays_open():
    """int() refuses 4,300 digits or more with a ValueError, which closed the socket
    with 1011 (found by the adversarial pass)."""
    import json

    from tests.chat.test_consumer import connect, make_conversation

    user, conversation = await make_conversation()
    tab = await connect(conversation.pk, user)
    await tab.connect()
    await tab.send_to(
        text_data=json.dumps({"type": "approval", "step": "9" * 5000, "decision": "deny"})
    )
    refused = await tab.receive_from()
    assert 'id="chat-error"' in refused and "data-outcome" not in refused  # not a message's
    await tab.send_to(text_data=json.dumps({"type": "cancel"}))
    assert "Nothing to stop" in await tab.receive_from()  # still open
    await tab.disconnect()
