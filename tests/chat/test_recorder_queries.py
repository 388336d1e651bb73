"""What recording a run costs the database: one statement per step event, whatever the
run's length; the timeline is drawn from the rows the recorder holds, not read again
(a read of the run and its steps per event would grow quadratically over a long run).
"""

from __future__ import annotations

import threading
import types

import pytest
from channels.db import database_sync_to_async
from django.db import IntegrityError
from django.db.backends.utils import CursorWrapper
from django.utils import timezone
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from agents.events import (
    ModelTurnStarted,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    utcnow,
)
from chat import store
from chat.models import AgentStep, RunStatus, StepKind
from chat.recorder import TEXT_SAVE_INTERVAL_S, TEXT_SYNC_INTERVAL_S, RunRecorder
from chat.runs import create_run, execute_run
from chat.timeline import timeline_of
from tests.chat.conftest import FrozenClock
from tests.chat.test_consumer import make_conversation
from tests.fakes import ScriptedChatModel, tool_call

pytestmark = pytest.mark.django_db(transaction=True)


@tool
def lookup(city: str) -> str:
    """Return the weather of ``city``."""
    return f"sunny in {city}"


class Statements:
    """Count SQL statements (their first word and table) run in any thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[str] = []
        self._lock = threading.Lock()
        execute = CursorWrapper.execute

        def counted(cursor, sql, params=None):  # type: ignore[no-untyped-def]
            with self._lock:
                self.seen.append(str(sql))
            return execute(cursor, sql, params)

        monkeypatch.setattr(CursorWrapper, "execute", counted)

    def mark(self) -> int:
        return len(self.seen)

    def since(self, mark: int) -> list[str]:
        return self.seen[mark:]


def _of_the_snapshot(sql: str) -> bool:
    return (
        "agentsnapshot" in sql
        or '"snapshot_id"' in sql
        or "SAVEPOINT" in sql
        or sql.startswith("BEGIN")
    )


async def _recorded_run(monkeypatch: pytest.MonkeyPatch, calls: int) -> dict[str, list[int]]:
    """Record a run of one turn asking for ``calls`` lookups, then an answer; return the
    statements each event kind cost, per event."""
    statements = Statements(monkeypatch)
    per_kind: dict[str, list[int]] = {}
    record = RunRecorder.record

    async def counting(self: RunRecorder, event):  # type: ignore[no-untyped-def]
        mark = statements.mark()
        update = await record(self, event)
        # The run's snapshot (what defined it) is written with its first event: not a
        # step's statement.
        own = [sql for sql in statements.since(mark) if not _of_the_snapshot(sql)]
        per_kind.setdefault(type(event).__name__, []).append(len(own))
        return update

    monkeypatch.setattr(RunRecorder, "record", counting)
    model = ScriptedChatModel(
        script=[
            AIMessage(
                "",
                tool_calls=[
                    tool_call("lookup", {"city": f"c{i}"}, f"call_{i}") for i in range(calls)
                ],
            ),
            AIMessage("All sunny."),
        ]
    )
    _user, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    finished = await execute_run(run.pk, model=model, tools=[lookup])
    assert finished.status == RunStatus.SUCCEEDED
    return per_kind


async def test_each_step_event_is_one_statement_however_long_the_run(monkeypatch):
    per_kind = await _recorded_run(monkeypatch, calls=6)

    for kind in ("ModelTurnStarted", "ModelTurnFinished", "ToolCallStarted", "ToolCallFinished"):
        assert set(per_kind[kind]) == {1}, (kind, per_kind[kind])
    assert len(per_kind["ToolCallStarted"]) == 6


async def test_the_timeline_drawn_live_is_the_one_the_stored_rows_draw():
    _user, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    recorder = RunRecorder(run)
    shown = []
    for event in (
        ModelTurnStarted(iteration=1),
        ToolCallStarted(iteration=1, tool_call_id="a", name="lookup", args={"city": "x"}),
        ToolCallFinished(
            iteration=1,
            tool_call_id="a",
            name="lookup",
            status="success",
            result="ok",
            observation="ok",
            error="",
            duration_ms=0,
        ),
    ):
        shown.append((await recorder.record(event)).html)
    assert all("-timeline-body" in html for html in shown)  # each step event redrew it

    stored = await database_sync_to_async(store.run_with_steps)(run_id=run.pk)
    steps = await database_sync_to_async(lambda: list(stored.steps.all()))()
    assert [(s.kind, s.ordinal, s.status) for s in steps] == [
        (StepKind.MODEL_TURN, 1, "running"),
        (StepKind.TOOL_CALL, 2, "success"),
    ]
    now = timezone.now()
    live = timeline_of(recorder._run, recorder._steps, now=now)
    assert live == timeline_of(stored, steps, now=now)
    end = await recorder.record(RunFinished(status=RunStatus.SUCCEEDED, output="x", iterations=1))
    assert "-timeline-body" in end.html


async def test_a_second_step_with_a_taken_ordinal_is_refused():
    _user, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")

    def insert_twice() -> None:
        for _ in range(2):
            store.step_start(
                run_id=run.pk,
                run=run,
                ordinal=1,
                kind=StepKind.MODEL_TURN,
                iteration=1,
                started_at=run.started_at,
            )

    with pytest.raises(IntegrityError):
        await database_sync_to_async(insert_twice)()
    assert await database_sync_to_async(AgentStep.objects.count)() == 1


async def test_a_heartbeat_says_whether_a_stop_was_asked_in_one_call():
    _user, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    assert await database_sync_to_async(store.run_beat)(run_id=run.pk, at=utcnow()) is False
    await database_sync_to_async(store.run_request_cancel)(
        conversation_id=conversation.pk, at=utcnow()
    )
    assert await database_sync_to_async(store.run_beat)(run_id=run.pk, at=utcnow()) is True


async def test_streamed_text_is_resent_whole_on_every_tick_but_saved_every_few_seconds(
    monkeypatch,
):
    clock = FrozenClock()
    monkeypatch.setattr("chat.recorder.time", types.SimpleNamespace(monotonic=clock.monotonic))
    _user, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    recorder = RunRecorder(run)
    await recorder.record(ModelTurnStarted(iteration=1))
    step_id = recorder.turns[1].step.pk
    stored_text = database_sync_to_async(
        lambda: AgentStep.objects.values_list("text", flat=True).get(pk=step_id)
    )
    saved, words = [], []
    ticks = int(TEXT_SAVE_INTERVAL_S / TEXT_SYNC_INTERVAL_S) + 2
    for tick in range(ticks):
        clock.advance(TEXT_SYNC_INTERVAL_S + 0.01)
        words.append(f"w{tick} ")
        update = await recorder.record(TextDelta(iteration=1, text=words[-1]))
        assert update.streamed is not None and update.streamed.whole  # re-sent every tick
        saved.append(await stored_text() == "".join(words))

    # Saved at the turn's first re-send (a page loaded now has text), then once the save
    # interval has passed; never more than that interval behind.
    assert saved[0] and not all(saved)
    last_saved = max(i for i, ok in enumerate(saved) if ok)
    assert last_saved > 0
    assert (ticks - 1 - last_saved) * (TEXT_SYNC_INTERVAL_S + 0.01) < TEXT_SAVE_INTERVAL_S


async def test_a_write_left_for_the_next_event_is_made_by_the_run_end_if_no_step_came():
    """``write_with_next`` rides on the next event's database call; a run that ends before
    its first model turn (stopped at once) still makes it, with its end."""
    _user, conversation = await make_conversation()
    run = await database_sync_to_async(create_run)(conversation_id=conversation.pk, content="q")
    recorder = RunRecorder(run)
    made: list[str] = []
    recorder.write_with_next(lambda: made.append("snapshot"))
    assert made == []

    await recorder.record(RunFinished(status=RunStatus.CANCELLED, output="", iterations=0))

    assert made == ["snapshot"]
