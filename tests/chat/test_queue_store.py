"""The queue's store: a message waits while a run goes, capped, taken once, in order."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from chat import queued, store
from chat.models import AgentRun, Conversation, Message, QueuedMessage, RunStatus
from chat.runs import create_run

pytestmark = pytest.mark.django_db(transaction=True)


def send(conversation: Conversation, content: str, client_id: str = "", cap: int = 5):
    return store.message_send(
        conversation_id=conversation.pk, content=content, client_id=client_id,
        at=timezone.now(), cap=cap, start=queued.start_for(conversation.pk),
    )  # fmt: skip


def end(run: AgentRun, status: str = RunStatus.SUCCEEDED) -> None:
    AgentRun.objects.filter(pk=run.pk).update(status=status, finished_at=timezone.now())


def take(conversation: Conversation) -> AgentRun | None:
    return store.queue_take(conversation_id=conversation.pk,
                            start=queued.start_for(conversation.pk))  # fmt: skip


def test_a_message_with_no_run_going_starts_one_and_the_next_is_queued():
    conversation = Conversation.objects.create()
    first = send(conversation, "first")
    assert first.run is not None and first.run.status == RunStatus.RUNNING

    second = send(conversation, "second")

    assert (second.run, second.queued, second.idle) == (None, True, False)
    assert [q.content for q in store.queue_list(conversation_id=conversation.pk)] == ["second"]
    assert Message.objects.filter(conversation=conversation).count() == 1


def test_a_run_waiting_for_a_decision_queues_the_message_too():
    conversation = Conversation.objects.create()
    run = send(conversation, "first").run
    AgentRun.objects.filter(pk=run.pk).update(status=RunStatus.WAITING)

    assert send(conversation, "second").queued


def test_the_queue_is_capped_and_the_next_message_refused_with_nothing_stored():
    conversation = Conversation.objects.create()
    send(conversation, "first")
    for n in range(2):
        send(conversation, f"queued {n}", cap=2)

    with pytest.raises(store.QueueFull, match="2 messages are waiting"):
        send(conversation, "one too many", cap=2)
    assert QueuedMessage.objects.filter(conversation=conversation).count() == 2


def test_with_no_queue_a_message_while_a_run_goes_is_refused():
    conversation = Conversation.objects.create()
    send(conversation, "first")
    with pytest.raises(store.RunAlreadyGoing):
        send(conversation, "second", cap=0)


def test_a_message_after_the_run_ended_waits_behind_those_queued_before_it():
    conversation = Conversation.objects.create()
    run = send(conversation, "first").run
    send(conversation, "second")
    end(run)

    late = send(conversation, "third")

    assert (late.queued, late.idle) == (True, True)  # the first in line goes first
    assert take(conversation).user_message.content == "second"


def test_a_copy_of_a_message_with_the_same_client_id_is_stored_once():
    conversation = Conversation.objects.create()
    run = send(conversation, "first", client_id="a1").run
    assert send(conversation, "first", client_id="a1").duplicate  # sent: a Message
    send(conversation, "second", client_id="b2")
    assert send(conversation, "second", client_id="b2").duplicate  # queued: a QueuedMessage
    assert QueuedMessage.objects.filter(conversation=conversation).count() == 1

    end(run)
    taken = take(conversation)
    assert Message.objects.get(pk=taken.user_message_id).client_id == "b2"  # carried over
    assert send(conversation, "second", client_id="b2").duplicate
    assert Message.objects.filter(conversation=conversation, role="user").count() == 2
    # Another conversation's page may use the same id: it is its own message.
    other = Conversation.objects.create()
    assert send(other, "first", client_id="a1").run is not None


def test_take_sends_the_first_queued_message_only_once_no_run_goes():
    conversation = Conversation.objects.create()
    run = send(conversation, "first").run
    send(conversation, "second")
    send(conversation, "third")
    assert take(conversation) is None  # the run still goes
    end(run, RunStatus.FAILED)

    taken = take(conversation)

    assert taken.user_message.content == "second" and taken.status == RunStatus.RUNNING
    assert take(conversation) is None  # its run goes now
    assert [q.content for q in store.queue_list(conversation_id=conversation.pk)] == ["third"]


def test_a_take_over_the_rate_limit_keeps_the_message_first(settings):
    settings.CHAT_RUNS_PER_MINUTE = 1
    conversation = Conversation.objects.create()
    run = create_run(conversation_id=conversation.pk, content="first")
    send(conversation, "second")
    end(run)

    with pytest.raises(store.RateLimited):
        take(conversation)

    assert [q.content for q in store.queue_list(conversation_id=conversation.pk)] == ["second"]
    assert AgentRun.objects.filter(conversation=conversation).count() == 1
    assert store.queues_ready() == [conversation.pk]


def test_send_now_puts_a_message_first_and_the_latest_such_goes_first():
    conversation = Conversation.objects.create()
    run = send(conversation, "first").run
    for text in ("a", "b", "c"):
        send(conversation, text)
    _, b, c = store.queue_list(conversation_id=conversation.pk)

    store.queue_steer(conversation_id=conversation.pk, queued_id=c.pk, at=timezone.now())
    assert [q.content for q in store.queue_list(conversation_id=conversation.pk)] == list("cab")
    later = timezone.now() + timedelta(seconds=1)
    store.queue_steer(conversation_id=conversation.pk, queued_id=b.pk, at=later)
    assert [q.content for q in store.queue_list(conversation_id=conversation.pk)] == list("bca")

    end(run)
    assert take(conversation).user_message.content == "b"


def test_remove_and_send_now_refuse_another_conversations_or_a_sent_message():
    conversation, other = Conversation.objects.create(), Conversation.objects.create()
    run = send(conversation, "first").run
    send(conversation, "second")
    (waiting,) = store.queue_list(conversation_id=conversation.pk)

    for change in (store.queue_remove, store.queue_steer):
        kwargs = {"at": timezone.now()} if change is store.queue_steer else {}
        with pytest.raises(store.NotQueued, match="no longer waiting"):
            change(conversation_id=other.pk, queued_id=waiting.pk, **kwargs)
    assert QueuedMessage.objects.filter(pk=waiting.pk).exists()

    end(run)
    take(conversation)
    with pytest.raises(store.NotQueued):
        store.queue_remove(conversation_id=conversation.pk, queued_id=waiting.pk)


def test_the_sweep_finds_queues_with_no_run_going_and_a_deleted_chats_queue_is_dropped():
    going, ended, deleted = (Conversation.objects.create() for _ in range(3))
    for conversation in (going, ended, deleted):
        send(conversation, "first")
        send(conversation, "second")
    for conversation in (ended, deleted):
        end(AgentRun.objects.get(conversation=conversation))
    Conversation.objects.filter(pk=deleted.pk).update(hidden_at=timezone.now())

    assert store.queues_ready() == sorted([ended.pk, deleted.pk])
    assert take(deleted) is None
    assert not QueuedMessage.objects.filter(conversation=deleted).exists()
    assert store.queues_ready() == [ended.pk]


def test_a_message_removed_as_the_queue_is_taken_lets_the_next_go(monkeypatch):
    """Remove takes no lock: the first queued message may go between the taker's read and
    its DELETE. The next one is sent then, not left for the sweep's next beat."""
    from chat.store import queue as queue_store

    conversation = Conversation.objects.create()
    going = send(conversation, "first").run
    send(conversation, "removed meanwhile")
    send(conversation, "next")
    end(going)
    read = queue_store.queue_list

    def read_then_removed(*, conversation_id: int) -> list[QueuedMessage]:
        waiting = read(conversation_id=conversation_id)
        QueuedMessage.objects.filter(pk=waiting[0].pk).delete()  # another tab's Remove
        return waiting

    monkeypatch.setattr(queue_store, "queue_list", read_then_removed)
    run = take(conversation)

    assert run is not None and run.user_message.content == "next"
    assert not QueuedMessage.objects.filter(conversation=conversation).exists()
