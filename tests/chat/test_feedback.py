"""Feedback on answers: who may give it on which runs, how it is stored and changed, the
form that checks it, and the rendering every tab is sent (with no query)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.db.models.signals import post_delete, post_save
from django.template.loader import render_to_string
from django.utils import timezone

from chat import feedback, fragments, store
from chat.forms import BAD_RATING, COMMENT_WITHOUT_FEEDBACK, NOTHING_GIVEN, FeedbackForm
from chat.models import AgentRun, Conversation, Feedback, RunStatus, StepKind, StepStatus
from chat.store.feedback import NOT_A_RUN, NOTHING_TO_RATE, RATE_FIRST, STILL_GOING
from tests.chat.test_fragments import no_queries

pytestmark = pytest.mark.django_db


def ended_run(
    conversation: Conversation, *, status: str = RunStatus.SUCCEEDED, output: str = "Sunny.",
    text: str = "",
) -> AgentRun:  # fmt: skip
    """Store a run with one model turn (``text`` written) that ended with ``status``."""
    now = timezone.now()
    run = store.run_start(conversation_id=conversation.pk, content="Weather in Suzhou?",
                          provider="demo", model_name="demo-scripted", started_at=now)  # fmt: skip
    turn = store.step_start(run_id=run.pk, kind=StepKind.MODEL_TURN, iteration=1, started_at=now)
    store.step_finish(step_id=turn.pk, finished_at=now, status=StepStatus.SUCCESS, text=text,
                      result=output)  # fmt: skip
    return store.run_finish(run_id=run.pk, status=status, output=output, error="",
                            iterations=1, usage={}, finished_at=now)  # fmt: skip


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice")


@pytest.fixture
def chat(alice) -> Conversation:
    return Conversation.objects.create(owner=alice)


def give(conversation: Conversation, run: AgentRun, by, at=None, **fields) -> AgentRun:
    return store.feedback_give(conversation_id=conversation.pk, run_id=run.pk, by=by,
                               at=at or timezone.now(), **fields)  # fmt: skip


# Stored: who, when, changed in place


def test_feedback_is_stored_with_who_and_when_and_changed_in_place(chat, alice):
    run = ended_run(chat)
    first = timezone.now() - timedelta(minutes=5)
    give(chat, run, alice, at=first, rating="up")
    give(chat, run, alice, at=first + timedelta(minutes=1), comment="Right town, right day.")
    last = first + timedelta(minutes=2)
    returned = give(chat, run, alice, at=last, rating="down")

    stored = Feedback.objects.get()
    assert (stored.run_id, stored.rating) == (run.pk, "down")
    assert stored.comment == "Right town, right day."
    assert stored.given_by == alice and stored.given_by_name == "alice"
    assert stored.created_at == first and stored.updated_at == last
    assert returned.feedback == stored  # loaded for rendering


def test_a_guests_feedback_is_stored_as_guest_with_no_user(alice):
    guests = Conversation.objects.create(guest_key="k")
    run = ended_run(guests)
    give(guests, run, AnonymousUser(), rating="up")
    stored = Feedback.objects.get()
    assert stored.given_by is None and stored.given_by_name == "(guest)"


def test_the_pressed_thumb_again_takes_back_rating_and_comment_and_twice_changes_nothing(
    chat, alice
):
    run = ended_run(chat)
    give(chat, run, alice, rating="up", comment="fine")
    for _ in range(2):  # two tabs taking it back at once: the second finds nothing
        returned = store.feedback_remove(conversation_id=chat.pk, run_id=run.pk)
        assert store.feedback_of(returned) is None
    assert not Feedback.objects.exists()
    assert AgentRun.objects.filter(pk=run.pk).exists()


def test_every_change_is_saved_through_the_orm_so_its_signals_fire(chat, alice):
    """Live telemetry listens to Feedback's post_save (and may to post_delete)."""
    saved, deleted = [], []

    def on_save(sender, instance, created, **kwargs):
        saved.append((instance.rating, instance.comment, created))

    def on_delete(sender, instance, **kwargs):
        deleted.append(instance.run_id)

    post_save.connect(on_save, sender=Feedback, dispatch_uid="test-feedback-save")
    post_delete.connect(on_delete, sender=Feedback, dispatch_uid="test-feedback-delete")
    try:
        run = ended_run(chat)
        give(chat, run, alice, rating="up")
        give(chat, run, alice, comment="why")
        store.feedback_remove(conversation_id=chat.pk, run_id=run.pk)
    finally:
        post_save.disconnect(dispatch_uid="test-feedback-save", sender=Feedback)
        post_delete.disconnect(dispatch_uid="test-feedback-delete", sender=Feedback)
    assert saved == [("up", "", True), ("up", "why", False)]
    assert deleted == [run.pk]


# Which runs take it


def test_answers_and_partial_replies_take_feedback_runs_going_or_silent_do_not(chat, alice):
    answered = ended_run(chat)
    partial = ended_run(chat, status=RunStatus.CANCELLED, output="", text="The weather in Su")
    silent = ended_run(chat, status=RunStatus.FAILED, output="")
    going, waiting = ended_run(chat), ended_run(chat)
    for run, status in ((going, RunStatus.RUNNING), (waiting, RunStatus.WAITING)):
        AgentRun.objects.filter(pk=run.pk).update(status=status)
        run.status = status

    offered = {run.pk: store.feedback_offered(run) for run in (answered, partial, silent, going,
                                                                waiting)}  # fmt: skip
    assert offered == {answered.pk: True, partial.pk: True, silent.pk: False, going.pk: False,
                       waiting.pk: False}  # fmt: skip
    give(chat, answered, alice, rating="up")
    give(chat, partial, alice, rating="down")
    for run, refusal in ((silent, NOTHING_TO_RATE), (going, STILL_GOING), (waiting, STILL_GOING)):
        with pytest.raises(store.FeedbackRefused, match=refusal):
            give(chat, run, alice, rating="up")
    assert set(Feedback.objects.values_list("run_id", flat=True)) == {answered.pk, partial.pk}


def test_another_conversations_run_is_refused_and_a_deleted_conversation_is_gone(chat, alice):
    theirs = Conversation.objects.create(owner=User.objects.create_user("mallory"))
    run = ended_run(chat)
    for conversation_id, run_id in ((theirs.pk, run.pk), (chat.pk, 10**12)):
        with pytest.raises(store.FeedbackRefused, match=NOT_A_RUN):
            store.feedback_give(conversation_id=conversation_id, run_id=run_id, by=alice,
                                at=timezone.now(), rating="up")  # fmt: skip
        with pytest.raises(store.FeedbackRefused, match=NOT_A_RUN):
            store.feedback_remove(conversation_id=conversation_id, run_id=run_id)
    Conversation.objects.filter(pk=chat.pk).update(hidden_at=timezone.now())
    with pytest.raises(store.ConversationGone):
        give(chat, run, alice, rating="up")
    assert not Feedback.objects.exists()


def test_a_comment_needs_a_rating_first_and_is_refused_without_one(chat, alice):
    run = ended_run(chat)
    with pytest.raises(store.FeedbackRefused, match=RATE_FIRST):
        give(chat, run, alice, comment="no thumbs yet")
    assert not Feedback.objects.exists()


# The form


@pytest.mark.parametrize(
    ("data", "refusal"),
    [
        ({"rating": "sideways"}, BAD_RATING),
        ({"rating": "up", "comment": "x" * (Feedback.COMMENT_MAX_CHARS + 1)},
         f"Your comment is {Feedback.COMMENT_MAX_CHARS + 1} characters long; the limit is "
         f"{Feedback.COMMENT_MAX_CHARS}. It was not saved"),
        ({"comment": "nul \x00 inside"}, "cannot be stored (a NUL character)"),
        ({"comment": "lone \ud800 surrogate"}, "cannot be stored (an unpaired surrogate)"),
        ({}, NOTHING_GIVEN),
        ({"rating": "none", "comment": "keep this"}, COMMENT_WITHOUT_FEEDBACK),
    ],
    ids=["bad-rating", "too-long", "nul", "surrogate", "nothing", "comment-taken-back"],
)  # fmt: skip
def test_the_form_refuses_with_a_clear_message(data, refusal):
    form = FeedbackForm(data)
    assert not form.is_valid()
    assert refusal in form.refusal()


def test_the_form_keeps_what_was_left_out_and_clears_a_blank_comment():
    assert FeedbackForm({"rating": "up"}).is_valid()
    cleaned = FeedbackForm({"rating": "up"})
    cleaned.is_valid()
    assert cleaned.cleaned_data == {"rating": "up", "comment": None}
    blank = FeedbackForm({"comment": "  \n "})
    blank.is_valid()
    assert blank.cleaned_data == {"rating": None, "comment": ""}
    at_limit = FeedbackForm({"comment": "字" * Feedback.COMMENT_MAX_CHARS})
    assert at_limit.is_valid()


def test_a_refused_change_saves_nothing(chat, alice):
    run = ended_run(chat)
    give(chat, run, alice, rating="up", comment="kept")
    too_long = {"comment": "x" * (Feedback.COMMENT_MAX_CHARS + 1)}
    with pytest.raises(store.FeedbackRefused, match="characters long; the limit is"):
        feedback.give(run_id=run.pk, data=too_long, conversation_id=chat.pk, user=alice)
    assert Feedback.objects.get().comment == "kept"


# Rendered: the same template live and on reload, without a query


def test_the_thumbs_render_pressed_from_what_the_store_returned_without_a_query(chat, alice):
    run = ended_run(chat)
    with no_queries():
        ended = fragments.run_ended(run)
    assert f'id="run-{run.pk}-feedback"' in ended and 'aria-pressed="false"' in ended
    assert 'name="comment"' not in ended  # a comment box once a thumb is chosen

    given = give(chat, run, alice, rating="down", comment="Wrong <b>town</b>")
    with no_queries():
        html = fragments.feedback_replaced(given)
    assert 'class="thumb thumb-down" aria-pressed="true"' in html
    assert 'class="thumb thumb-up" aria-pressed="false"' in html
    # The pressed thumb's form takes the feedback back; the other sets its rating.
    assert html.count('name="rating" value="none"') == 1 and 'value="up"' in html
    assert "Wrong &lt;b&gt;town&lt;/b&gt;</textarea>" in html

    removed = store.feedback_remove(conversation_id=chat.pk, run_id=run.pk)
    with no_queries():
        assert 'aria-pressed="true"' not in fragments.feedback_replaced(removed)
    with no_queries():
        refused = fragments.feedback_refused(run.pk, "Too <long>")
    assert f'id="run-{run.pk}-feedback-error"' in refused and "Too &lt;long&gt;" in refused


def test_a_reload_shows_the_feedback_and_the_staff_copy_shows_it_read_only(chat, alice):
    run = ended_run(chat)
    give(chat, run, alice, rating="up", comment="Spot on")
    going = store.run_start(conversation_id=chat.pk, content="And tomorrow?", provider="demo",
                            model_name="demo-scripted", started_at=timezone.now())  # fmt: skip
    loaded = store.conversation_runs(conversation_id=chat.pk)
    with no_queries():
        pages = [render_to_string("chat/_run.html", {"run": r, "steps": r.steps.all()})
                 for r in loaded]  # fmt: skip
        staff = render_to_string("chat/_run.html", {"run": loaded[0], "read_only": True,
                                                    "steps": loaded[0].steps.all()})  # fmt: skip
    assert 'class="thumb thumb-up" aria-pressed="true"' in pages[0] and "Spot on" in pages[0]
    assert f'id="run-{going.pk}-feedback" hidden' in pages[1]  # a place for it when it ends
    assert "ws-send" not in staff and "<textarea" not in staff
    assert "Thumbs up" in staff and "by alice" in staff and "Spot on" in staff
